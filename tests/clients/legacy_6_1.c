// A 6.1-era user_events program (samples/user_events/example.c of 6.1): one
// bit per event in the page mapped from user_events_status.
//
// usage: legacy_6_1 TRACEFS [COMMAND]       (COMMAND defaults to "test u32 count")
//
// Maps the status page, registers COMMAND through a 20-byte packed struct
// user_reg and prints "registered bit=N write_index=M" (or "register=ERRNO" and
// exits with errno). Then it obeys stdin, one command per line, printing
// key=value lines:
//   check      enabled=0|1 (the long-word test of example.c) and, when enabled,
//              writes one record like example.c: wrote=BYTES|ERRNO count=N
//   write      writes one record whatever the page says: write=BYTES|ERRNO
//   enable N   writes N to TRACEFS/events/user_events/<name>/enable: enable=0|ERRNO
//   text       the text of user_events_status, C-escaped: text=...
//   quit       (or end of input) exits 0
// Builds on the host (tests/conftest.py c_client) and statically for the 6.1
// oracle: gcc -static -O2 -Wall -Wextra legacy_6_1.c -o legacy_6_1
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // strerrorname_np
#endif
#include <endian.h>
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
#include <asm/bitsperlong.h>

// include/linux/user_events.h of 6.1 (no system header has it).
struct user_reg {
	uint32_t size;          // Input: Size of the user_reg structure being used
	uint64_t name_args;     // Input: Pointer to string with event name, description and flags
	uint32_t status_bit;    // Output: Bitwise index of the event within the status page
	uint32_t write_index;   // Output: Index of the event to use when writing data
} __attribute__((__packed__));

#define DIAG_IOC_MAGIC '*'
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)

#if __BITS_PER_LONG == 64
#define endian_swap(x) htole64(x)
#else
#define endian_swap(x) htole32(x)
#endif

static char root[2048];

static void die(const char *what)
{
	int e = errno;
	printf("%s=%s\n", what, strerrorname_np(e) ? strerrorname_np(e) : "?");
	exit(e ? e : 1);
}

static int event_status(long **status)
{
	char path[2100];
	snprintf(path, sizeof path, "%s/user_events_status", root);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	*status = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return *status == MAP_FAILED ? -1 : 0;
}

static int event_reg(int fd, const char *command, long *index, long *mask, int *write,
		     unsigned *bit)
{
	struct user_reg reg = {0};

	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)command;
	if (ioctl(fd, DIAG_IOCSREG, &reg) == -1)
		return -1;
	*index = reg.status_bit / __BITS_PER_LONG;
	*mask = endian_swap(1L << (reg.status_bit % __BITS_PER_LONG));
	*write = reg.write_index;
	*bit = reg.status_bit;
	return 0;
}

static void print_escaped(const char *key, const char *s, size_t n)
{
	printf("%s=", key);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\n')
			fputs("\\n", stdout);
		else if (s[i] == '\\')
			fputs("\\\\", stdout);
		else
			putchar(s[i]);
	}
	putchar('\n');
}

int main(int argc, char **argv)
{
	const char *command = argc > 2 ? argv[2] : "test u32 count";
	char name[512], path[2700], line[256];
	int data_fd, write_index;
	long index, mask, *status_page;
	unsigned bit;
	uint32_t count = 0;
	struct iovec io[2];

	if (argc < 2) {
		fprintf(stderr, "usage: %s TRACEFS [COMMAND]\n", argv[0]);
		return 2;
	}
	snprintf(root, sizeof root, "%s", argv[1]);
	snprintf(name, sizeof name, "%.*s", (int)strcspn(command, ": "), command);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (event_status(&status_page) == -1)
		die("mmap");
	snprintf(path, sizeof path, "%s/user_events_data", root);
	data_fd = open(path, O_RDWR);
	if (data_fd < 0)
		die("open");
	if (event_reg(data_fd, command, &index, &mask, &write_index, &bit) == -1)
		die("register");
	printf("registered bit=%u write_index=%d\n", bit, write_index);

	io[0].iov_base = &write_index;
	io[0].iov_len = sizeof(write_index);
	io[1].iov_base = &count;
	io[1].iov_len = sizeof(count);

	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "check") == 0) {
			// Check if anyone is listening
			int enabled = !!(status_page[index] & mask);
			printf("enabled=%d\n", enabled);
			if (enabled) {
				ssize_t n = writev(data_fd, (const struct iovec *)io, 2);
				if (n < 0)
					printf("wrote=%s count=%u\n", strerrorname_np(errno), count);
				else
					printf("wrote=%zd count=%u\n", n, count++);
			}
		} else if (strcmp(line, "write") == 0) {
			ssize_t n = writev(data_fd, (const struct iovec *)io, 2);
			if (n < 0)
				printf("write=%s\n", strerrorname_np(errno));
			else
				printf("write=%zd\n", n);
		} else if (strncmp(line, "enable ", 7) == 0) {
			snprintf(path, sizeof path, "%s/events/user_events/%s/enable", root, name);
			int fd = open(path, O_WRONLY);
			if (fd < 0 || write(fd, line + 7, strlen(line + 7)) < 0)
				printf("enable=%s\n", strerrorname_np(errno));
			else
				printf("enable=0\n");
			if (fd >= 0)
				close(fd);
		} else if (strcmp(line, "text") == 0) {
			static char buf[1 << 16];
			snprintf(path, sizeof path, "%s/user_events_status", root);
			int fd = open(path, O_RDONLY);
			ssize_t n, tot = 0;
			while (fd >= 0 && (n = read(fd, buf + tot, sizeof buf - tot)) > 0)
				tot += n;
			if (fd >= 0)
				close(fd);
			print_escaped("text", buf, tot);
		} else if (strcmp(line, "quit") == 0) {
			break;
		} else {
			printf("unknown=%s\n", line);
		}
	}
	return 0;
}
