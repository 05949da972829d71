/*
 * hello: the smallest user_events program. Registers one event,
 *
 *     hello u32 times; char[16] who
 *
 * and writes it once per greeting, but only while a tracer has it enabled.
 *
 * usage: hello [WHO] [TIMES]       (defaults: world, 1)
 * build: cc -Wall -o hello hello.c
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

#include "user_events.h"

/* The kernel keeps bit 0 of this set while the event is enabled. */
static uint32_t hello_enabled;

int main(int argc, char **argv)
{
	const char *who = argc > 1 ? argv[1] : "world";
	uint32_t times = argc > 2 ? (uint32_t)atoi(argv[2]) : 1;

	int fd = open(USER_EVENTS_DATA_PATH, O_RDWR);
	if (fd < 0) {
		perror(USER_EVENTS_DATA_PATH);
		return 1;
	}
	struct user_reg reg = {
		.size = sizeof(reg),
		.enable_bit = 0,
		.enable_size = sizeof(hello_enabled),
		.enable_addr = (uint64_t)(uintptr_t)&hello_enabled,
		.name_args = (uint64_t)(uintptr_t)"hello u32 times; char[16] who",
	};
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		perror("DIAG_IOCSREG");
		return 1;
	}

	char name[16] = {0};
	strncpy(name, who, sizeof(name) - 1);
	for (uint32_t i = 1; i <= times; i++) {
		printf("hello, %s (%u)\n", name, i);
		/* Costs nothing while nobody listens: one load and a branch. */
		if (hello_enabled & 1) {
			struct iovec io[] = {
				{ &reg.write_index, sizeof(reg.write_index) },
				{ &i, sizeof(i) },
				{ name, sizeof(name) },
			};
			/* EBADF: disabled since the check; nothing lost. */
			if (writev(fd, io, 3) < 0 && errno != EBADF)
				perror("writev");
		}
	}

	struct user_unreg unreg = {
		.size = sizeof(unreg),
		.disable_bit = 0,
		.disable_addr = (uint64_t)(uintptr_t)&hello_enabled,
	};
	ioctl(fd, DIAG_IOCSUNREG, &unreg);
	close(fd);
	return 0;
}
