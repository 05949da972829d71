/*
 * inherit, and the side-band records perf script names tasks by: a per-task
 * event of this process (pid 0, any CPU, inherit, task|comm|comm_exec,
 * sample_id_all) follows what the process creates after the open, and its
 * ring tells the reader about them.
 *
 *   P (this process) writes 1                    -> COMM(P), sample 1
 *   a child forked *before* the open writes 9    -> nothing (not followed)
 *   child C1 writes 2, renames itself, writes 3  -> FORK(C1), sample 2,
 *                                                   COMM(C1, "inh-renamed", misc 0), sample 3
 *   C1 exits                                     -> EXIT(C1)
 *   child C2 execs (comm "exe"), writes 4        -> FORK(C2), COMM(C2, "exe", COMM_EXEC), sample 4
 *   C2 exits                                     -> EXIT(C2)
 *   a thread of P writes 5                       -> FORK(P, thread), sample 5
 * Then a per-task event of another child (no inherit) says POLLHUP once that
 * child has exited.
 *
 * Records are checked in order; EXIT records come when the daemon sees the
 * exit, so the client waits (bounded) until each is in the ring.
 *
 * usage: perf_inherit TRACEFS        (perf_inherit TRACEFS exec: C2's new image)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define EVENT "__inherit_event"
#define DATA_PAGES 16
#define PAGE 4096

static int enabled;
static int data_fd;
static struct user_reg reg;
static int field_offset;
static long event_id;

static int register_event(const char *tracefs)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	data_fd = open(path, O_RDWR);
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)(EVENT " u32 n");
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.enable_size = sizeof(enabled);
	return data_fd >= 0 && ioctl(data_fd, DIAG_IOCSREG, &reg) == 0;
}

static int emit(uint32_t n)
{
	struct { uint32_t index, n; } payload = {reg.write_index, n};
	return write(data_fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
}

static void *thread_writes(void *unused)
{
	(void)unused;
	return (void *)(intptr_t)emit(5);
}

static int perf_open(pid_t pid, int inherit)
{
	struct perf_event_attr pe;
	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_TRACEPOINT;
	pe.size = sizeof(pe);
	pe.config = (uint64_t)event_id;
	pe.sample_period = 1;
	pe.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_ID | PERF_SAMPLE_RAW;
	pe.read_format = PERF_FORMAT_ID;
	pe.inherit = inherit;
	pe.task = 1;
	pe.comm = 1;
	pe.comm_exec = 1;
	pe.sample_id_all = 1;
	pe.wakeup_events = 1;
	return (int)syscall(__NR_perf_event_open, &pe, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* One record of the ring, copied out (it may wrap). */
struct record {
	struct perf_event_header header;
	unsigned char body[512];
};

static struct perf_event_mmap_page *page;
static unsigned char *data;
static uint64_t tail;

static int next_record(struct record *r)
{
	uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
	if (tail >= head)
		return 0;
	uint64_t size = DATA_PAGES * PAGE;
	unsigned char *out = (unsigned char *)r;
	for (size_t i = 0; i < sizeof(r->header); i++)
		out[i] = data[(tail + i) % size];
	for (size_t i = sizeof(r->header); i < r->header.size && i < sizeof(*r); i++)
		out[i] = data[(tail + i) % size];
	tail += r->header.size;
	__atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
	return 1;
}

/* The next record, waiting (bounded: 10 s) for one to arrive. */
static int wait_record(struct record *r)
{
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 10000; i++) {
		if (next_record(r))
			return 1;
		nanosleep(&ms, NULL);
	}
	return 0;
}

static uint32_t u32_at(const struct record *r, size_t off)
{
	uint32_t v;
	memcpy(&v, r->body + off, sizeof(v));
	return v;
}

static uint64_t u64_at(const struct record *r, size_t off)
{
	uint64_t v;
	memcpy(&v, r->body + off, sizeof(v));
	return v;
}

static uint64_t id;

/* sample: pid, tid, id, raw(size, trace_entry..., n) */
static int is_sample(const struct record *r, pid_t pid, pid_t tid, uint32_t n)
{
	return r->header.type == PERF_RECORD_SAMPLE && u32_at(r, 0) == (uint32_t)pid &&
	       u32_at(r, 4) == (uint32_t)tid && u64_at(r, 8) == id &&
	       u32_at(r, 20 + field_offset) == n;
}

/* FORK/EXIT: pid, ppid, tid, ptid, time; then sample_id: pid, tid, id */
static int is_task(const struct record *r, uint32_t type, pid_t pid, pid_t ppid, pid_t tid,
		   pid_t ptid)
{
	return r->header.type == type && u32_at(r, 0) == (uint32_t)pid &&
	       u32_at(r, 4) == (uint32_t)ppid && u32_at(r, 8) == (uint32_t)tid &&
	       u32_at(r, 12) == (uint32_t)ptid && u64_at(r, 32) == id;
}

/* COMM: pid, tid, comm padded to 8, then sample_id */
static int is_comm(const struct record *r, pid_t pid, const char *comm, uint16_t misc)
{
	size_t padded = (strlen(comm) + 1 + 7) / 8 * 8;
	return r->header.type == PERF_RECORD_COMM && r->header.misc == misc &&
	       u32_at(r, 0) == (uint32_t)pid && u32_at(r, 4) == (uint32_t)pid &&
	       strcmp((const char *)r->body + 8, comm) == 0 &&
	       u64_at(r, 8 + padded + 8) == id;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[2], "exec"))
		return register_event(argv[1]) && emit(4) ? 0 : 3;
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* children must not print it again */
	CHECK("register", register_event(argv[1]));
	char path[512];
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", argv[1], EVENT);
	event_id = read_number(path);
	field_offset = u32_field_offset(argv[1], EVENT, "n");
	CHECK("event id and field", event_id > 0 && field_offset >= 8);

	/* A child that exists before the open: never followed. */
	int go[2];
	CHECK("pipe", pipe(go) == 0);
	pid_t before = fork();
	if (before == 0) {
		char c;
		_exit(read(go[0], &c, 1) == 1 && emit(9) ? 0 : 3);
	}

	int fd = perf_open(0, 1);
	CHECK("perf_event_open (self, inherit)", fd >= 0);
	CHECK("PERF_EVENT_IOC_ID", ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0);
	void *ring = mmap(NULL, (1 + DATA_PAGES) * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("mmap 1+16 pages", ring != MAP_FAILED);
	page = ring;
	data = (unsigned char *)ring + PAGE;

	pid_t me = getpid();
	CHECK("P writes 1", emit(1));
	int status;
	CHECK("the child from before writes 9", write(go[1], "g", 1) == 1 &&
	      waitpid(before, &status, 0) == before && WIFEXITED(status) && !WEXITSTATUS(status));

	pid_t c1 = fork();
	if (c1 == 0) {
		if (!emit(2) || prctl(PR_SET_NAME, "inh-renamed") || !emit(3))
			_exit(3);
		_exit(0);
	}
	CHECK("C1 wrote 2 and 3", waitpid(c1, &status, 0) == c1 && WIFEXITED(status) &&
	      !WEXITSTATUS(status));

	struct record r;
	char comm[16] = "";
	prctl(PR_GET_NAME, comm);
	CHECK("COMM(P)", next_record(&r) && is_comm(&r, me, comm, PERF_RECORD_MISC_COMM_EXEC));
	CHECK("sample 1 of P", next_record(&r) && is_sample(&r, me, me, 1));
	CHECK("FORK(C1) before its sample", next_record(&r) &&
	      is_task(&r, PERF_RECORD_FORK, c1, me, c1, me));
	CHECK("sample 2 of C1 (the child from before is not followed)",
	      next_record(&r) && is_sample(&r, c1, c1, 2));
	CHECK("COMM(C1 renamed), not an exec", next_record(&r) && is_comm(&r, c1, "inh-renamed", 0));
	CHECK("sample 3 of C1", next_record(&r) && is_sample(&r, c1, c1, 3));
	CHECK("EXIT(C1)", wait_record(&r) && is_task(&r, PERF_RECORD_EXIT, c1, me, c1, me));

	/* C2 must not take the ring along into its exec (see docs/perf.md). */
	CHECK("MADV_DONTFORK", madvise(ring, (1 + DATA_PAGES) * PAGE, MADV_DONTFORK) == 0);
	pid_t c2 = fork();
	if (c2 == 0) {
		execl("/proc/self/exe", argv[0], argv[1], "exec", (char *)NULL);
		_exit(4);
	}
	CHECK("C2 exec'd and wrote 4", waitpid(c2, &status, 0) == c2 && WIFEXITED(status) &&
	      !WEXITSTATUS(status));
	CHECK("FORK(C2)", next_record(&r) && is_task(&r, PERF_RECORD_FORK, c2, me, c2, me));
	CHECK("COMM(C2, exec)", next_record(&r) &&
	      is_comm(&r, c2, "exe", PERF_RECORD_MISC_COMM_EXEC));
	CHECK("sample 4 of C2", next_record(&r) && is_sample(&r, c2, c2, 4));
	CHECK("EXIT(C2)", wait_record(&r) && is_task(&r, PERF_RECORD_EXIT, c2, me, c2, me));

	pthread_t thread;
	void *wrote;
	CHECK("a thread writes 5", pthread_create(&thread, NULL, thread_writes, NULL) == 0 &&
	      pthread_join(thread, &wrote) == 0 && wrote);
	CHECK("FORK(thread) and its sample", next_record(&r) && r.header.type == PERF_RECORD_FORK &&
	      u32_at(&r, 0) == (uint32_t)me && u32_at(&r, 8) != (uint32_t)me &&
	      next_record(&r) && u32_at(&r, 0) == (uint32_t)me && u32_at(&r, 4) != (uint32_t)me &&
	      is_sample(&r, me, (pid_t)u32_at(&r, 4), 5));
	CHECK("nothing else", !next_record(&r));
	uint64_t counts[2];
	CHECK("read() counts 5", read(fd, counts, sizeof(counts)) == sizeof(counts) &&
	      counts[0] == 5 && counts[1] == id);

	/* POLLHUP: a per-task event of a child, once the child is gone. */
	int hold[2];
	CHECK("pipe", pipe(hold) == 0);
	pid_t c3 = fork();
	if (c3 == 0) {
		char c;
		_exit(read(hold[0], &c, 1) == 1 ? 0 : 3);
	}
	int fd3 = perf_open(c3, 0);
	CHECK("perf_event_open (a child)", fd3 >= 0);
	/* perf_poll answers EPOLLHUP for an event without a ring: map one. */
	CHECK("mmap (a child's event)", mmap(NULL, 2 * (size_t)sysconf(_SC_PAGESIZE), PROT_READ,
					     MAP_SHARED, fd3, 0) != MAP_FAILED);
	struct pollfd pfd = {fd3, POLLIN, 0};
	CHECK("no POLLHUP while it lives", poll(&pfd, 1, 0) >= 0 && !(pfd.revents & POLLHUP));
	CHECK("the child exits", write(hold[1], "g", 1) == 1 && waitpid(c3, &status, 0) == c3);
	CHECK("POLLHUP once it is gone", poll(&pfd, 1, 10000) == 1 && (pfd.revents & POLLHUP));
	printf("checks %d\n", checks);
	return 0;
}
