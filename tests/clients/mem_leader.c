// A process whose thread-group leader exits first (pthread_exit) while a second
// thread lives on, so that its tgid names a leader without an mm.
//
// The surviving thread joins the leader (the kernel clears the leader's tid and
// wakes the joiner from exit_mm_release()), prints "pid=<tgid> tid=<tid>
// word=<addr>", then serves stdin: "word" prints the value in hex, "quit" ends
// the process. The leader may still be finishing do_exit() when the line is
// printed: wait for its exit event before relying on it having no mm.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

volatile uint32_t word = 0x55667788;
static pthread_t leader_thread;

static void *survivor(void *arg)
{
	(void)arg;
	if (pthread_join(leader_thread, NULL))
		return NULL;
	printf("pid=%d tid=%ld word=%p\n", getpid(), (long)syscall(SYS_gettid), (void *)&word);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strcmp(line, "word\n"))
			printf("%x\n", (unsigned)word);
		else if (!strcmp(line, "quit\n"))
			break;
	}
	return NULL;
}

int main(void)
{
	pthread_t t;
	setvbuf(stdout, NULL, _IOLBF, 0);
	leader_thread = pthread_self();
	if (pthread_create(&t, NULL, survivor, NULL))
		return 1;
	pthread_exit(NULL);
}
