/*
 * Marker writes whose ring-buffer layout a reader can compare between a real
 * tracefs and tracefs-fuse: every record encoding and sub-buffer boundary we
 * know of, from one task pinned to CPU 0. Runs unchanged against both (for a
 * real kernel, point it at a private instance). RM_CPU=<n> pins to CPU n.
 *
 * usage: reader_marks DIR layout|overflow|raw N LEN
 *   layout:   short, padded and long raw records, text markers with and
 *             without a newline, a 0.3 s pause (a TIME_EXTEND record), a
 *             text marker truncated at 4054 bytes, a raw record filling a
 *             sub-buffer alone, then enough small records to fill pages
 *             (with end-of-page padding) and leave one partial.
 *   overflow: a 0.3 s pause, then 200 raw records of 112 bytes, for a
 *             buffer too small to hold them (the test sets buffer_size_kb
 *             to 7 first).
 *   raw N LEN: N raw records with ids 0x1000.. and LEN payload bytes.
 * Prints "wrote <n>", or "stall" (exit 75) if any two writes that should be
 * back to back were 100 ms or more apart: a spurious TIME_EXTEND would then
 * make the layouts differ, so the caller runs it again.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int raw_fd, text_fd, written, stalled;
static struct timespec last;

#define CHECK(cond, what) do { if (!(cond)) { int e = errno; \
	printf("FAIL %s: %s\n", what, strerror(e)); exit(e ? e : 1); } } while (0)

static long ms_since_last(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000;
	last = now;
	return ms;
}

static void put(int fd, const void *buf, size_t len, ssize_t expect)
{
	/* Only gaps before a write matter (the time between two records). */
	if (written && ms_since_last() >= 100)
		stalled = 1;
	CHECK(write(fd, buf, len) == expect, fd == raw_fd ? "trace_marker_raw" : "trace_marker");
	ms_since_last();
	written++;
}

static void raw(uint32_t id, size_t len, unsigned char fill)
{
	static unsigned char buf[4096];
	memcpy(buf, &id, 4);
	memset(buf + 4, fill, len);
	put(raw_fd, buf, 4 + len, 4 + len);
}

static void text(const char *s)
{
	put(text_fd, s, strlen(s), strlen(s));
}

int main(int argc, char **argv)
{
	char path[512];
	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: %s DIR layout|overflow|raw N LEN\n", argv[0]);
		return 2;
	}
	cpu_set_t cpu0;
	CPU_ZERO(&cpu0);
	CPU_SET(getenv("RM_CPU") ? atoi(getenv("RM_CPU")) : 0, &cpu0);
	CHECK(sched_setaffinity(0, sizeof cpu0, &cpu0) == 0, "sched_setaffinity");
	snprintf(path, sizeof path, "%s/trace_marker_raw", argv[1]);
	raw_fd = open(path, O_WRONLY);
	CHECK(raw_fd >= 0, path);
	snprintf(path, sizeof path, "%s/trace_marker", argv[1]);
	text_fd = open(path, O_WRONLY);
	CHECK(text_fd >= 0, path);

	struct timespec pause = {0, 300000000};
	if (!strcmp(argv[2], "raw") && argc == 5) {
		for (int i = 0; i < atoi(argv[3]); i++)
			raw(0x1000 + i, atoi(argv[4]), 0);
	} else if (!strcmp(argv[2], "overflow")) {
		/* If the writer goes on in a page read before, its first record
		 * gets a TIME_EXTEND: make sure of it, whatever ran before. */
		nanosleep(&pause, NULL);
		for (int i = 0; i < 200; i++)
			raw(0x1000 + i, 100, 0);
	} else {
		raw(0x1234, 4, 'A');            /* 16-byte record */
		raw(0x42, 5, 1);                /* payload padded to 8 */
		raw(0x99, 200, 0);              /* > 112 bytes: type_len 0 */
		text("hello marker\n");
		text("no newline");              /* the kernel adds one */
		nanosleep(&pause, NULL);         /* > 2^27 ns: a TIME_EXTEND */
		ms_since_last();
		raw(0x55, 8, 0x55);
		static char big[5000];
		memset(big, 'x', sizeof big);
		put(text_fd, big, sizeof big, 4054);   /* truncated to what fits */
		raw(0x7, 4060, 0x77);           /* fills a sub-buffer alone */
		for (int i = 0; i < 250; i++)   /* full pages, then a partial one */
			raw(0x2000 + i, 1 + i % 50, (unsigned char)i);
	}
	if (stalled) {
		printf("stall\n");
		return 75;
	}
	printf("wrote %d\n", written);
	return 0;
}
