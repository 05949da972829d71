/*
 * Known events for the reader tests: one user event per field type family
 * (the test creates and enables them through dynamic_events first, so each
 * registration here finds its event enabled), then markers. Pinned to CPU 0
 * so that everything lands in one per-CPU buffer, in this order.
 *
 * usage: reader_ue_writer TRACEFS_DIR
 * Prints "wrote <n>" and exits 0, or the failing step and its errno, or
 * "stall" (exit 75) if two writes were 100 ms or more apart: a TIME_EXTEND
 * would then move the records after it, so the caller runs it again.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

/* Keep in sync with EVENTS in tests/integration/test_readers.py. */
static const char *const commands[] = {
	"rd_scalars u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h; "
	"char i; unsigned char j; short k; unsigned short l; int m; unsigned int n",
	"rd_strings char[8] fixed; __data_loc char[] dyn; __rel_loc char[] rel; u32 tail",
	"rd_blob struct rd_pair pair 8; unsigned char[4] raw",
	"rd_none",
};
#define NR_EVENTS (sizeof commands / sizeof commands[0])

static const char *dir;
static int data_fd;
static uint32_t enabled[NR_EVENTS];
static uint32_t index_of[NR_EVENTS];
static int written, stalled;
static struct timespec last;

#define CHECK(cond, what) do { if (!(cond)) { int e = errno; \
	printf("FAIL %s: %s\n", what, strerror(e)); exit(e ? e : 1); } } while (0)

/* Called around each write: notes a gap of 100 ms or more before it. */
static void tick(int before)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000;
	if (before && written && ms >= 100)
		stalled = 1;
	last = now;
}

static void emit(int event, const void *payload, size_t len)
{
	tick(1);
	struct iovec io[2] = {
		{ &index_of[event], sizeof index_of[event] },
		{ (void *)payload, len },
	};
	CHECK(writev(data_fd, io, 2) == (ssize_t)(4 + len), commands[event]);
	tick(0);
	written++;
}

static void mark(const char *file, const void *buf, size_t len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0, path);
	tick(1);
	CHECK(write(fd, buf, len) == (ssize_t)len, path);
	tick(0);
	close(fd);
	written++;
}

int main(int argc, char **argv)
{
	char path[512];
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	cpu_set_t cpu0;
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	CHECK(sched_setaffinity(0, sizeof cpu0, &cpu0) == 0, "sched_setaffinity");
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	data_fd = open(path, O_RDWR);
	CHECK(data_fd >= 0, path);
	for (unsigned i = 0; i < NR_EVENTS; i++) {
		struct user_reg reg = {0};
		reg.size = sizeof reg;
		reg.enable_size = 4;
		reg.enable_addr = (uint64_t)(uintptr_t)&enabled[i];
		reg.name_args = (uint64_t)(uintptr_t)commands[i];
		CHECK(ioctl(data_fd, DIAG_IOCSREG, &reg) == 0, commands[i]);
		CHECK(enabled[i] & 1, "event not enabled at registration");
		index_of[i] = reg.write_index;
	}

	/* rd_scalars: extremes, so sign and width mistakes show. */
	struct __attribute__((packed)) {
		uint8_t a; int8_t b; uint16_t c; int16_t d; uint32_t e; int32_t f;
		uint64_t g; int64_t h; char i; unsigned char j; short k;
		unsigned short l; int m; unsigned int n;
	} s = { 255, -128, 65535, -32768, 4294967295u, -2147483647 - 1,
		18446744073709551615ull, -9223372036854775807ll - 1, -1, 200, -2,
		65534, -3, 4000000000u };
	emit(0, &s, sizeof s);
	s = (typeof(s)){ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 };
	emit(0, &s, sizeof s);

	/* rd_strings: record = 8 common + fixed[8] @8, dyn @16, rel @20,
	 * tail @24, then the strings; __data_loc offsets count from the record
	 * start, __rel_loc ones from the end of their slot. */
	static const char *const dyns[] = { "dynamic", "", NULL };
	for (int n = 0; n < 3; n++) {
		char payload[256];
		memset(payload, 0, sizeof payload);
		const char *dyn = dyns[n] ? dyns[n] :
			"a long dynamic string that makes the record longer than 112 bytes, "
			"so it is written with type_len 0";
		const char *rel = n == 1 ? "" : "rel";
		memcpy(payload, n == 0 ? "fixed01" : "8charsX", 8);
		uint32_t dyn_len = strlen(dyn) + 1, rel_len = strlen(rel) + 1;
		uint32_t dyn_off = 8 + 20, rel_off = dyn_off + dyn_len;
		uint32_t dyn_loc = dyn_len << 16 | dyn_off;
		uint32_t rel_loc = rel_len << 16 | (rel_off - (8 + 16));
		uint32_t tail = 0xdead0000u + n;
		memcpy(payload + 8, &dyn_loc, 4);
		memcpy(payload + 12, &rel_loc, 4);
		memcpy(payload + 16, &tail, 4);
		memcpy(payload + 20, dyn, dyn_len);
		memcpy(payload + 20 + dyn_len, rel, rel_len);
		emit(1, payload, 20 + dyn_len + rel_len);
	}

	/* rd_blob: a struct is printed as a 64-bit number, raw as a string. */
	struct __attribute__((packed)) { uint64_t pair; unsigned char raw[4]; } b =
		{ 0x0102030405060708ull, "abc" };
	emit(2, &b, sizeof b);

	emit(3, "", 0);

	mark("trace_marker", "hello marker\n", 13);
	mark("trace_marker", "no newline", 10);
	static const unsigned char raw1[] = { 0x34, 0x12, 0, 0, 'A', 'B', 'C', 'D' };
	static const unsigned char raw2[] = { 0x42, 0, 0, 0, 1, 2, 3, 4, 5 };
	mark("trace_marker_raw", raw1, sizeof raw1);
	mark("trace_marker_raw", raw2, sizeof raw2);
	if (stalled) {
		printf("stall\n");
		return 75;
	}
	printf("wrote %d\n", written);
	return 0;
}
