// A process with a known memory layout, driven line by line from stdin.
//
// Layout at "base" (printed): page 0 read-write, page 1 read-only, page 2
// unmapped. Page 0 byte i holds (i & 0xff); page 1 byte i holds (0xff - (i & 0xff)).
// "word" is a u32 in .data, the typical home of a user_events enable bit.
//
// Commands (one per line); every reply is one line:
//   dump OFF LEN   hex of LEN bytes at base+OFF (pages 0-1 only)
//   word           the value of word, in hex
//   fork           fork a child that runs this image until we quit: "child=<pid>"
//   vmfork         the same with clone(CLONE_VM), as vfork/posix_spawn share
//                  the parent's mm (without suspending us): "child=<pid>"
//   thread         run a thread to its end and join it: "thread=<tid>"
//   forks N        fork N children that exit at once, reaping each: "forked=N"
//   exec           print "exec'd", then re-exec this program (which prints a
//                  new banner ending in "image=exec'd")
//   quit           reap the "fork" children (they end when we close their
//                  pipe) and exit(0)
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

volatile uint32_t word = 0x11223344;
static pid_t thread_tid;

static void *thread_main(void *arg)
{
	(void)arg;
	thread_tid = (pid_t)syscall(SYS_gettid);
	return NULL;
}

// Ends on EOF, i.e. once every holder of the pipe's write end has closed it
// (the parent at "quit", and "fork" children made later, which inherited it).
// Raw syscalls only: a CLONE_VM child shares the parent's stdio buffers.
static int wait_for_release(void *fds)
{
	int *p = fds;
	char c;
	close(p[1]);
	while (read(p[0], &c, 1) > 0)
		;
	return 0;
}

// p is this child's own pipe, left untouched afterwards: a CLONE_VM child
// reads it from shared memory.
static pid_t fork_waiter(int p[2], int share_mm)
{
	static char stack[16][64 * 1024];
	static int stacks;
	pid_t child;
	if (pipe(p))
		return -1;
	if (share_mm) {
		child = clone(wait_for_release, stack[stacks++] + sizeof stack[0],
			      CLONE_VM | SIGCHLD, p);
	} else {
		child = fork();
		if (child == 0)
			_exit(wait_for_release(p));
	}
	close(p[0]);
	return child;
}

int main(int argc, char **argv)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *base = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return 1;
	for (long i = 0; i < page; i++) {
		base[i] = i & 0xff;
		base[page + i] = 0xff - (i & 0xff);
	}
	if (mprotect(base + page, page, PROT_READ) || munmap(base + 2 * page, page))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("pid=%d base=%p page=%ld word=%p image=%s\n", getpid(), (void *)base, page,
	       (void *)&word, argc > 1 ? argv[1] : "first");

	pid_t children[16];
	int pipes[16][2], nchildren = 0;
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		long off, len, n;
		if (sscanf(line, "dump %ld %ld", &off, &len) == 2) {
			for (long i = 0; i < len; i++)
				printf("%02x", base[off + i]);
			printf("\n");
		} else if (!strcmp(line, "word\n")) {
			printf("%x\n", (unsigned)word);
		} else if ((!strcmp(line, "fork\n") || !strcmp(line, "vmfork\n")) && nchildren < 16) {
			children[nchildren] = fork_waiter(pipes[nchildren], line[0] == 'v');
			printf("child=%d\n", children[nchildren++]);
		} else if (!strcmp(line, "thread\n")) {
			pthread_t t;
			if (pthread_create(&t, NULL, thread_main, NULL) || pthread_join(t, NULL))
				return 4;
			printf("thread=%d\n", thread_tid);
		} else if (sscanf(line, "forks %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				pid_t c = fork();
				if (c == 0)
					_exit(0);
				waitpid(c, NULL, 0);
			}
			printf("forked=%ld\n", n);
		} else if (!strcmp(line, "exec\n")) {
			printf("exec'd\n");
			execl("/proc/self/exe", "mem_pages", "exec'd", (char *)NULL);
			return 3;
		} else if (!strcmp(line, "quit\n")) {
			break;
		} else {
			printf("?\n");
		}
	}
	for (int i = 0; i < nchildren; i++)
		close(pipes[i][1]);
	for (int i = 0; i < nchildren; i++)
		waitpid(children[i], NULL, 0);
	return 0;
}
