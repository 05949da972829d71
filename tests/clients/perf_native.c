/*
 * Every sample field the fast path writes natively, checked exactly, through
 * the cases it must leave to the engine: a perf event of this thread on
 * "__native_event u32 seq; __rel_loc char[] msg" (a dynamic field, so each
 * sample's entry is validated), sample_type IDENTIFIER|IP|TID|TIME|ADDR|ID|
 * STREAM_ID|CPU|PERIOD|RAW, read_format ID|LOST, 1+1 pages mapped
 * read-write (a ring that respects data_tail).
 *
 *   1. Rounds of writes, each read back from data_tail to data_head and every
 *      field checked (header, ids, IP and ADDR 0, pid/tid, TIME never going
 *      back, CPU, PERIOD 1, the raw size, the trace entry, seq, the string),
 *      data_tail moved on: the rounds wrap the ring, so samples are split
 *      across its end.
 *   2. A write whose __rel_loc points past the record: EFAULT, no sample.
 *   3. Writes into a ring whose reader stops reading: the ring keeps what
 *      fits (one byte short of full), the rest are lost; once data_tail
 *      moves, the next write lands behind a PERF_RECORD_LOST with that count.
 *   4. read(): every write counted, the lost ones too.
 *
 * Under `tracefs-fuse run` the fast path writes most of these samples and the
 * engine the rest (the full ring, the LOST record, the invalid write); under
 * `run --no-fast-path` the engine writes all: the checks are the same.
 *
 * usage: perf_native TRACEFS
 * prints one "ok NAME" line per check; exits 1 at the first wrong result.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define EVENT "__native_event"
#define ROUNDS 6
#define PER_ROUND 20
#define SAMPLE_TYPE                                                                          \
	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |      \
	 PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |        \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_RAW)

static int data_fd;
static struct user_reg reg;
static long event_id;
static uint64_t perf_id, last_time;
static struct perf_event_mmap_page *meta;
static unsigned char *data;
static uint64_t data_size;

static void fail(const char *what, uint64_t seq)
{
	printf("FAIL %s (sample %llu)\n", what, (unsigned long long)seq);
	exit(1);
}

/* The string of write `seq`: 0 to 12 letters. */
static size_t message(uint32_t seq, char *out)
{
	size_t n = seq % 13;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)('a' + (seq + i) % 26);
	out[n] = 0;
	return n + 1;
}

/* [u32 index][u32 seq][__rel_loc: u16 offset from its end, u16 size][msg]; `loc`
 * overrides the __rel_loc word (an invalid one). */
static ssize_t emit(uint32_t seq, const uint32_t *loc)
{
	char msg[16];
	uint32_t size = (uint32_t)message(seq, msg);
	uint32_t rel = loc ? *loc : size << 16;
	struct iovec io[4] = {{&reg.write_index, 4}, {&seq, 4}, {&rel, 4}, {msg, size}};
	return writev(data_fd, io, 4);
}

static void copy_out(uint64_t at, void *out, size_t len)
{
	for (size_t i = 0; i < len; i++)
		((unsigned char *)out)[i] = data[(at + i) & (data_size - 1)];
}

/* Checks the sample at `at` is write `seq`'s; returns its size. */
static uint64_t check_sample(uint64_t at, uint32_t seq)
{
	unsigned char record[256];
	struct perf_event_header header;
	copy_out(at, &header, sizeof(header));
	if (header.type != PERF_RECORD_SAMPLE || header.misc != PERF_RECORD_MISC_KERNEL ||
	    header.size > sizeof(record))
		fail("header", seq);
	copy_out(at, record, header.size);
	uint64_t u[9];
	memcpy(u, record + 8, sizeof(u));
	/* IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD */
	uint32_t pid = (uint32_t)u[2], tid = (uint32_t)(u[2] >> 32);
	uint32_t cpu = (uint32_t)u[7], res = (uint32_t)(u[7] >> 32);
	if (u[0] != perf_id || u[5] != perf_id || u[6] != perf_id)
		fail("ids", seq);
	if (u[1] != 0 || u[4] != 0)
		fail("ip and addr", seq);
	if (pid != (uint32_t)getpid() || tid != (uint32_t)gettid())
		fail("pid and tid", seq);
	if (!u[3] || u[3] < last_time)
		fail("time", seq);
	last_time = u[3];
	if (cpu >= (uint32_t)sysconf(_SC_NPROCESSORS_CONF) || res)
		fail("cpu", seq);
	if (u[8] != 1)
		fail("period", seq);
	char msg[16];
	size_t msg_len = message(seq, msg);
	size_t entry_len = 8 + 4 + 4 + msg_len;
	uint32_t raw_size;
	memcpy(&raw_size, record + 80, 4);
	if (raw_size != ((entry_len + 7) & ~(size_t)7) + 4 || header.size != 84 + raw_size)
		fail("raw size", seq);
	const unsigned char *entry = record + 84;
	uint16_t type;
	int32_t entry_pid;
	uint32_t got_seq, loc;
	memcpy(&type, entry, 2);
	memcpy(&entry_pid, entry + 4, 4);
	memcpy(&got_seq, entry + 8, 4);
	memcpy(&loc, entry + 12, 4);
	if (type != (uint16_t)event_id || entry[2] || entry[3] || entry_pid != (int32_t)gettid())
		fail("trace entry", seq);
	if (got_seq != seq || loc != (uint32_t)(msg_len << 16) ||
	    memcmp(entry + 16, msg, msg_len))
		fail("payload", seq);
	for (size_t i = entry_len; i < raw_size; i++)
		if (entry[i])
			fail("padding", seq);
	return header.size;
}

/* Reads every sample from data_tail to data_head, writes first..first+n-1
 * in order, and moves data_tail past them. */
static int read_round(uint32_t first, uint32_t n)
{
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t at = meta->data_tail;
	for (uint32_t k = 0; k < n; k++) {
		if (at >= head)
			fail("missing", first + k);
		at += check_sample(at, first + k);
	}
	__atomic_store_n(&meta->data_tail, at, __ATOMIC_RELEASE);
	return at == head;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", argv[1]);
	data_fd = open(path, O_RDWR);
	CHECK("open user_events_data", data_fd >= 0);
	int enabled = 0;
	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)(EVENT " u32 seq; __rel_loc char[] msg");
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.enable_size = sizeof(enabled);
	CHECK("register", ioctl(data_fd, DIAG_IOCSREG, &reg) == 0);
	snprintf(path, sizeof(path), "%s/events/user_events/" EVENT "/id", argv[1]);
	event_id = read_number(path);
	struct perf_event_attr pe;
	raw_attr(&pe, event_id);
	pe.sample_type = SAMPLE_TYPE;
	pe.read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST;
	int fd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	CHECK("perf_event_open", event_id > 0 && fd >= 0);
	CHECK("PERF_EVENT_IOC_ID", ioctl(fd, PERF_EVENT_IOC_ID, &perf_id) == 0 && perf_id);
	long page = sysconf(_SC_PAGESIZE);
	void *ring = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("mmap 1+1 pages read-write", ring != MAP_FAILED);
	meta = ring;
	data = (unsigned char *)ring + meta->data_offset;
	data_size = meta->data_size;
	CHECK("the enable bit", enabled & 1);

	uint32_t seq = 0, ok = 1;
	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < PER_ROUND; k++)
			ok &= emit(seq + (uint32_t)k, NULL) > 0;
		ok &= read_round(seq, PER_ROUND);
		seq += PER_ROUND;
	}
	CHECK("rounds that wrap the ring: every sample exact", ok);
	CHECK("it wrapped", meta->data_head > data_size);

	uint32_t bad = (uint32_t)(64u << 16) | 0;  /* 64 bytes past the record's end */
	uint64_t before = meta->data_head;
	errno = 0;
	CHECK("an invalid __rel_loc: EFAULT", emit(seq, &bad) < 0 && errno == EFAULT);
	CHECK("... and no sample", meta->data_head == before);
	seq++;  /* not counted: user_event_perf discards it before the sample */

	/* Fill the ring without reading: what fits stays, the rest is lost. */
	uint32_t fill_from = seq, written = 0;
	for (; written < 60; written++)
		ok &= emit(seq + written, NULL) > 0;
	seq += written;
	uint64_t head = meta->data_head, at = meta->data_tail, kept = 0;
	while (at < head)
		at += check_sample(at, fill_from + (uint32_t)kept++);
	CHECK("a full ring keeps the first, one byte short of full",
	      ok && kept > 20 && kept < written && head - meta->data_tail < data_size);
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
	CHECK("the next write", emit(seq, NULL) > 0);
	struct { struct perf_event_header h; uint64_t id, lost; } lost;
	copy_out(head, &lost, sizeof(lost));
	CHECK("PERF_RECORD_LOST first, with the count lost",
	      lost.h.type == PERF_RECORD_LOST && lost.id == perf_id &&
		      lost.lost == written - kept);
	check_sample(head + lost.h.size, seq);
	CHECK("then the sample", 1);
	seq++;

	struct { uint64_t value, id, lost; } counts;
	CHECK("read(): every write counted, the lost ones too",
	      read(fd, &counts, sizeof(counts)) == (ssize_t)sizeof(counts) &&
		      counts.id == perf_id && counts.value == seq - 1 &&
		      counts.lost == written - kept);
	printf("checks %d\n", checks);
	return 0;
}
