/*
 * LinuxTracepoints' TracepointSession (perf-collect), written from its call
 * sequence (libtracepoint-control-cpp, docs/perf.md): a session per mode, each
 * per CPU (pid -1), attr.size PERF_ATTR_SIZE_VER3, sample_type
 * IDENTIFIER|TID|TIME|CPU|RAW, read_format ID, period 1, MONOTONIC_RAW,
 * watermark with wakeup_watermark 0 (half the ring), PERF_FLAG_FD_CLOEXEC.
 * The first event is the leader and owns the per-CPU rings; the second is
 * SET_OUTPUT into them; ids come from read(fd, 16).
 *
 * realtime: write_backward 0, rings mapped RW (2 data pages); ppoll on the
 *   leaders; records walked from data_tail to data_head, data_tail written back.
 * circular: write_backward 1, rings mapped read-only (1 data page, so it
 *   overwrites); a CPU's ring is read between PAUSE_OUTPUT(1) and (0), walked
 *   from data_head forward for one ring's worth, newest first, stopping at a
 *   zero or too-large size. Writes while paused are lost: data_head does not
 *   move, and the next record is preceded by PERF_RECORD_LOST with their count.
 *
 * The writer is pinned to one CPU, so every sample is on that CPU's ring and
 * each is checked exactly: its place in the order of writes, the id read()
 * gave for its event and CPU, this thread, the CPU, the time, the raw data.
 *
 * usage: perf_tracepoint_session TRACEFS
 * prints one "ok NAME" line per check; exits 1 at the first wrong result.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
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

#define MAX_CPUS 64
#define SAMPLE_TYPE (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW)
/* header, identifier, tid, time, cpu, then u32 size + 20 bytes of raw data */
#define SAMPLE_SIZE 64
#define REALTIME_WRITES 80  /* 5120 bytes: past the watermark (4096), inside 8192 */
#define CIRCULAR_WRITES 100 /* 6400 bytes into 4096: the newest 64 stay */
#define PAUSED_WRITES 3

static const char *tracefs;
static int data_fd;
static long cpus, page;
static int cpu; /* the writer's */

/* An event: "NAME u32 n; u32 x" (a) or "NAME u32 n" (b). */
struct event {
	const char *name_args, *name;
	struct user_reg reg;
	int enabled;
	long id;
	int off_n, off_x;
};

static struct event ev[2] = {
	{.name_args = "__tps_a u32 n; u32 x", .name = "__tps_a"},
	{.name_args = "__tps_b u32 n", .name = "__tps_b"},
};

struct session {
	int backward;
	uint32_t size; /* per-CPU buffer */
	int fd[2][MAX_CPUS];
	uint64_t id[2][MAX_CPUS];
	struct perf_event_mmap_page *ring[MAX_CPUS];
};

struct sample {
	struct perf_event_header h;
	uint64_t identifier;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
	uint32_t raw_size;
	unsigned char raw[20];
} __attribute__((__packed__));

_Static_assert(sizeof(struct sample) == SAMPLE_SIZE, "sample layout");

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Write i: event a for even i (n = i, x = ~i), b for odd i (n = i). */
static int write_one(uint32_t i)
{
	struct event *e = &ev[i & 1];
	struct { uint32_t index, n, x; } payload = {e->reg.write_index, i, ~i};
	size_t size = (i & 1) ? 8 : 12;
	return write(data_fd, &payload, size) == (ssize_t)size;
}

/* The record at ring position pos (masked), copied out whole. */
static void copy_record(const struct session *s, int c, uint64_t pos, void *out, size_t size)
{
	const unsigned char *data = (const unsigned char *)s->ring[c] + page;
	for (size_t k = 0; k < size; k++)
		((unsigned char *)out)[k] = data[(pos + k) & (s->size - 1)];
}

/* Is r exactly write i's sample on CPU c, stamped within [from, to]? */
static int sample_is(const struct session *s, int c, const struct sample *r, uint32_t i,
		     uint64_t from, uint64_t to)
{
	const struct event *e = &ev[i & 1];
	uint16_t common_type;
	uint32_t n, x;
	memcpy(&common_type, r->raw, sizeof(common_type));
	memcpy(&n, r->raw + e->off_n, sizeof(n));
	memcpy(&x, r->raw + (e->off_x > 0 ? e->off_x : e->off_n), sizeof(x));
	return r->h.type == PERF_RECORD_SAMPLE && r->h.size == SAMPLE_SIZE &&
	       r->identifier == s->id[i & 1][c] && r->pid == (uint32_t)getpid() &&
	       r->tid == (uint32_t)gettid() && r->cpu == (uint32_t)c && r->res == 0 &&
	       r->time >= from && r->time <= to && r->raw_size == 20 &&
	       common_type == (uint16_t)e->id && n == i && (e->off_x < 0 || x == ~i);
}

static int perf_event_open(struct perf_event_attr *pe, int c)
{
	return (int)syscall(SYS_perf_event_open, pe, -1, c, -1, PERF_FLAG_FD_CLOEXEC);
}

static void attr_for(struct perf_event_attr *pe, long id, int backward)
{
	memset(pe, 0, sizeof(*pe));
	pe->type = PERF_TYPE_TRACEPOINT;
	pe->size = PERF_ATTR_SIZE_VER3;
	pe->config = (uint64_t)id;
	pe->sample_period = 1;
	pe->sample_type = SAMPLE_TYPE;
	pe->read_format = PERF_FORMAT_ID;
	pe->watermark = 1;
	pe->wakeup_watermark = 0;
	pe->use_clockid = 1;
	pe->clockid = CLOCK_MONOTONIC_RAW;
	pe->write_backward = backward;
}

/* read(fd, 16): { value, id } */
static int read_values(int fd, uint64_t *value, uint64_t *id)
{
	uint64_t v[2];
	if (read(fd, v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	*value = v[0];
	*id = v[1];
	return 1;
}

/* AddTracepoint for both events: open per CPU, the leader's rings, SET_OUTPUT, ids. */
static void open_session(struct session *s, const char *mode)
{
	char name[128];
	int ok = 1;
	for (int c = 0; c < cpus; c++) {
		struct perf_event_attr pe;
		attr_for(&pe, ev[0].id, s->backward);
		s->fd[0][c] = perf_event_open(&pe, c);
		int prot = s->backward ? PROT_READ : PROT_READ | PROT_WRITE;
		s->ring[c] = s->fd[0][c] >= 0 ? mmap(NULL, page + s->size, prot, MAP_SHARED, s->fd[0][c], 0)
					      : MAP_FAILED;
		if (s->fd[0][c] < 0 || s->ring[c] == MAP_FAILED)
			ok = 0;
	}
	snprintf(name, sizeof(name), "%s: leader opened per CPU, rings mapped", mode);
	CHECK(name, ok);
	for (int c = 0; c < cpus; c++) {
		struct perf_event_attr pe;
		attr_for(&pe, ev[1].id, s->backward);
		s->fd[1][c] = perf_event_open(&pe, c);
		if (s->fd[1][c] < 0 || ioctl(s->fd[1][c], PERF_EVENT_IOC_SET_OUTPUT, s->fd[0][c]) != 0)
			ok = 0;
	}
	snprintf(name, sizeof(name), "%s: second event SET_OUTPUT into the leaders", mode);
	CHECK(name, ok);
	uint64_t value;
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < cpus; c++)
			if (!read_values(s->fd[e][c], &value, &s->id[e][c]) || !s->id[e][c] || value)
				ok = 0;
	for (int c = 0; c < cpus; c++)
		if (s->id[0][c] == s->id[1][c])
			ok = 0;
	snprintf(name, sizeof(name), "%s: ids from read(), distinct, counts 0", mode);
	CHECK(name, ok);
	snprintf(name, sizeof(name), "%s: events enabled at open", mode);
	CHECK(name, ev[0].enabled == 1 && ev[1].enabled == 1);
}

/* EnumeratorBegin's checks of a ring's first page. */
static int ring_header_ok(const struct session *s, int c)
{
	const struct perf_event_mmap_page *up = s->ring[c];
	uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	return up->data_offset == (uint64_t)page && up->data_size == s->size && !(head & 7);
}

/* read() of each event on each CPU: the writer's CPU counted every write. */
static int counts_ok(const struct session *s, uint64_t a, uint64_t b)
{
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < cpus; c++) {
			uint64_t value, id;
			uint64_t want = c != cpu ? 0 : e == 0 ? a : b;
			if (!read_values(s->fd[e][c], &value, &id) || value != want || id != s->id[e][c])
				return 0;
		}
	return 1;
}

static void close_session(struct session *s, const char *mode)
{
	char name[128];
	for (int c = 0; c < cpus; c++) {
		munmap(s->ring[c], page + s->size);
		close(s->fd[1][c]);
		close(s->fd[0][c]);
	}
	snprintf(name, sizeof(name), "%s: closed, enable bits clear", mode);
	CHECK(name, ev[0].enabled == 0 && ev[1].enabled == 0);
}

static int ready(const struct session *s, short *revents)
{
	struct pollfd fds[MAX_CPUS];
	struct timespec zero = {0, 0};
	for (int c = 0; c < cpus; c++)
		fds[c] = (struct pollfd){.fd = s->fd[0][c], .events = POLLIN};
	int n = ppoll(fds, (nfds_t)cpus, &zero, NULL);
	for (int c = 0; c < cpus; c++)
		revents[c] = fds[c].revents;
	return n;
}

static void realtime(void)
{
	struct session s = {.backward = 0, .size = 2 * (uint32_t)page};
	short revents[MAX_CPUS];
	open_session(&s, "realtime");
	CHECK("realtime: ppoll before writes: none ready", ready(&s, revents) == 0);

	uint64_t before = now();
	int ok = 1;
	for (uint32_t i = 0; i < REALTIME_WRITES; i++)
		ok &= write_one(i);
	uint64_t after = now();
	CHECK("realtime: written", ok);

	int n = ready(&s, revents);
	ok = n == 1;
	for (int c = 0; c < cpus; c++)
		ok &= revents[c] == (c == cpu ? POLLIN : 0);
	CHECK("realtime: ppoll: the writer's CPU ready (past the watermark), POLLIN only", ok);

	/* EnumeratorBegin/MoveNext/End on every CPU */
	int headers = 1, samples = 0, exact = 1;
	uint64_t last = 0;
	for (int c = 0; c < cpus; c++) {
		struct perf_event_mmap_page *up = s.ring[c];
		headers &= ring_header_ok(&s, c);
		uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
		uint64_t pos = up->data_tail;
		if (head - pos > s.size)
			headers = 0;
		while (pos != head) {
			struct sample r;
			struct perf_event_header h;
			copy_record(&s, c, pos, &h, sizeof(h));
			if (h.size != SAMPLE_SIZE || head - pos < h.size) {
				exact = 0;
				break;
			}
			copy_record(&s, c, pos, &r, sizeof(r));
			if (c != cpu || !sample_is(&s, c, &r, (uint32_t)samples, before, after) ||
			    r.time < last)
				exact = 0;
			last = r.time;
			samples++;
			pos += h.size;
		}
		__atomic_store_n(&up->data_tail, pos, __ATOMIC_RELEASE);
	}
	CHECK("realtime: rings: data_offset a page, data_size the buffer, head aligned", headers);
	CHECK("realtime: every write one sample, in order, on the writer's CPU", samples == REALTIME_WRITES && exact);
	CHECK("realtime: the wakeup was taken: ppoll none ready", ready(&s, revents) == 0);
	CHECK("realtime: read() counts every write of each event", counts_ok(&s, REALTIME_WRITES / 2, REALTIME_WRITES / 2));
	close_session(&s, "realtime");
}

/* Walk CPU c's backward ring from data_head: records newest first into out[]. */
static int walk_backward(const struct session *s, int c, struct sample *out, int max,
			 uint64_t *lost, uint64_t *lost_id)
{
	const struct perf_event_mmap_page *up = s->ring[c];
	uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	uint64_t pos = head - s->size, found = 0;
	*lost = 0;
	while (head - pos) {
		struct perf_event_header h;
		copy_record(s, c, pos, &h, sizeof(h));
		if (h.size == 0 || h.size > head - pos)
			break;
		if (h.type == PERF_RECORD_LOST) {
			uint64_t body[2];
			copy_record(s, c, pos + sizeof(h), body, sizeof(body));
			*lost_id = body[0];
			*lost += body[1];
		} else if (found < (uint64_t)max) {
			copy_record(s, c, pos, &out[found++], sizeof(out[0]));
		}
		pos += h.size;
	}
	return (int)found;
}

static int pause_all(const struct session *s, int pause)
{
	int ok = 1;
	for (int c = 0; c < cpus; c++)
		ok &= ioctl(s->fd[0][c], PERF_EVENT_IOC_PAUSE_OUTPUT, pause) == 0;
	return ok;
}

static void circular(void)
{
	struct session s = {.backward = 1, .size = (uint32_t)page};
	open_session(&s, "circular");

	/* perf_event_set_output: a ring is written one way only */
	struct perf_event_attr pe;
	attr_for(&pe, ev[1].id, 0);
	int forward = perf_event_open(&pe, cpu);
	errno = 0;
	CHECK("circular: a forward event SET_OUTPUT into a backward ring: EINVAL",
	      forward >= 0 && ioctl(forward, PERF_EVENT_IOC_SET_OUTPUT, s.fd[0][cpu]) == -1 && errno == EINVAL);
	close(forward);

	uint64_t before = now();
	int ok = 1;
	for (uint32_t i = 0; i < CIRCULAR_WRITES; i++)
		ok &= write_one(i);
	uint64_t after = now();
	CHECK("circular: written", ok);

	CHECK("circular: PAUSE_OUTPUT(1) on every leader", pause_all(&s, 1));
	uint64_t head = s.ring[cpu]->data_head;
	int headers = 1;
	for (int c = 0; c < cpus; c++)
		headers &= ring_header_ok(&s, c) && (c == cpu ? head == (uint64_t)0 - CIRCULAR_WRITES * SAMPLE_SIZE
							     : s.ring[c]->data_head == 0);
	CHECK("circular: data_head went down by every record", headers);

	ok = 1;
	for (uint32_t i = CIRCULAR_WRITES; i < CIRCULAR_WRITES + PAUSED_WRITES; i++)
		ok &= write_one(i);
	CHECK("circular: writes while paused: data_head unmoved", ok && s.ring[cpu]->data_head == head);

	struct sample found[128];
	uint64_t lost, lost_id = 0;
	int n = walk_backward(&s, cpu, found, 128, &lost, &lost_id);
	int fits = (int)(s.size / SAMPLE_SIZE);
	ok = n == fits && !lost;
	for (int k = 0; ok && k < n; k++)
		ok = sample_is(&s, cpu, &found[k], CIRCULAR_WRITES - 1 - (uint32_t)k, before, after) &&
		     (k == 0 || found[k].time <= found[k - 1].time);
	CHECK("circular: the newest 64 samples, newest first, exact", ok);
	for (int c = 0; c < cpus; c++)
		if (c != cpu && walk_backward(&s, c, found, 128, &lost, &lost_id))
			ok = 0;
	CHECK("circular: other CPUs' rings empty", ok);
	CHECK("circular: PAUSE_OUTPUT(0)", pause_all(&s, 0));

	uint32_t last = CIRCULAR_WRITES + PAUSED_WRITES;
	before = now();
	CHECK("circular: one more write", write_one(last));
	after = now();
	CHECK("circular: PAUSE_OUTPUT(1) again", pause_all(&s, 1));
	n = walk_backward(&s, cpu, found, 128, &lost, &lost_id);
	/* PERF_RECORD_LOST (24 bytes) and the new sample went in together, just below
	 * the old head; of the older samples, those still whole follow. */
	int older = (int)((s.size - 24 - SAMPLE_SIZE) / SAMPLE_SIZE);
	ok = n == 1 + older && lost == PAUSED_WRITES && lost_id == s.id[last & 1][cpu] &&
	     s.ring[cpu]->data_head == head - 24 - SAMPLE_SIZE &&
	     sample_is(&s, cpu, &found[0], last, before, after);
	for (int k = 1; ok && k < n; k++)
		ok = sample_is(&s, cpu, &found[k], CIRCULAR_WRITES - (uint32_t)k, 0, after);
	CHECK("circular: PERF_RECORD_LOST with the paused writes' count, then the new sample, then the older ones", ok);
	CHECK("circular: PAUSE_OUTPUT(0) again", pause_all(&s, 0));
	uint64_t total = CIRCULAR_WRITES + PAUSED_WRITES + 1;
	CHECK("circular: read() counts every write, the lost ones too", counts_ok(&s, total / 2, total / 2));
	close_session(&s, "circular");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	tracefs = argv[1];
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	data_fd = open(path, O_RDWR);
	CHECK("open user_events_data", data_fd >= 0);
	int ok = 1;
	for (int e = 0; e < 2; e++) {
		struct event *v = &ev[e];
		memset(&v->reg, 0, sizeof(v->reg));
		v->reg.size = sizeof(v->reg);
		v->reg.name_args = (uint64_t)(uintptr_t)v->name_args;
		v->reg.enable_bit = 0;
		v->reg.enable_addr = (uint64_t)(uintptr_t)&v->enabled;
		v->reg.enable_size = sizeof(v->enabled);
		if (ioctl(data_fd, DIAG_IOCSREG, &v->reg))
			ok = 0;
		snprintf(path, sizeof(path), "%s/events/user_events/%s/id", tracefs, v->name);
		v->id = read_number(path);
		v->off_n = u32_field_offset(tracefs, v->name, "n");
		v->off_x = u32_field_offset(tracefs, v->name, "x");
		if (v->id <= 0 || v->off_n <= 0)
			ok = 0;
	}
	CHECK("two events registered, ids and formats", ok && ev[0].off_x > 0 && ev[1].off_x < 0);

	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	page = sysconf(_SC_PAGESIZE);
	cpu_set_t set;
	CHECK("cpus", cpus > 0 && cpus <= MAX_CPUS && sched_getaffinity(0, sizeof(set), &set) == 0);
	for (cpu = 0; cpu < cpus && !CPU_ISSET(cpu, &set); cpu++)
		;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK("writer pinned to one CPU", cpu < cpus && sched_setaffinity(0, sizeof(set), &set) == 0 &&
						  sched_getcpu() == cpu);

	realtime();
	circular();
	printf("checks %d\n", checks);
	return 0;
}
