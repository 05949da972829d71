/*
 * The perf ring's head has one owner at a time: two threads pinned to CPU 0
 * write 10,000 events each, which a CPU-wide perf event on CPU 0 records (RAW,
 * 1+2 pages read-write); a reader thread follows the ring (data_tail moved
 * after each walk) and a fourth thread toggles the event meanwhile
 * (PAUSE_OUTPUT on and off, DISABLE and ENABLE).  So the fast path writes
 * one thread's samples while the engine writes the other's (those due a
 * wakeup, those that find the ring full, a LOST record) or changes the ring.
 *
 * At the end every record read is whole: each thread's samples in the order
 * it wrote them, LOST records between; and read() counts exactly the samples
 * seen plus the ones lost (paused or no room).  A head claimed twice, or a
 * sample counted but never placed, fails it.
 *
 * usage: perf_native_race TRACEFS
 * prints one "ok NAME" line per check, then "checks N"; exits 1 at the first
 * wrong result.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define EVENT "__race_event"
#define WRITERS 2
#define WRITES 10000

static int data_fd, perf_fd;
static struct user_reg reg;
static struct perf_event_mmap_page *meta;
static unsigned char *data;
static uint64_t data_size;
static volatile int writing = 1;
/* What the reader saw. */
static uint64_t samples, lost_reported, bad_records;
static int64_t last_seq[WRITERS] = {-1, -1};
static int written = 1;

static void copy_out(uint64_t at, void *out, size_t len)
{
	for (size_t i = 0; i < len; i++)
		((unsigned char *)out)[i] = data[(at + i) & (data_size - 1)];
}

/* Walks the records from data_tail to data_head, then moves data_tail. */
static void walk(void)
{
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t at = meta->data_tail;
	while (at < head) {
		struct perf_event_header h;
		copy_out(at, &h, sizeof(h));
		if (h.size < sizeof(h) || at + h.size > head) {
			if (!bad_records++)
				printf("record at %llu: type %u size %u, head %llu\n",
				       (unsigned long long)at, h.type, h.size, (unsigned long long)head);
			break;
		}
		if (h.type == PERF_RECORD_SAMPLE && h.size == 32) {
			/* header, u32 raw size, trace_entry, u32 a (writer << 24 | seq) */
			uint32_t a;
			copy_out(at + 8 + 4 + 8, &a, sizeof(a));
			uint32_t writer = a >> 24, seq = a & 0xFFFFFF;
			if ((writer >= WRITERS || (int64_t)seq <= last_seq[writer]) && !bad_records++)
				printf("writer %u seq %u after %lld at %llu\n", writer, seq,
				       writer < WRITERS ? (long long)last_seq[writer] : -1LL,
				       (unsigned long long)at);
			if (writer < WRITERS)
				last_seq[writer] = seq;
			samples++;
		} else if (h.type == PERF_RECORD_LOST && h.size == 24) {
			uint64_t lost;
			copy_out(at + 16, &lost, sizeof(lost));
			lost_reported += lost;
		} else if (!bad_records++) {
			printf("record at %llu: type %u size %u\n", (unsigned long long)at, h.type,
			       h.size);
		}
		at += h.size;
	}
	__atomic_store_n(&meta->data_tail, at, __ATOMIC_RELEASE);
}

static void *reader(void *arg)
{
	(void)arg;
	while (writing)
		walk();
	return NULL;
}

static long toggles;

static void *writer(void *arg)
{
	uint32_t who = (uint32_t)(uintptr_t)arg;
	cpu_set_t cpu0;
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	int ok = sched_setaffinity(0, sizeof(cpu0), &cpu0) == 0;
	for (uint32_t seq = 0; seq < WRITES; seq++) {
		struct { uint32_t index, a; } payload = {reg.write_index, who << 24 | seq};
		ok &= write(data_fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
	}
	__atomic_and_fetch(&written, ok, __ATOMIC_RELAXED);
	return NULL;
}

static void *toggler(void *arg)
{
	(void)arg;
	while (writing) {
		int ok = ioctl(perf_fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1) == 0 &&
			 ioctl(perf_fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0) == 0 &&
			 ioctl(perf_fd, PERF_EVENT_IOC_DISABLE, 0) == 0 &&
			 ioctl(perf_fd, PERF_EVENT_IOC_ENABLE, 0) == 0;
		if (!ok) {
			printf("FAIL toggle (errno %d: %s)\n", errno, strerror(errno));
			exit(1);
		}
		toggles++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	char path[512], args[64];
	snprintf(path, sizeof(path), "%s/user_events_data", argv[1]);
	data_fd = open(path, O_RDWR);
	CHECK("open user_events_data", data_fd >= 0);
	int enabled = 0;
	snprintf(args, sizeof(args), "%s u32 a", EVENT);
	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)args;
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.enable_size = sizeof(enabled);
	CHECK("register", ioctl(data_fd, DIAG_IOCSREG, &reg) == 0);
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", argv[1], EVENT);
	struct perf_event_attr pe;
	raw_attr(&pe, read_number(path));
	pe.read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST;
	perf_fd = (int)syscall(SYS_perf_event_open, &pe, -1, 0, -1, 0);
	CHECK("perf_event_open of CPU 0", perf_fd >= 0);
	long page = sysconf(_SC_PAGESIZE);
	void *ring = mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE, MAP_SHARED, perf_fd, 0);
	CHECK("mmap 1+2 pages read-write", ring != MAP_FAILED);
	meta = ring;
	data = (unsigned char *)ring + meta->data_offset;
	data_size = meta->data_size;

	pthread_t threads[2], writers[WRITERS];
	CHECK("reader and toggler threads",
	      pthread_create(&threads[0], NULL, reader, NULL) == 0 &&
		      pthread_create(&threads[1], NULL, toggler, NULL) == 0);
	int started = 1;
	for (uintptr_t w = 0; w < WRITERS; w++)
		started &= pthread_create(&writers[w], NULL, writer, (void *)w) == 0;
	CHECK("writer threads", started);
	for (int w = 0; w < WRITERS; w++)
		pthread_join(writers[w], NULL);
	writing = 0;
	pthread_join(threads[0], NULL);
	pthread_join(threads[1], NULL);
	CHECK("every write answered", written);
	walk();
	CHECK("every record whole: samples in order, LOST records between", bad_records == 0);
	struct { uint64_t value, id, lost; } counts;
	CHECK("read()", read(perf_fd, &counts, sizeof(counts)) == (ssize_t)sizeof(counts));
	printf("samples %llu lost %llu reported %llu value %llu toggles %ld\n",
	       (unsigned long long)samples, (unsigned long long)counts.lost,
	       (unsigned long long)lost_reported, (unsigned long long)counts.value, toggles);
	CHECK("read() counts the samples seen and the ones lost, no more",
	      counts.value == samples + counts.lost && lost_reported <= counts.lost);
	CHECK("samples and toggles both happened", samples > 100 && toggles > 10);
	printf("checks %d\n", checks);
	return 0;
}
