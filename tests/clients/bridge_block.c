// Blocking reads on bridge_testfs's "block" file.
//
// usage: bridge_block wait FILE      read() until something happens; SIGINT
//                                    has a handler without SA_RESTART
//        bridge_block nonblock FILE  open blocking, then fcntl(O_NONBLOCK)
// Prints "read=<ret> errno=<name>" after the read returns.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_sigint(int sig)
{
	(void)sig;
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
	ssize_t n = read(fd, buf, sizeof(buf));
	printf("read=%zd errno=%s\n", n, n < 0 ? strerrorname_np(errno) : "0");
	return 0;
}
