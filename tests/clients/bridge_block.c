// Blocking reads on bridge_testfs's "block" file.
//
// usage: bridge_block wait FILE      read() until something happens; SIGINT
//                                    has a handler without SA_RESTART
//        bridge_block nonblock FILE  open blocking, then fcntl(O_NONBLOCK)
// Prints "read=<ret> errno=<name> ms=<elapsed>" after the read returns.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_sigint(int sig)
{
	(void)sig;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s wait|nonblock FILE\n", argv[0]);
		return EINVAL;
	}
	struct sigaction sa = {.sa_handler = on_sigint};  // no SA_RESTART
	sigaction(SIGINT, &sa, NULL);
	// A failure to see O_NONBLOCK would block forever: bound it.
	alarm(30);
	int fd = open(argv[2], O_RDONLY);
	if (fd < 0) {
		perror("open");
		return errno;
	}
	if (!strcmp(argv[1], "nonblock") &&
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		perror("fcntl");
		return errno;
	}
	char buf[64];
	double t0 = now_ms();
	ssize_t n = read(fd, buf, sizeof(buf));
	int err = errno;
	printf("read=%zd errno=%s ms=%.1f\n", n, n < 0 ? strerrorname_np(err) : "0",
	       now_ms() - t0);
	return 0;
}
