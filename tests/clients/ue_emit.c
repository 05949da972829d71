/*
 * Register one user event, wait (bounded) until a tracer enables it, write
 * N records, unregister.  For tracing tools (trace-cmd, libtracefs readers)
 * that enable events themselves.
 *
 * usage: ue_emit TRACEFS_DIR COUNT      event: "emit u32 count; char[16] msg"
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

static volatile uint32_t enabled;

int main(int argc, char **argv)
{
	char path[512];
	if (argc < 3) {
		fprintf(stderr, "usage: %s TRACEFS_DIR COUNT\n", argv[0]);
		return 2;
	}
	int count = atoi(argv[2]);
	snprintf(path, sizeof path, "%s/user_events_data", argv[1]);
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	struct user_reg reg = {0};
	reg.size = sizeof reg;
	reg.enable_bit = 0;
	reg.enable_size = 4;
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.name_args = (uint64_t)(uintptr_t)"emit u32 count; char[16] msg";
	if (ioctl(fd, DIAG_IOCSREG, &reg)) {
		perror("DIAG_IOCSREG");
		return 1;
	}
	struct timespec start, now, pause = {0, 1000000};
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!(enabled & 1)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 10) {
			fprintf(stderr, "ue_emit: never enabled\n");
			return 1;
		}
		nanosleep(&pause, NULL);
	}
	for (uint32_t i = 0; i < (uint32_t)count; i++) {
		char msg[16];
		snprintf(msg, sizeof msg, "msg-%u", i);
		struct iovec io[3] = {
			{ &reg.write_index, sizeof reg.write_index },
			{ &i, sizeof i },
			{ msg, sizeof msg },
		};
		if (writev(fd, io, 3) < 0) {
			perror("writev");
			return 1;
		}
	}
	struct user_unreg unreg = { .size = sizeof unreg, .disable_addr = reg.enable_addr };
	ioctl(fd, DIAG_IOCSUNREG, &unreg);
	printf("ue_emit: wrote %d\n", count);
	return 0;
}
