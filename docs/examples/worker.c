/*
 * worker: a forked child emits through its parent's registration.
 *
 *     job u32 worker; u32 item
 *
 * The child inherits the open user_events_data file, the write index and
 * the enable bit: the kernel keeps the bit up to date in the child's copy of
 * the variable too, so the child checks it and writes exactly like the parent.
 *
 * usage: worker ITEMS              the parent and one child each emit ITEMS
 *                                  events (worker 0 is the parent)
 * build: cc -Wall -o worker worker.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user_events.h"

static uint32_t job_enabled;
static struct user_reg reg;

static void emit(int fd, uint32_t worker, uint32_t items)
{
	for (uint32_t item = 0; item < items; item++) {
		if (!(job_enabled & 1))
			continue;
		struct iovec io[] = {
			{ &reg.write_index, sizeof(reg.write_index) },
			{ &worker, sizeof(worker) },
			{ &item, sizeof(item) },
		};
		if (writev(fd, io, 3) < 0 && errno != EBADF)
			perror("writev");
	}
}

int main(int argc, char **argv)
{
	uint32_t items = argc > 1 ? (uint32_t)atoi(argv[1]) : 3;
	int fd = open(USER_EVENTS_DATA_PATH, O_RDWR);
	if (fd < 0) {
		perror(USER_EVENTS_DATA_PATH);
		return 1;
	}
	reg.size = sizeof(reg);
	reg.enable_bit = 0;
	reg.enable_size = sizeof(job_enabled);
	reg.enable_addr = (uint64_t)(uintptr_t)&job_enabled;
	reg.name_args = (uint64_t)(uintptr_t)"job u32 worker; u32 item";
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		perror("DIAG_IOCSREG");
		return 1;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		emit(fd, 1, items);
		_exit(0);
	}
	emit(fd, 0, items);
	int status;
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "worker: the child failed\n");
		return 1;
	}
	return 0;
}
