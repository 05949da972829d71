/*
 * Writes that FUSE cannot pass as one request (issue 11, items 4 and 7).
 *
 * usage: split_write TRACEFS_DIR MODE [disabled]
 *   iov300    writev of 300 iovecs of 4 bytes (index first): 1200 bytes
 *   iov1024   writev of 1024 iovecs of 1 byte (the index spread over 4)
 *   mib       write(2) of 1 MiB (index first)
 *   unmapped  writev [index][16 bytes at an unmapped address]
 *   cutshort  writev [index][4 bytes] (answered, not printed), then writev
 *             [index][300 bytes][16 bytes at an unmapped address]: FUSE sends
 *             the 304 readable bytes, a request three iovecs could fill
 * Registers "split_write u32 first" (enabled unless "disabled"), writes,
 * prints "<mode> rc=<result> errno=<name>", unregisters.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;

static void set_enable(const char *value)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/events/user_events/split_write/enable", dir);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, value, 1) != 1) {
		perror(path);
		exit(2);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: split_write TRACEFS_DIR MODE [disabled]\n");
		return 2;
	}
	dir = argv[1];
	const char *mode = argv[2];
	char path[4096];
	snprintf(path, sizeof(path), "%s/user_events_data", dir);
	int fd = open(path, O_RDWR);
	static uint32_t word;
	struct user_reg reg = {.size = sizeof(reg), .enable_size = 4,
			       .enable_addr = (uint64_t)&word,
			       .name_args = (uint64_t)"split_write u32 first"};
	if (fd < 0 || ioctl(fd, DIAG_IOCSREG, &reg)) {
		perror("register");
		return 2;
	}
	if (argc < 4)
		set_enable("1");
	int32_t index = (int32_t)reg.write_index;
	ssize_t rc = -1;
	if (!strcmp(mode, "iov300") || !strcmp(mode, "iov1024")) {
		int n = !strcmp(mode, "iov300") ? 300 : 1024;
		size_t each = n == 300 ? 4 : 1;
		static unsigned char bytes[1200];
		static struct iovec iov[1024];
		memcpy(bytes, &index, 4);
		for (size_t i = 4; i < sizeof(bytes); i++)
			bytes[i] = (unsigned char)i;
		for (int i = 0; i < n; i++)
			iov[i] = (struct iovec){bytes + i * each, each};
		rc = writev(fd, iov, n);
	} else if (!strcmp(mode, "mib")) {
		unsigned char *buf = malloc(1 << 20);
		memset(buf, 7, 1 << 20);
		memcpy(buf, &index, 4);
		rc = write(fd, buf, 1 << 20);
	} else if (!strcmp(mode, "unmapped")) {
		void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(hole, 4096);
		struct iovec iov[2] = {{&index, 4}, {hole, 16}};
		rc = writev(fd, iov, 2);
	} else if (!strcmp(mode, "cutshort")) {
		static unsigned char readable[300];
		void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(hole, 4096);
		memset(readable, 7, sizeof(readable));
		/* A first, good write: the fast path knows this thread from then on. */
		struct iovec warm[2] = {{&index, 4}, {readable, 4}};
		(void)!writev(fd, warm, 2);
		struct iovec iov[3] = {{&index, 4}, {readable, 300}, {hole, 16}};
		rc = writev(fd, iov, 3);
	}
	printf("%s rc=%zd errno=%s\n", mode, rc, rc < 0 ? strerrorname_np(errno) : "0");
	if (argc < 4)
		set_enable("0");
	struct user_unreg u = {.size = sizeof(u), .disable_addr = (uint64_t)&word};
	ioctl(fd, DIAG_IOCSUNREG, &u);
	return 0;
}
