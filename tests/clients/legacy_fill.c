/*
 * Fill the status page of an old user_events ABI: register "fill_<n>" events
 * until the kernel refuses, print how many succeeded and the errno that
 * stopped it.  usage: legacy_fill TRACEFS 5.18|6.1 MAX
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct user_reg_5_18 {       /* include/linux/user_events.h, 5.18 */
	uint32_t size;
	uint64_t name_args;
	uint32_t status_index;
	uint32_t write_index;
};

struct user_reg_6_1 {        /* 6.1 - 6.3 */
	uint32_t size;
	uint64_t name_args;
	uint32_t status_bit;
	uint32_t write_index;
} __attribute__((__packed__));

#define DIAG_IOCSREG _IOWR('*', 0, void *)

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s TRACEFS 5.18|6.1 MAX\n", argv[0]);
		return 2;
	}
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", argv[1]);
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	int old = strcmp(argv[2], "5.18") == 0, max = atoi(argv[3]), n;
	for (n = 0; n < max; n++) {
		char name[64];
		snprintf(name, sizeof name, "fill_%d u32 a", n);
		struct user_reg_5_18 a = { sizeof a, (uintptr_t)name, 0, 0 };
		struct user_reg_6_1 b = { sizeof b, (uintptr_t)name, 0, 0 };
		if (ioctl(fd, DIAG_IOCSREG, old ? (void *)&a : (void *)&b))
			break;
	}
	printf("registered=%d stopped=%s\n", n, n < max ? strerrorname_np(errno) : "no");
	return 0;
}
