/*
 * Register one user event, write COUNT records while it is enabled, then
 * hold everything open until a line can be read from FIFO.  While it waits
 * the program makes no request: whatever a follower of the buffers sees of
 * it must have reached them without one.
 *
 * usage: emit_and_wait TRACEFS_DIR COUNT FIFO     event: "held u32 n"
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "user_events_uapi.h"

static volatile uint32_t enabled;

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s TRACEFS_DIR COUNT FIFO\n", argv[0]);
		return 2;
	}
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", argv[1]);
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	struct user_reg reg = {
		.size = sizeof reg, .enable_bit = 0, .enable_size = 4,
		.enable_addr = (uint64_t)(uintptr_t)&enabled,
		.name_args = (uint64_t)(uintptr_t)"held u32 n"};
	if (ioctl(fd, DIAG_IOCSREG, &reg)) {
		perror("DIAG_IOCSREG");
		return 1;
	}
	for (uint32_t n = 1; n <= (uint32_t)atoi(argv[2]); n++) {
		struct iovec io[2] = {
			{ &reg.write_index, sizeof reg.write_index },
			{ &n, sizeof n },
		};
		if ((enabled & 1) && writev(fd, io, 2) < 0) {
			perror("writev");
			return 1;
		}
	}
	char line[16];
	FILE *fifo = fopen(argv[3], "r");
	if (!fifo || !fgets(line, sizeof line, fifo)) {
		perror(argv[3]);
		return 1;
	}
	return 0;
}
