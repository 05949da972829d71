/*
 * Drain one CPU's trace_pipe_raw without blocking, with read() or with
 * splice() into a pipe (libtracefs' tracefs_cpu_buffered_read), and report
 * what came out and how long it took.
 *
 * usage: reader_drain TRACEFS_DIR CPU read|splice
 * Prints: "<mode>: pages=<n> events_bytes=<sum of commits> calls=<n> usec=<t>"
 * and, per page, nothing (the test only needs the totals).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned char buf[1 << 16];

static uint64_t commit_bytes(const unsigned char *page)
{
	uint64_t commit;
	memcpy(&commit, page + 8, 8);
	return commit & ((1u << 27) - 1);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s TRACEFS_DIR CPU read|splice\n", argv[0]);
		return 2;
	}
	int use_splice = !strcmp(argv[3], "splice");
	char path[512];
	snprintf(path, sizeof path, "%s/per_cpu/cpu%s/trace_pipe_raw", argv[1], argv[2]);
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		perror(path);
		return errno;
	}
	int p[2];
	if (pipe(p)) {
		perror("pipe");
		return errno;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long pages = 0, calls = 0;
	uint64_t bytes = 0;
	for (;;) {
		ssize_t n;
		calls++;
		if (use_splice) {
			n = splice(fd, NULL, p[1], NULL, sizeof buf, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				ssize_t got = 0;
				while (got < n) {
					ssize_t k = read(p[0], buf + got, n - got);
					if (k <= 0)
						return 1;
					got += k;
				}
			}
		} else {
			n = read(fd, buf, 4096);
		}
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			printf("%s: unexpected %zd (%s)\n", argv[3], n, n ? strerror(errno) : "EOF");
			return 1;
		}
		for (ssize_t off = 0; off + 4096 <= n; off += 4096) {
			pages++;
			bytes += commit_bytes(buf + off);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long usec = (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
	printf("%s: pages=%lu events_bytes=%llu calls=%lu usec=%ld\n", argv[3], pages,
	       (unsigned long long)bytes, calls, usec);
	return 0;
}
