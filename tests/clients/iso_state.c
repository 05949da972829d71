/*
 * What one test leaves in its tracefs, and proof that the next test's is fresh
 * (tests/integration/test_shared_server.py: runs forked by one server).
 *
 * usage: iso_state leave TRACEFS_DIR FIFO
 *   registers "iso_left u32 n" with an enable bit, adds the dynamic event
 *   "u:iso_dyn u32 y", enables iso_left, sets tracing_on 0 and buffer_size_kb
 *   7, maps cpu0's trace_pipe_raw; checks each took effect (the enable bit is
 *   set), writes "left" to FIFO, then holds all of it until killed.
 * usage: iso_state fresh TRACEFS_DIR
 *   checks that none of that is there: no iso_left or iso_dyn event, no line
 *   in dynamic_events, tracing_on 1, buffer_size_kb not 7, iso_left registers
 *   at write index 0 and its bit stays clear (nothing enables it).
 * Either prints "checks N" and exits 0 only if every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;
static int checks, failed;
static volatile uint32_t enabled;

static void check(int ok, const char *what)
{
	checks++;
	if (!ok) {
		failed++;
		fprintf(stderr, "iso_state: FAILED: %s\n", what);
	}
}

static int open_at(const char *name, int flags)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return open(path, flags);
}

/* The file's text (at most 255 bytes), "" if it cannot be read. */
static const char *text(const char *name)
{
	static char buf[256];
	int fd = open_at(name, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	buf[n < 0 ? 0 : n] = 0;
	return buf;
}

static int write_file(const char *path, const char *value, int flags)
{
	int fd = open(path, O_WRONLY | flags);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, value, strlen(value));
	close(fd);
	return n == (ssize_t)strlen(value) ? 0 : -1;
}

static int write_text(const char *name, const char *value, int flags)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return write_file(path, value, flags);
}

static int exists(const char *name)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

static int reg(int fd, struct user_reg *r)
{
	memset(r, 0, sizeof *r);
	r->size = sizeof *r;
	r->enable_size = 4;
	r->enable_addr = (uint64_t)(uintptr_t)&enabled;
	r->name_args = (uint64_t)(uintptr_t)"iso_left u32 n";
	return ioctl(fd, DIAG_IOCSREG, r);
}

static int leave(const char *fifo)
{
	struct user_reg r;
	int data = open_at("user_events_data", O_RDWR);
	check(data >= 0 && reg(data, &r) == 0, "iso_left registers");
	check(write_text("dynamic_events", "u:iso_dyn u32 y\n", O_APPEND) == 0,
	      "u:iso_dyn is added to dynamic_events");
	check(write_text("events/user_events/iso_left/enable", "1", 0) == 0, "iso_left is enabled");
	check(enabled == 1, "iso_left's enable bit is set");
	check(write_text("tracing_on", "0", 0) == 0, "tracing_on is set to 0");
	check(write_text("buffer_size_kb", "7", 0) == 0, "buffer_size_kb is set to 7");
	int raw = open_at("per_cpu/cpu0/trace_pipe_raw", O_RDONLY);
	void *page = raw < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ, MAP_SHARED, raw, 0);
	check(page != MAP_FAILED, "cpu0's trace_pipe_raw is mapped");
	printf("checks %d\n", checks);
	fflush(stdout);
	if (failed)
		return 1;
	if (write_file(fifo, "left\n", 0) < 0) {
		perror(fifo);
		return 1;
	}
	for (;;)
		pause();
}

static int fresh(void)
{
	struct user_reg r;
	check(!exists("events/user_events/iso_left"), "no iso_left event");
	check(!exists("events/user_events/iso_dyn"), "no iso_dyn event");
	check(strcmp(text("dynamic_events"), "") == 0, "dynamic_events is empty");
	check(strcmp(text("tracing_on"), "1\n") == 0, "tracing_on is 1");
	check(strcmp(text("buffer_size_kb"), "7\n") != 0, "buffer_size_kb is not 7");
	int data = open_at("user_events_data", O_RDWR);
	check(data >= 0 && reg(data, &r) == 0 && r.write_index == 0,
	      "iso_left registers, at write index 0");
	check(enabled == 0, "iso_left's enable bit is clear");
	printf("checks %d\n", checks);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s leave TRACEFS_DIR FIFO | fresh TRACEFS_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[2];
	if (!strcmp(argv[1], "leave") && argc == 4)
		return leave(argv[3]);
	if (!strcmp(argv[1], "fresh") && argc == 3)
		return fresh();
	fprintf(stderr, "iso_state: unknown mode %s\n", argv[1]);
	return 2;
}
