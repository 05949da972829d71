// cflags: -no-pie -static
/*
 * user_events across process lineage: what a forked, orphaned, exec'd or
 * vforked process holds, per the kernel's user_event_mm_dup/_remove.
 *
 *   ue_lineage DIR fork        the child sees enable and disable in its copy,
 *                              writes through the inherited fd, and its
 *                              DIAG_IOCSUNREG leaves the parent's bit alone
 *   ue_lineage DIR orphan      a grandchild whose parent exited at once still
 *                              sees enable and disable
 *   ue_lineage DIR before      a child forked before the registration gets nothing
 *   ue_lineage DIR exec        a child that exec'd this program is never written to
 *   ue_lineage DIR vfork       a posix_spawn'd (vfork) child that exec'd: the same
 *   ue_lineage DIR refs        a child's enabler keeps the event after the
 *                              parent unregistered and closed; its exit deletes it
 *   ue_lineage DIR execdrop    a process that closed its fd and exec'd drops its
 *                              enabler: its new image sees the event deleted
 *                              (prints the delay as execdrop_ms=)
 *   ue_lineage DIR race N TARGET
 *                              N times: fork a child that execs TARGET at once
 *                              ("target" mode, e.g. a setuid-root copy of this
 *                              program) while someone else toggles the event;
 *                              counts children whose new image was written to
 *   ue_lineage euid            prints the effective uid (is a setuid copy in effect?)
 *   ue_lineage target          exec target: reports whether `word`, at the same
 *                              address as in the registering image (-no-pie),
 *                              ever changes
 *
 * Prints "ok <check>" per check; the first failure prints "FAIL <check>: ..."
 * and exits 1. Waits for another process's bit are bounded spins (5 s): the
 * kernel updates forked children asynchronously too.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

extern char **environ;

static const char *dir;
/* Fixed address (-no-pie): the same in every image of this program. */
volatile uint32_t word;
static int data_fd = -1;
static char name[64];

#define CHECK(cond, what) do { if (!(cond)) { printf("FAIL %s: %s\n", what, \
	errno ? strerror(errno) : "not as expected"); exit(1); } \
	printf("ok %s\n", what); fflush(stdout); } while (0)

static void path_of(char *out, size_t size, const char *rel)
{
	snprintf(out, size, "%s/%s", dir, rel);
}

static int open_data(void)
{
	char path[512];
	path_of(path, sizeof path, "user_events_data");
	return open(path, O_RDWR);
}

static int reg(int fd, const char *command, int *write_index)
{
	struct user_reg r = {0};
	r.size = sizeof r;
	r.enable_bit = 0;
	r.enable_size = 4;
	r.enable_addr = (uint64_t)(uintptr_t)&word;
	r.name_args = (uint64_t)(uintptr_t)command;
	int ret = ioctl(fd, DIAG_IOCSREG, &r);
	if (write_index)
		*write_index = r.write_index;
	return ret;
}

static int unreg(int fd)
{
	struct user_unreg u = {0};
	u.size = sizeof u;
	u.disable_bit = 0;
	u.disable_addr = (uint64_t)(uintptr_t)&word;
	return ioctl(fd, DIAG_IOCSUNREG, &u);
}

static int set_enable(const char *value)
{
	char rel[128], path[512];
	snprintf(rel, sizeof rel, "events/user_events/%s/enable", name);
	path_of(path, sizeof path, rel);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int ok = write(fd, value, 1) == 1;
	close(fd);
	return ok ? 0 : -1;
}

static int event_exists(void)
{
	char rel[128], path[512];
	struct stat st;
	snprintf(rel, sizeof rel, "events/user_events/%s", name);
	path_of(path, sizeof path, rel);
	return stat(path, &st) == 0;
}

static int wait_word(uint32_t want)
{
	struct timespec start, now, pause = {0, 1000000};
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (word == want)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 5)
			return 0;
		nanosleep(&pause, NULL);
	}
}

/* Until the event is gone (the kernel deletes from a work item). */
static int wait_deleted(void)
{
	struct timespec pause = {0, 1000000};
	for (int i = 0; i < 5000; i++) {
		if (!event_exists())
			return 1;
		nanosleep(&pause, NULL);
	}
	return 0;
}

static void send_byte(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		exit(2);
}

static char recv_byte(int fd)
{
	char c = 0;
	if (read(fd, &c, 1) != 1)
		return 0;
	return c;
}

static void setup(const char *scenario)
{
	char command[128];
	snprintf(name, sizeof name, "lin_%s_%d", scenario, getpid());
	snprintf(command, sizeof command, "%s u32 a", name);
	errno = 0;
	data_fd = open_data();
	CHECK(data_fd >= 0, "open user_events_data");
	int index = -1;
	CHECK(reg(data_fd, command, &index) == 0 && index >= 0, "register");
	CHECK((word & 1) == 0, "bit clear after registration");
}

static int child_status(pid_t pid)
{
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int scenario_fork(void)
{
	int to_child[2], to_parent[2];
	setup("fork");
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipes");
	pid_t pid = fork();
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		if (recv_byte(to_child[0]) != 'e' || !wait_word(1))
			_exit(3);
		/* The inherited fd and write index work in the child. */
		int index = 0;
		uint32_t a = 42;
		struct iovec io[2] = {{&index, sizeof index}, {&a, sizeof a}};
		if (writev(data_fd, io, 2) != 8)
			_exit(4);
		send_byte(to_parent[1], 's');
		if (recv_byte(to_child[0]) != 'd' || !wait_word(0))
			_exit(5);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	CHECK(set_enable("1") == 0 && word == 1, "parent bit set by enable");
	send_byte(to_child[1], 'e');
	CHECK(recv_byte(to_parent[0]) == 's', "child saw enable and wrote the event");
	CHECK(set_enable("0") == 0 && word == 0, "parent bit cleared by disable");
	send_byte(to_child[1], 'd');
	CHECK(child_status(pid) == 0, "child saw disable");

	/* abi_test "forks": a child's DIAG_IOCSUNREG leaves the parent alone. */
	CHECK(set_enable("1") == 0 && word == 1, "enabled again");
	pid = fork();
	if (pid == 0)
		_exit(unreg(data_fd) == 0 ? 0 : 10 + errno);
	CHECK(child_status(pid) == 0, "child unregistered its inherited enabler");
	CHECK(word == 1, "parent bit still set");
	CHECK(set_enable("0") == 0 && word == 0, "parent still follows the event");
	return 0;
}

static int scenario_orphan(void)
{
	int report[2];
	setup("orphan");
	CHECK(pipe(report) == 0, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		if (fork() == 0) {
			/* Orphaned at once: our parent exits below. */
			if (!wait_word(1))
				_exit(3);
			send_byte(report[1], '1');
			if (!wait_word(0))
				_exit(4);
			send_byte(report[1], '0');
			_exit(0);
		}
		_exit(0);
	}
	close(report[1]);
	CHECK(child_status(pid) == 0, "intermediate child exited");
	CHECK(set_enable("1") == 0 && word == 1, "enabled");
	CHECK(recv_byte(report[0]) == '1', "orphaned grandchild saw enable");
	CHECK(set_enable("0") == 0 && word == 0, "disabled");
	CHECK(recv_byte(report[0]) == '0', "orphaned grandchild saw disable");
	return 0;
}

static int scenario_before(void)
{
	int to_child[2], to_parent[2];
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipes");
	pid_t pid = fork();
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		if (recv_byte(to_child[0]) != 'c')
			_exit(3);
		send_byte(to_parent[1], word == 0 ? 'z' : 'w');
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	setup("before");
	CHECK(set_enable("1") == 0 && word == 1, "enabled after the fork");
	send_byte(to_child[1], 'c');
	CHECK(recv_byte(to_parent[0]) == 'z', "child forked before registering untouched");
	CHECK(child_status(pid) == 0, "child exited");
	CHECK(set_enable("0") == 0, "disabled");
	return 0;
}

/* Runs TARGET (this program, "target" mode), which must not be written. */
static int check_target(pid_t pid, int to_child, int from_child)
{
	CHECK(recv_byte(from_child) == 'r', "exec'd image ready");
	CHECK(set_enable("1") == 0 && word == 1, "enabled with the exec'd child alive");
	CHECK(set_enable("0") == 0 && set_enable("1") == 0, "toggled");
	send_byte(to_child, 'c');
	CHECK(recv_byte(from_child) == 'z', "exec'd image never written");
	CHECK(child_status(pid) == 0, "exec'd image exited");
	CHECK(set_enable("0") == 0, "disabled");
	return 0;
}

static int scenario_exec(const char *self, int spawn)
{
	int to_child[2], from_child[2];
	setup(spawn ? "vfork" : "exec");
	CHECK(pipe(to_child) == 0 && pipe(from_child) == 0, "pipes");
	char in[16], out[16];
	snprintf(in, sizeof in, "%d", to_child[0]);
	snprintf(out, sizeof out, "%d", from_child[1]);
	char *argv[] = {(char *)self, "target", in, out, NULL};
	/* The target must not hold the ends it does not use, or a failure hangs. */
	fcntl(to_child[1], F_SETFD, FD_CLOEXEC);
	fcntl(from_child[0], F_SETFD, FD_CLOEXEC);
	pid_t pid;
	if (spawn) {
		CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0, "posix_spawn");
	} else {
		pid = fork();
		if (pid == 0) {
			execv(self, argv);
			_exit(127);
		}
	}
	close(to_child[0]);
	close(from_child[1]);
	return check_target(pid, to_child[1], from_child[0]);
}

static int scenario_refs(void)
{
	int to_child[2], to_parent[2];
	setup("refs");
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipes");
	pid_t pid = fork();
	if (pid == 0) {
		/* Only the inherited enabler may hold the event, not the file. */
		close(data_fd);
		close(to_child[1]);
		close(to_parent[0]);
		send_byte(to_parent[1], 'c');
		recv_byte(to_child[0]);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	CHECK(recv_byte(to_parent[0]) == 'c', "child closed its copy of the file");
	CHECK(unreg(data_fd) == 0 && close(data_fd) == 0, "parent unregistered and closed");
	CHECK(event_exists(), "the child's inherited enabler keeps the event");
	send_byte(to_child[1], 'x');
	CHECK(child_status(pid) == 0, "child exited");
	CHECK(wait_deleted(), "event deleted after the child's exit");
	return 0;
}

static void spin_us(long us)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do
		clock_gettime(CLOCK_MONOTONIC, &now);
	while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < us);
}

static int scenario_execdrop(void)
{
	setup("execdrop");
	CHECK(close(data_fd) == 0, "closed the file: only the enabler holds the event");
	CHECK(event_exists(), "the enabler keeps the event");
	char *argv[] = {"/proc/self/exe", (char *)dir, "deleted?", name, NULL};
	execv(argv[0], argv);
	CHECK(0, "exec");
	return 1;
}

/* The image after execdrop's exec: wait for the event's deletion. */
static int wait_for_deletion(const char *event)
{
	struct timespec start, end;
	snprintf(name, sizeof name, "%s", event);
	clock_gettime(CLOCK_MONOTONIC, &start);
	errno = 0;
	CHECK(wait_deleted(), "the event went with the exec'd image's enabler");
	clock_gettime(CLOCK_MONOTONIC, &end);
	printf("execdrop_ms=%ld\n", (end.tv_sec - start.tv_sec) * 1000L +
	       (end.tv_nsec - start.tv_nsec) / 1000000L);
	return 0;
}

static int scenario_race(long rounds, const char *target)
{
	long written = 0, failed = 0;
	/* Other bits of the byte holding the enable bit, so that a byte written
	 * back into a fresh image (word 0) shows, whatever the event's state. */
	word = 0xa4;
	setup("race");
	printf("event %s\n", name);
	fflush(stdout);
	for (long i = 0; i < rounds; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			/* Exec 0-400 us after the fork, spread over the time the
			 * daemon takes to see a fork and act on it. */
			char *argv[] = {(char *)target, "target", "-1", "-1", NULL};
			spin_us((i * 37) % 400);
			execv(target, argv);
			_exit(127);
		}
		int status = child_status(pid);
		if (status == 1)
			written++;
		else if (status != 0)
			failed++;
	}
	printf("rounds=%ld written=%ld failed=%ld\n", rounds, written, failed);
	return written || failed ? 1 : 0;
}

/* The exec'd image. With pipes: report after being told; without: spin 0.2 ms. */
static int target(const char *in, const char *out)
{
	int to_me = atoi(in), to_parent = atoi(out);
	if (to_me < 0) {
		for (int i = 0; i < 200; i++) {
			if (word != 0)
				return 1;
			spin_us(1);
		}
		return word != 0;
	}
	send_byte(to_parent, 'r');
	if (recv_byte(to_me) != 'c')
		return 3;
	send_byte(to_parent, word == 0 ? 'z' : 'w');
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "target"))
		return target(argv[2], argv[3]);
	if (argc == 2 && !strcmp(argv[1], "euid")) {
		printf("euid=%d\n", (int)geteuid());
		return 0;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR fork|orphan|before|exec|vfork|refs|race N TARGET\n",
			argv[0]);
		return 2;
	}
	dir = argv[1];
	const char *scenario = argv[2];
	if (!strcmp(scenario, "fork"))
		return scenario_fork();
	if (!strcmp(scenario, "orphan"))
		return scenario_orphan();
	if (!strcmp(scenario, "before"))
		return scenario_before();
	if (!strcmp(scenario, "exec"))
		return scenario_exec("/proc/self/exe", 0);
	if (!strcmp(scenario, "vfork"))
		return scenario_exec("/proc/self/exe", 1);
	if (!strcmp(scenario, "refs"))
		return scenario_refs();
	if (!strcmp(scenario, "execdrop"))
		return scenario_execdrop();
	if (!strcmp(scenario, "deleted?") && argc == 4)
		return wait_for_deletion(argv[3]);
	if (!strcmp(scenario, "race") && argc == 5)
		return scenario_race(atol(argv[3]), argv[4]);
	fprintf(stderr, "unknown scenario %s\n", scenario);
	return 2;
}
