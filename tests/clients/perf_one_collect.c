/*
 * one_collect's RingBufSession as OpenTelemetry's user_events exporter tests
 * use it (docs/perf.md, /work/shared/reference/perf-consumers.md), written
 * from that description: per CPU an inert PERF_COUNT_SW_DUMMY leader of this
 * process (disabled, sample_id_all, MONOTONIC_RAW, read_format ID, sample_type
 * IDENTIFIER|TIME|TID), its id from read(fd, 16), 1+32 pages mapped RW; per
 * CPU the tracepoint (the same plus RAW, period 1), its id from read(), then
 * SET_OUTPUT into that CPU's leader; ENABLE every fd; write the event from
 * this thread; read the leaders' rings without poll (data_head at 1024,
 * data_tail written back at 1032); DISABLE.
 *
 * Every sample must carry the id read() gave for its CPU's tracepoint (an
 * unknown id makes one_collect panic), this thread's pid/tid, and the raw
 * data exactly: the trace entry (common_type = the event's id) then the
 * fields at the format's offsets.
 *
 * usage: perf_one_collect TRACEFS
 * prints one "ok NAME" line per check; exits 1 at the first wrong result.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
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

#define EVENT "__oc_event"
#define WRITES 10
#define DATA_PAGES 32
#define MAX_CPUS 64

static const char *tracefs;

static void common_attr(struct perf_event_attr *pe)
{
	memset(pe, 0, sizeof(*pe));
	pe->size = sizeof(*pe);
	pe->disabled = 1;
	pe->sample_id_all = 1;
	pe->use_clockid = 1;
	pe->clockid = CLOCK_MONOTONIC_RAW;
	pe->exclude_hv = 1;
	pe->exclude_idle = 1;
	pe->read_format = PERF_FORMAT_ID;
	pe->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TIME | PERF_SAMPLE_TID;
}

/* read(fd, 16): { value, id } with read_format ID; 0 on a short or failed read */
static uint64_t read_id(int fd)
{
	uint64_t values[2];
	if (read(fd, values, sizeof(values)) != (ssize_t)sizeof(values))
		return 0;
	return values[1];
}

struct sample {
	uint64_t identifier;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t raw_size;
	unsigned char raw[];
} __attribute__((__packed__));

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	tracefs = argv[1];
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	int data_fd = open(path, O_RDWR);
	CHECK("open user_events_data", data_fd >= 0);

	int enabled = 0;
	struct user_reg reg;
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)(EVENT " u32 a; u32 b");
	reg.enable_bit = 0;
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.enable_size = sizeof(enabled);
	CHECK("register", ioctl(data_fd, DIAG_IOCSREG, &reg) == 0);
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", tracefs, EVENT);
	long event_id = read_number(path);
	int off_a = u32_field_offset(tracefs, EVENT, "a"), off_b = u32_field_offset(tracefs, EVENT, "b");
	CHECK("id and format", event_id > 0 && off_a > 0 && off_b > 0);

	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	CHECK("cpus", cpus > 0 && cpus <= MAX_CPUS);
	long page = sysconf(_SC_PAGESIZE);
	int leader[MAX_CPUS], tp[MAX_CPUS];
	uint64_t leader_id[MAX_CPUS], tp_id[MAX_CPUS];
	struct perf_event_mmap_page *ring[MAX_CPUS];
	int ok_leaders = 1, ok_tps = 1;
	for (long cpu = 0; cpu < cpus; cpu++) {
		struct perf_event_attr pe;
		common_attr(&pe);
		pe.type = PERF_TYPE_SOFTWARE;
		pe.config = PERF_COUNT_SW_DUMMY;
		leader[cpu] = (int)syscall(SYS_perf_event_open, &pe, getpid(), (int)cpu, -1, 0);
		leader_id[cpu] = leader[cpu] >= 0 ? read_id(leader[cpu]) : 0;
		ring[cpu] = leader[cpu] >= 0 ? mmap(NULL, page * (DATA_PAGES + 1), PROT_READ | PROT_WRITE,
						    MAP_SHARED, leader[cpu], 0)
					     : MAP_FAILED;
		if (leader[cpu] < 0 || !leader_id[cpu] || ring[cpu] == MAP_FAILED)
			ok_leaders = 0;
	}
	CHECK("leaders opened, ids read, rings mapped", ok_leaders);
	for (long cpu = 0; cpu < cpus; cpu++) {
		struct perf_event_attr pe;
		common_attr(&pe);
		pe.type = PERF_TYPE_TRACEPOINT;
		pe.config = (uint64_t)event_id;
		pe.sample_type |= PERF_SAMPLE_RAW;
		pe.sample_period = 1;
		tp[cpu] = (int)syscall(SYS_perf_event_open, &pe, getpid(), (int)cpu, -1, 0);
		tp_id[cpu] = tp[cpu] >= 0 ? read_id(tp[cpu]) : 0;
		if (tp[cpu] < 0 || !tp_id[cpu] || tp_id[cpu] == leader_id[cpu] ||
		    ioctl(tp[cpu], PERF_EVENT_IOC_SET_OUTPUT, leader[cpu]) != 0)
			ok_tps = 0;
	}
	CHECK("tracepoints opened, ids read, output set to the leaders", ok_tps);
	int ok_enable = 1;
	for (long cpu = 0; cpu < cpus; cpu++)
		if (ioctl(leader[cpu], PERF_EVENT_IOC_ENABLE, 0) || ioctl(tp[cpu], PERF_EVENT_IOC_ENABLE, 0))
			ok_enable = 0;
	CHECK("enabled", ok_enable && enabled == 1);

	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	uint64_t before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	for (uint32_t i = 0; i < WRITES; i++) {
		struct { uint32_t index, a, b; } payload = {reg.write_index, i, 0xfeedface ^ i};
		if (write(data_fd, &payload, sizeof(payload)) != (ssize_t)sizeof(payload))
			CHECK("write", 0);
	}
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	uint64_t after = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	CHECK("written", 1);

	/* the rings, read as one_collect reads them: no poll, head then records */
	int seen = 0, bad_time = 0, bad_id = 0, bad_task = 0, bad_raw = 0, other = 0, bad_ring = 0;
	uint32_t written = 0; /* bit i: write i seen (a thread may move between CPUs) */
	for (long cpu = 0; cpu < cpus; cpu++) {
		struct perf_event_mmap_page *up = ring[cpu];
		if (up->data_offset != (uint64_t)page || up->data_size != (uint64_t)page * DATA_PAGES)
			bad_ring++;
		uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = up->data_tail;
		unsigned char *data = (unsigned char *)up + up->data_offset;
		uint64_t mask = up->data_size - 1;
		while (tail < head) {
			unsigned char copy[1024];
			struct perf_event_header *h = (void *)(data + (tail & mask));
			uint16_t size = h->size;
			if (size < sizeof(*h) || size > sizeof(copy)) {
				bad_ring++;
				break;
			}
			for (uint16_t k = 0; k < size; k++)
				copy[k] = data[(tail + k) & mask];
			h = (void *)copy;
			if (h->type != PERF_RECORD_SAMPLE) {
				other++;
			} else {
				struct sample *s = (void *)(copy + sizeof(*h));
				seen++;
				if (s->identifier != tp_id[cpu])
					bad_id++;
				if (s->time < before || s->time > after)
					bad_time++;
				if (s->pid != (uint32_t)getpid() || s->tid != (uint32_t)gettid())
					bad_task++;
				uint16_t common_type;
				uint32_t a, b;
				memcpy(&common_type, s->raw, sizeof(common_type));
				memcpy(&a, s->raw + off_a, sizeof(a));
				memcpy(&b, s->raw + off_b, sizeof(b));
				if (common_type != (uint16_t)event_id || s->raw_size < (uint32_t)off_b + 4 ||
				    a >= WRITES || b != (0xfeedface ^ a) || (written & (1u << a)))
					bad_raw++;
				else
					written |= 1u << a;
			}
			tail += size;
		}
		__atomic_store_n(&up->data_tail, tail, __ATOMIC_RELEASE);
	}
	CHECK("rings are 32 data pages after one page", !bad_ring);
	CHECK("every write is one sample", seen == WRITES && !other && written == (1u << WRITES) - 1);
	CHECK("samples carry the tracepoint ids read() gave", !bad_id);
	CHECK("samples carry this thread", !bad_task);
	CHECK("samples stamped by CLOCK_MONOTONIC_RAW", !bad_time);
	CHECK("raw data exact", !bad_raw);

	int ok_disable = 1;
	for (long cpu = 0; cpu < cpus; cpu++)
		if (ioctl(tp[cpu], PERF_EVENT_IOC_DISABLE, 0) || ioctl(leader[cpu], PERF_EVENT_IOC_DISABLE, 0))
			ok_disable = 0;
	CHECK("disabled", ok_disable);
	for (long cpu = 0; cpu < cpus; cpu++) {
		munmap(ring[cpu], page * (DATA_PAGES + 1));
		close(tp[cpu]);
		close(leader[cpu]);
	}
	printf("checks %d\n", checks);
	return 0;
}
