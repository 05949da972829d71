/*
 * The state `tracefs-fuse run` starts CMD in, seen from CMD (issue 21: the
 * command is started by a vfork whose child runs C, not by Popen's
 * preexec_fn; this pins down that nothing a command can see changed).
 *
 * usage: run_start_state FD_LIMIT IGNORED_SIGNAL
 *   FD_LIMIT: the soft RLIMIT_NOFILE run was started with (run raises its
 *   own to the hard limit; CMD gets this one back).
 *   IGNORED_SIGNAL: a signal run's caller ignored (ignored signals stay
 *   ignored across fork and exec).
 * prints: "ok <check>" for each of the 9 checks; "FAIL <check>: ..." and
 * exit 1 at the first wrong one.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

static void check(int ok, const char *what, long got)
{
	if (!ok) {
		printf("FAIL %s: got %ld\n", what, got);
		exit(1);
	}
	printf("ok %s\n", what);
}

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr, "usage: run_start_state FD_LIMIT IGNORED_SIGNAL\n");
	exit(2);
}

static long handler_of(int signum)
{
	struct sigaction sa;
	if (sigaction(signum, NULL, &sa))
		return -1;
	return sa.sa_handler == SIG_IGN ? 1 : sa.sa_handler == SIG_DFL ? 0 : 2;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		usage();
	long fd_limit = atol(argv[1]);
	int ignored = atoi(argv[2]);

	sigset_t mask;
	sigprocmask(SIG_SETMASK, NULL, &mask);
	long blocked = 0;
	for (int signum = 1; signum < 32; signum++)
		if (sigismember(&mask, signum))
			blocked |= 1L << signum;
	check(blocked == 0, "no signal blocked (run's SIGINT block is not inherited)", blocked);
	check(handler_of(SIGINT) == 0, "SIGINT default", handler_of(SIGINT));
	/* Python ignores both at start; Popen's restore_signals gave them back. */
	check(handler_of(SIGPIPE) == 0, "SIGPIPE default", handler_of(SIGPIPE));
	check(handler_of(SIGXFSZ) == 0, "SIGXFSZ default", handler_of(SIGXFSZ));
	check(handler_of(ignored) == 1, "the caller's ignored signal still ignored",
	      handler_of(ignored));

	int pdeathsig = -1;
	prctl(PR_GET_PDEATHSIG, &pdeathsig, 0, 0, 0);
	check(pdeathsig == SIGKILL, "PR_SET_PDEATHSIG is SIGKILL", pdeathsig);

	struct rlimit limit;
	getrlimit(RLIMIT_NOFILE, &limit);
	check((long)limit.rlim_cur == fd_limit, "RLIMIT_NOFILE soft limit restored",
	      (long)limit.rlim_cur);

	/* The perf filter: seccomp mode 2 (SECCOMP_MODE_FILTER). */
	long mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	check(mode == SECCOMP_MODE_FILTER, "under a seccomp filter", mode);

	/* Nothing of run's beyond stdio (its descriptors are close-on-exec). */
	long extra = 0;
	for (int fd = 3; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			extra++;
	check(extra == 0, "no descriptor beyond 0, 1 and 2", extra);
	return 0;
}
