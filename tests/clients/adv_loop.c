/*
 * A client that keeps the daemon busy until something stops it: the thing a
 * test kills (or whose daemon it kills) mid-request.
 *
 * usage: adv_loop TRACEFS_DIR read FILE   one blocking read() of FILE
 *        adv_loop TRACEFS_DIR write       register "adv_loop u32 n", write it forever
 *        adv_loop TRACEFS_DIR ioctl       register and unregister forever
 *        adv_loop TRACEFS_DIR marker      write trace_marker forever (EBADF, tracing
 *                                         off, is no failure)
 * Prints "ready" once the first request went through (for read: just before
 * it blocks), then, when a call fails, "<call>: <errno name>" and one more
 * line for a fresh open() after it ("reopen: ..."); exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;

static int open_rel(const char *rel, int flags)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	return open(path, flags);
}

static int failed(const char *call)
{
	printf("%s: %s\n", call, strerrorname_np(errno));
	int fd = open_rel("tracing_on", O_RDONLY);
	printf("reopen: %s\n", fd >= 0 ? "ok" : strerrorname_np(errno));
	return 0;
}

static int reg(int fd, volatile uint32_t *word)
{
	struct user_reg r = {.size = sizeof r, .enable_bit = 0, .enable_size = 4,
			     .enable_addr = (uint64_t)(uintptr_t)word,
			     .name_args = (uint64_t)(uintptr_t)"adv_loop u32 n"};
	return ioctl(fd, DIAG_IOCSREG, &r) == 0 ? (int)r.write_index : -1;
}

int main(int argc, char **argv)
{
	static volatile uint32_t word;
	if (argc < 3) {
		fprintf(stderr, "usage: %s TRACEFS_DIR read FILE|write|ioctl|marker\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	dir = argv[1];
	const char *mode = argv[2];
	if (!strcmp(mode, "read") && argc == 4) {
		static char buf[1 << 16];
		int fd = open_rel(argv[3], O_RDONLY);
		if (fd < 0)
			return failed("open");
		printf("ready\n");
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0)
			return failed("read");
		printf("read: %zd\n", n);
		return 0;
	}
	if (!strcmp(mode, "marker")) {
		int fd = open_rel("trace_marker", O_WRONLY);
		if (fd < 0)
			return failed("open");
		for (unsigned long i = 0;; i++) {
			/* EBADF: tracing is off; the request still went through. */
			if (write(fd, "adv_loop marker", 15) < 0 && errno != EBADF)
				return failed("write");
			if (i == 0)
				printf("ready\n");
		}
	}
	int fd = open_rel("user_events_data", O_RDWR);
	if (fd < 0)
		return failed("open");
	if (!strcmp(mode, "ioctl")) {
		struct user_unreg u = {.size = sizeof u, .disable_bit = 0,
				       .disable_addr = (uint64_t)(uintptr_t)&word};
		for (unsigned long i = 0;; i++) {
			if (reg(fd, &word) < 0)
				return failed("register");
			if (ioctl(fd, DIAG_IOCSUNREG, &u) < 0)
				return failed("unregister");
			if (i == 0)
				printf("ready\n");
		}
	}
	if (!strcmp(mode, "write")) {
		int index = reg(fd, &word);
		if (index < 0)
			return failed("register");
		for (uint32_t n = 0;; n++) {
			uint32_t payload[2] = {(uint32_t)index, n};
			if (write(fd, payload, sizeof payload) < 0 && errno != EBADF)
				return failed("write");
			if (n == 0)
				printf("ready\n");
		}
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
