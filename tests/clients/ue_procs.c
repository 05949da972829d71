/*
 * user_events across threads and processes.
 *
 *   ue_procs DIR thread   register from a second thread; enable; bit seen
 *   ue_procs DIR fork     parent registers, forks; the child sees enable and
 *                         disable through its own copy of the word
 *   ue_procs DIR many N   N children each register an event and exit
 *
 * Prints "ok <check>" per check; the first wrong result prints
 * "FAIL <check>: ..." and exits 1 (a child's failure is the parent's too:
 * it checks the child's exit status). Waits for a bit are bounded spins
 * (the kernel updates forked children asynchronously too).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;
static volatile uint32_t word;

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	exit(1);
}

#define CHECK(cond, what) do { if (!(cond)) { printf("FAIL %s: not as expected\n", what); \
	exit(1); } printf("ok %s\n", what); } while (0)

static int open_data(void)
{
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	return fd;
}

static void reg(int fd, const char *command, volatile uint32_t *addr, int bit)
{
	struct user_reg r = {0};
	r.size = sizeof r;
	r.enable_bit = bit;
	r.enable_size = 4;
	r.enable_addr = (uint64_t)(uintptr_t)addr;
	r.name_args = (uint64_t)(uintptr_t)command;
	if (ioctl(fd, DIAG_IOCSREG, &r) != 0)
		die(command);
}

static void enable(const char *event, const char *value)
{
	char path[512];
	snprintf(path, sizeof path, "%s/events/user_events/%s/enable", dir, event);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, value, 1) != 1)
		die(path);
	close(fd);
}

/* Spin until (*addr & mask) == want, for at most 5 s. */
static int wait_bit(volatile uint32_t *addr, uint32_t mask, uint32_t want)
{
	struct timespec start, now, pause = {0, 1000000};
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if ((*addr & mask) == want)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 5)
			return 0;
		nanosleep(&pause, NULL);
	}
}

static void *thread_main(void *arg)
{
	reg(*(int *)arg, "thread_test u32 a", &word, 3);
	return NULL;
}

static int cmd_thread(void)
{
	int fd = open_data();
	pthread_t t;
	pthread_create(&t, NULL, thread_main, &fd);
	pthread_join(t, NULL);
	/* The enable write returns once every enabler's bit is written. */
	enable("thread_test", "1");
	CHECK(word & 8, "thread: bit set by enable");
	enable("thread_test", "0");
	CHECK(!(word & 8), "thread: bit cleared by disable");
	return 0;
}

static int cmd_fork(void)
{
	int fd = open_data();
	int to_child[2], to_parent[2];
	char c;
	reg(fd, "fork_test u32 a", &word, 0);
	if (pipe(to_child) || pipe(to_parent))
		die("pipe");
	pid_t pid = fork();
	if (pid == 0) {
		/* child: wait for "enabled", check; wait for "disabled", check */
		close(to_child[1]);
		close(to_parent[0]);
		if (read(to_child[0], &c, 1) != 1)
			die("child read");
		CHECK(wait_bit(&word, 1, 1), "child: enabled seen");
		if (write(to_parent[1], "k", 1) != 1 || read(to_child[0], &c, 1) != 1)
			die("child sync");
		CHECK(wait_bit(&word, 1, 0), "child: disabled seen");
		return 0;
	}
	/* Only the child holds these ends: its failure ends the parent's read. */
	close(to_child[0]);
	close(to_parent[1]);
	enable("fork_test", "1");
	/* The kernel sets it from a work item here: after fork() the page is
	 * shared copy-on-write and its pin with FOLL_NOFAULT fails. */
	CHECK(wait_bit(&word, 1, 1), "parent: enabled seen");
	if (write(to_child[1], "e", 1) != 1 || read(to_parent[0], &c, 1) != 1)
		die("parent sync");
	enable("fork_test", "0");
	if (write(to_child[1], "d", 1) != 1)
		die("parent write");
	int status;
	CHECK(wait_bit(&word, 1, 0), "parent: disabled seen");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "parent: child exited 0");
	return 0;
}

static int cmd_many(int n)
{
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			/* The parent never registered: each child starts from its
			 * clean word, whatever the siblings before it did. */
			char command[64];
			snprintf(command, sizeof command, "many_%d u32 a", i % 5);
			if (word != 0) {
				printf("FAIL many: child %d started with word %#x\n", i, word);
				_exit(1);
			}
			reg(open_data(), command, &word, 0);
			if (word != 0) {
				printf("FAIL many: child %d's disabled event set word %#x\n", i, word);
				_exit(1);
			}
			_exit(0);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("FAIL many: child %d failed\n", i);
			exit(1);
		}
	}
	printf("ok many: %d children registered and exited\n", n);
	CHECK(word == 0, "many: the parent's word untouched");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR thread|fork|many N\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[2], "thread"))
		return cmd_thread();
	if (!strcmp(argv[2], "fork"))
		return cmd_fork();
	if (!strcmp(argv[2], "many") && argc > 3)
		return cmd_many(atoi(argv[3]));
	return 2;
}
