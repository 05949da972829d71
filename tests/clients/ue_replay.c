/*
 * Register user events and write payloads that a test built, byte for byte.
 *
 * usage: ue_replay SCRIPT
 *   SCRIPT lines:  reg COMMAND...      register (event k: bit k of its own word)
 *                  write K HEX         write HEX as event K's payload (after
 *                                      the write index); the event must be
 *                                      enabled already (auto-enable)
 * Prints "pid N" first, then "written N" at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../docs/examples/user_events.h"

#define MAX_EVENTS 64

static uint32_t enabled[MAX_EVENTS];
static uint32_t write_index[MAX_EVENTS];

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s SCRIPT\n", argv[0]);
		return 2;
	}
	FILE *script = fopen(argv[1], "r");
	if (!script) {
		perror(argv[1]);
		return 1;
	}
	int fd = open(USER_EVENTS_DATA_PATH, O_RDWR);
	if (fd < 0) {
		perror(USER_EVENTS_DATA_PATH);
		return 1;
	}
	printf("pid %d\n", (int)getpid());
	static char line[65536];
	static uint8_t payload[32768];
	int events = 0, written = 0;
	while (fgets(line, sizeof(line), script)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "reg ", 4)) {
			if (events == MAX_EVENTS) {
				fprintf(stderr, "too many events\n");
				return 1;
			}
			struct user_reg reg = {
				.size = sizeof(reg),
				.enable_bit = 0,
				.enable_size = 4,
				.enable_addr = (uint64_t)(uintptr_t)&enabled[events],
				.name_args = (uint64_t)(uintptr_t)(line + 4),
			};
			if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
				fprintf(stderr, "DIAG_IOCSREG %s: %s\n", line + 4, strerror(errno));
				return 1;
			}
			write_index[events++] = reg.write_index;
		} else if (!strncmp(line, "write ", 6)) {
			char *hex;
			long k = strtol(line + 6, &hex, 10);
			if (k < 0 || k >= events || *hex != ' ') {
				fprintf(stderr, "bad line: %s\n", line);
				return 2;
			}
			size_t n = 0;
			for (hex++; hex[0] && hex[1]; hex += 2) {
				int hi = hexval(hex[0]), lo = hexval(hex[1]);
				if (hi < 0 || lo < 0 || n == sizeof(payload)) {
					fprintf(stderr, "bad hex: %s\n", line);
					return 2;
				}
				payload[n++] = (uint8_t)(hi << 4 | lo);
			}
			if (!(enabled[k] & 1)) {
				fprintf(stderr, "event %ld is not enabled\n", k);
				return 1;
			}
			struct iovec io[] = {
				{ &write_index[k], sizeof(write_index[k]) },
				{ payload, n },
			};
			if (writev(fd, io, 2) < 0) {
				fprintf(stderr, "writev %ld: %s\n", k, strerror(errno));
				return 1;
			}
			written++;
		}
	}
	printf("written %d\n", written);
	return 0;
}
