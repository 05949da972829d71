/*
 * A writable perf ring respects its reader's data_tail, as the kernel's
 * non-overwrite ring does (perf_output_begin, ring_buffer_has_space): open
 * the event as a tracepoint of this thread (RAW, period 1, read_format
 * ID|LOST), map 1+1 pages read-write, and never move data_tail while writing
 * twice as many events as the ring holds. The ring keeps the first records
 * (none overwritten), stops one byte short of full (CIRC_SPACE), and read()
 * counts the rest lost. Once data_tail is moved to data_head, the next write
 * lands behind a PERF_RECORD_LOST carrying the event's id and that count.
 *
 * usage: perf_data_tail TRACEFS
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
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define EVENT "__tail_event"

static int data_fd;
static struct user_reg reg;

static int emit(uint32_t a)
{
	struct { uint32_t index, a; } payload = {reg.write_index, a};
	return write(data_fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
}

/* the last 4 bytes of the raw data: field a (RAW sample: header, u32 size, entry) */
static uint32_t field_a(const unsigned char *record)
{
	uint32_t raw_size, a;
	memcpy(&raw_size, record + 8, sizeof(raw_size));
	(void)raw_size;
	memcpy(&a, record + 12 + 8, sizeof(a)); /* after the 8-byte trace_entry */
	return a;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	int enabled = 0;
	int fd = open_raw_event(argv[1], EVENT, &data_fd, &reg, &enabled);
	uint64_t perf_id = 0;
	CHECK("PERF_EVENT_IOC_ID", ioctl(fd, PERF_EVENT_IOC_ID, &perf_id) == 0 && perf_id);
	long page = sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *up = mmap(NULL, page * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("mmap 1+1 pages read-write", up != MAP_FAILED);
	unsigned char *data = (unsigned char *)up + up->data_offset;

	CHECK("first write", emit(0) && up->data_head > 0);
	struct perf_event_header *first = (void *)data;
	uint64_t size = first->size;
	CHECK("a sample", first->type == PERF_RECORD_SAMPLE && size >= 24 && field_a(data) == 0);

	/* the kernel's space: CIRC_SPACE(head, tail) = (tail - head - 1) & mask */
	uint64_t fit = (up->data_size - 1) / size;
	uint32_t total = (uint32_t)(2 * fit);
	int ok = 1;
	for (uint32_t i = 1; i < total; i++)
		ok &= emit(i);
	CHECK("writes past the ring's end succeed", ok);
	uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	CHECK("the ring stops one byte short of full", head == fit * size && up->data_tail == 0);
	int in_order = 1;
	for (uint64_t i = 0; i < fit; i++) {
		struct perf_event_header *h = (void *)(data + i * size);
		if (h->type != PERF_RECORD_SAMPLE || h->size != size || field_a(data + i * size) != i)
			in_order = 0;
	}
	CHECK("no unread record overwritten", in_order);
	uint64_t values[3];
	CHECK("read() counts the lost samples",
	      read(fd, values, sizeof(values)) == (ssize_t)sizeof(values) &&
	      values[1] == perf_id && values[2] == total - fit);

	__atomic_store_n(&up->data_tail, head, __ATOMIC_RELEASE);
	CHECK("write after the reader caught up", emit(total));
	uint64_t after = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	unsigned char out[24 + 256];
	CHECK("the LOST record and the sample, nothing else", after == head + 24 + size && size <= 256);
	for (uint64_t k = 0; k < 24 + size; k++) /* they may wrap around the ring's end */
		out[k] = data[(head + k) & (up->data_size - 1)];
	struct perf_event_header *lh = (void *)out;
	uint64_t lost_id, lost_count;
	memcpy(&lost_id, out + 8, sizeof(lost_id));
	memcpy(&lost_count, out + 16, sizeof(lost_count));
	CHECK("PERF_RECORD_LOST with the id and the count",
	      lh->type == PERF_RECORD_LOST && lh->size == 24 && lost_id == perf_id &&
	      lost_count == total - fit);
	struct perf_event_header *nh = (void *)(out + 24);
	CHECK("then the sample", nh->type == PERF_RECORD_SAMPLE && field_a(out + 24) == total);

	munmap(up, page * 2);
	close(fd);
	printf("checks %d\n", checks);
	return 0;
}
