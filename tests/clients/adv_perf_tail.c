/*
 * A perf reader whose ring's first page stalls (issue 19, item 3). The
 * daemon reads the reader's data_tail from that page, through the reader's
 * pinned image, when a record does not fit behind the tail it last read; a
 * page of a FUSE filesystem that never answers holds that read until the
 * watchdog aborts the filesystem (1 s). Only the writers of events that go
 * into this ring may wait for it.
 *
 * Registers EVENT (so that its image is pinned: the daemon can reach its
 * memory), opens a perf event of this thread on it (RAW, period 1,
 * read_format ID|LOST), maps 1+1 pages read-write and writes until the ring
 * is full behind data_tail 0 (one write more is lost). Then maps STALLFILE
 * over the ring's first page (MAP_FIXED), prints "armed PID" and writes the
 * event, one write a millisecond, until a line arrives on stdin: each write
 * needs the tail. Then reads that page itself, which fails (EIO) once the
 * watchdog has aborted the filesystem: the process lives until then, so
 * that the watchdog finds the page in its maps. Prints "writes N longest
 * MS" and "checks N".
 *
 * usage: adv_perf_tail TRACEFS STALLFILE
 * prints one "ok NAME" line per check; exits 1 at the first wrong result.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define EVENT "__tail_stall"

static int data_fd;
static struct user_reg reg;

static int emit(uint32_t a)
{
	struct { uint32_t index, a; } payload = {reg.write_index, a};
	return write(data_fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
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
		fprintf(stderr, "usage: %s TRACEFS STALLFILE\n", argv[0]);
		return 2;
	}
	int enabled = 0;
	int fd = open_raw_event(argv[1], EVENT, &data_fd, &reg, &enabled);
	long page = sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *up = mmap(NULL, page * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("mmap 1+1 pages read-write", up != MAP_FAILED);

	/* Full: a write whose head does not move was lost (the tail read, 0). */
	uint32_t total = 0;
	uint64_t head;
	int ok = 1;
	do {
		head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
		ok &= emit(total++);
	} while (ok && __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE) != head);
	CHECK("writes until one is lost", ok);
	uint64_t values[3];
	CHECK("the ring is full: one lost",
	      read(fd, values, sizeof(values)) == (ssize_t)sizeof(values) &&
	      values[0] == total && values[2] == 1);

	int stall = open(argv[2], O_RDONLY);
	CHECK("open the stalling file", stall >= 0);
	CHECK("map it over the ring's first page",
	      mmap(up, page, PROT_READ, MAP_SHARED | MAP_FIXED, stall, 0) == (void *)up);
	close(stall);
	printf("armed %d\n", getpid());
	fflush(stdout);

	uint32_t stalled = 0;
	double longest = 0;
	struct pollfd in = {.fd = 0, .events = POLLIN};
	do {
		double start = now_ms();
		ok &= emit(total++);
		stalled++;
		if (now_ms() - start > longest)
			longest = now_ms() - start;
	} while (poll(&in, 1, 1) == 0);
	CHECK("every write answered", ok);
	/* Until the watchdog has aborted the filesystem (it finds the page in
	 * this process's maps): this process's own look waits there too. */
	int mem = open("/proc/self/mem", O_RDONLY);
	uint64_t tail;
	CHECK("the page fails once its filesystem is aborted",
	      mem >= 0 && pread(mem, &tail, sizeof(tail), (off_t)(uintptr_t)&up->data_tail) < 0 &&
	      errno == EIO);
	CHECK("read() counts every write",
	      read(fd, values, sizeof(values)) == (ssize_t)sizeof(values) && values[0] == total);
	printf("writes %u longest %.1f\n", stalled, longest);
	close(fd);
	printf("checks %d\n", checks);
	return 0;
}
