/*
 * Many clients in a row, to count what the daemon keeps per client (issue 19
 * items 1 and 2): a daemon that keeps a descriptor per client it has seen runs
 * out of them after about a thousand.
 *
 * usage: adv_fds TRACEFS_DIR procs N    N processes, one after another: each
 *                                       opens user_events_data, registers
 *                                       "adv_fds u32 n", writes n once, exits
 *        adv_fds TRACEFS_DIR threads N  one registration, then N threads, one
 *                                       after another, each writing once
 *        adv_fds TRACEFS_DIR hold N     N children that register and stay;
 *                                       prints "held: OK REFUSED" (refused:
 *                                       the registration failed with ENOMEM)
 *                                       and "ready", then waits for a line on
 *                                       stdin and ends them
 * Prints "procs: N" / "threads: N" (how many wrote their record); any other
 * answer than the full count is a failure (exit 1, with the call and errno).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;
static volatile uint32_t word;
static int data_fd;
static uint32_t write_index;

static void fail(const char *call, long n)
{
	printf("FAIL %s (%ld): %s\n", call, n, strerrorname_np(errno));
	exit(1);
}

static int open_data(int flags)
{
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	return open(path, flags);
}

static int reg(int fd)
{
	struct user_reg r = {.size = sizeof r, .enable_bit = 0, .enable_size = 4,
			     .enable_addr = (uint64_t)(uintptr_t)&word,
			     .name_args = (uint64_t)(uintptr_t)"adv_fds u32 n"};
	if (ioctl(fd, DIAG_IOCSREG, &r) != 0)
		return -1;
	write_index = r.write_index;
	return 0;
}

static int write_once(uint32_t n)
{
	struct iovec io[2] = {{&write_index, sizeof write_index}, {&n, sizeof n}};
	return writev(data_fd, io, 2) == (ssize_t)(sizeof write_index + sizeof n) ? 0 : -1;
}

static int one_process(long i)
{
	data_fd = open_data(O_RDWR);
	if (data_fd < 0)
		fail("open", i);
	if (reg(data_fd) != 0)
		fail("register", i);
	if (write_once((uint32_t)i) != 0)
		fail("writev", i);
	return 0;
}

static void *one_thread(void *arg)
{
	return (void *)(intptr_t)write_once((uint32_t)(uintptr_t)arg);
}

static long cmd_procs(long n)
{
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			fail("fork", i);
		if (pid == 0)
			_exit(one_process(i));
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			exit(1); /* the child said why */
	}
	return n;
}

static long cmd_threads(long n)
{
	data_fd = open_data(O_RDWR);
	if (data_fd < 0)
		fail("open", -1);
	if (reg(data_fd) != 0)
		fail("register", -1);
	for (long i = 0; i < n; i++) {
		pthread_t t;
		void *rc;
		if (pthread_create(&t, NULL, one_thread, (void *)(uintptr_t)i) != 0)
			fail("pthread_create", i);
		pthread_join(t, &rc);
		if (rc != NULL)
			fail("writev", i);
	}
	return n;
}

static int cmd_hold(long n)
{
	int to_children[2], from_child[2];
	pid_t *pids = calloc(n, sizeof *pids);
	long ok = 0, refused = 0;
	if (pipe(to_children) || pipe(from_child))
		fail("pipe", -1);
	for (long i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			fail("fork", i);
		if (pids[i] == 0) {
			char c = 'k';
			close(to_children[1]);
			close(from_child[0]);
			/* Read-only: enough to register (a --gid member's 0640). */
			data_fd = open_data(O_RDONLY);
			if (data_fd < 0)
				c = 'o';
			else if (reg(data_fd) != 0)
				c = errno == ENOMEM ? 'r' : 'e';
			if (write(from_child[1], &c, 1) != 1)
				_exit(1);
			/* Stay (holding the registration) until the parent's pipe closes. */
			if (read(to_children[0], &c, 1) < 0)
				_exit(1);
			_exit(0);
		}
		char c;
		if (read(from_child[0], &c, 1) != 1)
			fail("read", i);
		if (c == 'k')
			ok++;
		else if (c == 'r')
			refused++;
		else
			fail(c == 'o' ? "open" : "register", i);
	}
	printf("held: %ld %ld\nready\n", ok, refused);
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		fail("stdin", -1);
	close(to_children[1]);
	for (long i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s TRACEFS_DIR procs|threads|hold N\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	long n = atol(argv[3]);
	if (!strcmp(argv[2], "procs"))
		printf("procs: %ld\n", cmd_procs(n));
	else if (!strcmp(argv[2], "threads"))
		printf("threads: %ld\n", cmd_threads(n));
	else if (!strcmp(argv[2], "hold"))
		return cmd_hold(n);
	else
		return 2;
	return 0;
}
