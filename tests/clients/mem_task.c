// A process and a second thread, each pinned to a CPU and named, for reading
// their CPU and comm back from /proc.
//
// usage: mem_task CPU COMM THREAD_CPU THREAD_COMM
// Prints "pid=<tgid> tid=<thread id>" once both are pinned and named, then
// waits for "quit" on stdin (both threads sleep meanwhile).
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ready[2], release[2];
static char **args;

static int pin_and_name(const char *cpu, const char *comm)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(cpu), &set);
	// Returns once the calling thread runs on that CPU (migration is synchronous).
	return sched_setaffinity(0, sizeof set, &set) || prctl(PR_SET_NAME, comm);
}

static void *thread_main(void *arg)
{
	(void)arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	if (pin_and_name(args[3], args[4]))
		tid = -1;
	if (write(ready[1], &tid, sizeof tid) != sizeof tid)
		return NULL;
	char c;
	if (read(release[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	pid_t tid;
	if (argc != 5 || pipe(ready) || pipe(release))
		return 1;
	args = argv;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pthread_create(&t, NULL, thread_main, NULL))
		return 2;
	if (read(ready[0], &tid, sizeof tid) != sizeof tid || tid < 0)
		return 3;
	if (pin_and_name(argv[1], argv[2]))
		return 4;
	printf("pid=%d tid=%d\n", getpid(), tid);
	char line[64];
	while (fgets(line, sizeof line, stdin) && strcmp(line, "quit\n"))
		;
	close(release[1]);
	pthread_join(t, NULL);
	return 0;
}
