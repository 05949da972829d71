/*
 * One syscall sequence on a ring-buffer file, given as steps; one output line
 * per step, so that a test can compare the whole transcript.
 *
 * usage: reader_block DIR STEP...
 *   open REL [nb]  open DIR/REL read-only (O_NONBLOCK with nb); later steps use it
 *   trunc REL      open DIR/REL O_WRONLY|O_TRUNC and close it (clears a buffer)
 *   read N         read(fd, N): "read N: <ret>|<ERRNO> <what>" where, for
 *                  trace_pipe_raw, what is the sub-buffer header if this read
 *                  starts one ("commit=<size> flags=<M|-><S|-> first=<raw id>")
 *                  or "zeros"/"data" for the rest of a page; for text files,
 *                  the text with newlines as \n
 *   nonblock       fcntl(F_SETFL, O_NONBLOCK) on the open file
 *   select MS      select() for reading: "select: readable|timeout"
 *   poll MS        poll() for POLLIN: "poll: <revents>|timeout"
 *   handler        SIGUSR1 handler without SA_RESTART (a signal makes EINTR)
 *   wake [nb]      a thread waits until this one is asleep in read(), then
 *                  (with nb) sets O_NONBLOCK and calls ioctl(fd, 0), which
 *                  is what libtracefs' tracefs_cpu_stop does, in the order
 *                  that is race-free on a kernel; prints "wake: <ioctl ret>"
 *                  before the next read's line
 *   ready          prints "ready" (the test then waits for the next step to block)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int fd = -1, raw, wake_nonblock, waking;
static pthread_t wake_thread;
static long page_pos;  /* bytes of the current sub-buffer already read (raw) */
static pid_t main_tid;

static const char *errname(int e)
{
	switch (e) {
	case EAGAIN: return "EAGAIN";
	case EINTR: return "EINTR";
	case EINVAL: return "EINVAL";
	case EIO: return "EIO";
	case ENODEV: return "ENODEV";
	case ENOTTY: return "ENOTTY";
	default: return strerror(e);
	}
}

static void describe_raw(const unsigned char *buf, ssize_t n)
{
	if (page_pos == 0 && n >= 16 + 12) {
		uint64_t commit;
		uint32_t first = 0, hdr;
		memcpy(&commit, buf + 8, 8);
		memcpy(&hdr, buf + 16, 4);
		if ((hdr & 31) != 0 && (hdr & 31) <= 28)
			memcpy(&first, buf + 16 + 4 + 8, 4);  /* raw_data id */
		printf(" commit=%llu flags=%c%c first=%#x",
		       (unsigned long long)(commit & ((1u << 27) - 1)),
		       commit & (1ull << 31) ? 'M' : '-', commit & (1ull << 30) ? 'S' : '-',
		       first);
	} else {
		int zero = 1;
		for (ssize_t i = 0; i < n; i++)
			zero &= !buf[i];
		printf(" %s", zero ? "zeros" : "data");
	}
	page_pos = (page_pos + n) % 4096;
}

static void do_read(size_t n)
{
	static unsigned char buf[1 << 16];
	ssize_t r = read(fd, buf, n);
	int saved = errno;
	if (waking) {  /* its line first: the order is then fixed */
		pthread_join(wake_thread, NULL);
		waking = 0;
	}
	errno = saved;
	printf("read %zu: ", n);
	if (r < 0) {
		printf("%s\n", errname(errno));
		return;
	}
	printf("%zd", r);
	if (raw) {
		if (r)
			describe_raw(buf, r);
	} else {
		putchar(' ');
		for (ssize_t i = 0; i < r; i++)
			fputs(buf[i] == '\n' ? "\\n" : (char[2]){(char)buf[i], 0}, stdout);
	}
	putchar('\n');
}

/* Is the main thread asleep in read(2)? Its syscall file starts with "0 " and
 * its state is S (entering read is not enough: the kernel's reader checks
 * O_NONBLOCK before it goes to sleep, and a wakeup before then is lost). */
static int main_blocked_in_read(void)
{
	char path[64], text[256] = "";
	int in_read = 0, asleep = 0;
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", main_tid);
	FILE *f = fopen(path, "r");
	if (f) {
		in_read = fgets(text, sizeof text, f) && !strncmp(text, "0 ", 2);
		fclose(f);
	}
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", main_tid);
	f = fopen(path, "r");
	if (f) {
		char *paren = fgets(text, sizeof text, f) ? strrchr(text, ')') : NULL;
		asleep = paren && paren[1] == ' ' && paren[2] == 'S';
		fclose(f);
	}
	return in_read && asleep;
}

static void *waker(void *arg)
{
	(void)arg;
	struct timespec tick = {0, 1000000};
	for (int i = 0; i < 10000 && !main_blocked_in_read(); i++)
		nanosleep(&tick, NULL);  /* bounded: 10 s */
	/* O_NONBLOCK first: the woken kernel reader re-checks it at once, and
	 * may beat an fcntl made after the ioctl (then it sleeps again). */
	if (wake_nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	int r = ioctl(fd, 0);
	printf("wake: %d\n", r < 0 ? -errno : r);
	fflush(stdout);
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	char path[512];
	setvbuf(stdout, NULL, _IOLBF, 0);
	main_tid = syscall(SYS_gettid);
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR STEP...\n", argv[0]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		const char *step = argv[i];
		const char *arg = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(step, "open")) {
			int nb = i + 2 < argc && !strcmp(argv[i + 2], "nb");
			snprintf(path, sizeof path, "%s/%s", argv[1], arg);
			fd = open(path, O_RDONLY | (nb ? O_NONBLOCK : 0));
			if (fd < 0) {
				printf("open %s: %s\n", arg, errname(errno));
				return 1;
			}
			raw = strstr(arg, "trace_pipe_raw") != NULL;
			page_pos = 0;
			i += 1 + nb;
		} else if (!strcmp(step, "trunc")) {
			snprintf(path, sizeof path, "%s/%s", argv[1], arg);
			int t = open(path, O_WRONLY | O_TRUNC);
			printf("trunc %s: %s\n", arg, t < 0 ? errname(errno) : "0");
			if (t >= 0)
				close(t);
			i++;
		} else if (!strcmp(step, "read")) {
			do_read(strtoul(arg, NULL, 0));
			i++;
		} else if (!strcmp(step, "nonblock")) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		} else if (!strcmp(step, "select")) {
			fd_set rfds;
			FD_ZERO(&rfds);
			FD_SET(fd, &rfds);
			long ms = atol(arg);
			struct timeval tv = { ms / 1000, ms % 1000 * 1000 };
			int r = select(fd + 1, &rfds, NULL, NULL, &tv);
			printf("select: %s\n", r < 0 ? errname(errno) : r ? "readable" : "timeout");
			i++;
		} else if (!strcmp(step, "poll")) {
			struct pollfd p = { fd, POLLIN, 0 };
			int r = poll(&p, 1, atoi(arg));
			if (r > 0)
				printf("poll: %#x\n", p.revents);
			else
				printf("poll: %s\n", r < 0 ? errname(errno) : "timeout");
			i++;
		} else if (!strcmp(step, "handler")) {
			struct sigaction sa = { .sa_handler = on_signal };  /* no SA_RESTART */
			sigaction(SIGUSR1, &sa, NULL);
		} else if (!strcmp(step, "wake")) {
			wake_nonblock = !strcmp(arg, "nb");
			i += wake_nonblock;
			pthread_create(&wake_thread, NULL, waker, NULL);
			waking = 1;
		} else if (!strcmp(step, "ready")) {
			printf("ready\n");
		} else {
			fprintf(stderr, "unknown step %s\n", step);
			return 2;
		}
	}
	return 0;
}
