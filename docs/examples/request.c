/*
 * request: an event with several fields and a string of any length.
 *
 *     http_request u16 status; u64 bytes; u32 micros; __rel_loc char[] path
 *
 * A __rel_loc field is a 32-bit slot in the fixed part of the record; the
 * string itself follows the fixed fields, and the slot says where:
 * DYN_LOC(offset from the end of the slot, size including the NUL).
 *
 * usage: request PATH...           one event per PATH: status 200, or 404
 *                                  for paths starting with /missing
 * build: cc -Wall -o request request.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "user_events.h"

static uint32_t request_enabled;

/* The fixed part of the record, packed as the event declares it. */
struct http_request {
	uint16_t status;
	uint64_t bytes;
	uint32_t micros;
	uint32_t path; /* __rel_loc: the string follows this struct */
} __attribute__((__packed__));

int main(int argc, char **argv)
{
	int fd = open(USER_EVENTS_DATA_PATH, O_RDWR);
	if (fd < 0) {
		perror(USER_EVENTS_DATA_PATH);
		return 1;
	}
	struct user_reg reg = {
		.size = sizeof(reg),
		.enable_bit = 0,
		.enable_size = sizeof(request_enabled),
		.enable_addr = (uint64_t)(uintptr_t)&request_enabled,
		.name_args = (uint64_t)(uintptr_t)
			"http_request u16 status; u64 bytes; u32 micros; __rel_loc char[] path",
	};
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		perror("DIAG_IOCSREG");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		const char *path = argv[i];
		size_t size = strlen(path) + 1;
		struct http_request fixed = {
			.status = strncmp(path, "/missing", 8) ? 200 : 404,
			.bytes = 1000u * (uint64_t)i,
			.micros = 250u * (uint32_t)i,
			/* The string starts right after the slot: offset 0. */
			.path = DYN_LOC(0, size),
		};
		if (!(request_enabled & 1))
			continue;
		struct iovec io[] = {
			{ &reg.write_index, sizeof(reg.write_index) },
			{ &fixed, sizeof(fixed) },
			{ (void *)path, size },
		};
		if (writev(fd, io, 3) < 0 && errno != EBADF)
			perror("writev");
	}
	close(fd);
	return 0;
}
