/*
 * A clone(CLONE_VM) child outliving the process that registered (issue 19
 * item 6). The kernel shares the registrant's user_event_mm with the child
 * (user_events_fork, CLONE_VM) and keeps updating the mm until its last user
 * is gone; the registrant's exit changes nothing for the child.
 *
 * usage: adv_clonevm TRACEFS_DIR
 *   The parent registers "adv_clonevm u32 n" (bit 0 of a word), starts a
 *   CLONE_VM child and prints "child PID" and "ready". Then stdin drives it,
 *   one byte a command:
 *     x  the parent exits (the child stays)
 *     1  the child waits (5 s at most) for the bit to be set, prints "set" or "NOT SET"
 *     0  the child waits for it to clear, prints "clear" or "NOT CLEAR"
 *     q  the child exits
 * Both read the same stdin: the parent reads until its 'x', the child after.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

static volatile uint32_t word;
static volatile int parent_gone;
static char stack[1 << 16] __attribute__((aligned(16)));

static void say(const char *line)
{
	/* write(2), not stdio: the two share memory, not a stdio lock's owner. */
	if (write(1, line, strlen(line)) < 0)
		_exit(1);
}

static int wait_bit(uint32_t want)
{
	struct timespec start, now, pause = {0, 1000000};
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if ((word & 1) == want)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 5)
			return 0;
		nanosleep(&pause, NULL);
	}
}

static int child(void *arg)
{
	(void)arg;
	while (!parent_gone)
		sched_yield();
	for (;;) {
		char c;
		if (read(0, &c, 1) != 1 || c == 'q')
			_exit(0);
		if (c == '1')
			say(wait_bit(1) ? "set\n" : "NOT SET\n");
		else if (c == '0')
			say(wait_bit(0) ? "clear\n" : "NOT CLEAR\n");
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS_DIR\n", argv[0]);
		return 2;
	}
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", argv[1]);
	int fd = open(path, O_RDWR);
	struct user_reg r = {.size = sizeof r, .enable_bit = 0, .enable_size = 4,
			     .enable_addr = (uint64_t)(uintptr_t)&word,
			     .name_args = (uint64_t)(uintptr_t)"adv_clonevm u32 n"};
	if (fd < 0 || ioctl(fd, DIAG_IOCSREG, &r) != 0) {
		printf("FAIL register: %s\n", strerrorname_np(errno));
		return 1;
	}
	pid_t pid = clone(child, stack + sizeof stack, CLONE_VM | SIGCHLD, NULL);
	if (pid < 0) {
		printf("FAIL clone: %s\n", strerrorname_np(errno));
		return 1;
	}
	char line[32];
	snprintf(line, sizeof line, "child %d\n", (int)pid);
	say(line);
	say("ready\n");
	for (;;) {
		char c;
		if (read(0, &c, 1) != 1) {
			parent_gone = 1;  /* the child then reads the end too, and exits */
			_exit(1);
		}
		if (c == 'x') {
			parent_gone = 1;
			_exit(0);
		}
	}
}
