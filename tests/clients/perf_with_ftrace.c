/*
 * A perf consumer joins an event that an ftrace consumer already records
 * (run --record, then perf record -e user_events:NAME): from perf_event_open
 * on, every write must reach the perf ring too, even when no other request
 * reaches the daemon in between (writes that only ftrace records are served
 * by the fast path; the open must hand the event's writes to the engine).
 *
 * Register "__pwf u32 n"; "1" into its enable file; write it once (ftrace's
 * alone: the fast path now knows this writer); at once open its tracepoint
 * for this thread (sample_type RAW, period 1), map 1+1 pages read-only; write
 * WRITES times at once; each of those must be one sample, in order.
 *
 * usage: perf_with_ftrace TRACEFS
 * prints one "ok NAME" line per check; exits 1 at the first wrong result.
 */
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define WRITES 5
/* header 8, then u32 size and the entry (8 + 4) padded: 8 + 4 + 20 */
#define SAMPLE_SIZE 32

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	const char *tracefs = argv[1];
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	int data_fd = open(path, O_RDWR);
	int enabled = 0;
	struct user_reg reg;
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)"__pwf u32 n";
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.enable_size = sizeof(enabled);
	CHECK("register", data_fd >= 0 && ioctl(data_fd, DIAG_IOCSREG, &reg) == 0);
	snprintf(path, sizeof(path), "%s/events/user_events/__pwf/id", tracefs);
	long id = read_number(path);
	int off_n = u32_field_offset(tracefs, "__pwf", "n");
	snprintf(path, sizeof(path), "%s/events/user_events/__pwf/enable", tracefs);
	int enable_fd = open(path, O_WRONLY);
	CHECK("ftrace consumer", id > 0 && off_n > 0 && enable_fd >= 0 && write(enable_fd, "1", 1) == 1 &&
					 enabled == 1);

	struct { uint32_t index, n; } before = {reg.write_index, 99};
	CHECK("a write for ftrace alone", write(data_fd, &before, sizeof(before)) == (ssize_t)sizeof(before));

	struct perf_event_attr pe;
	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_TRACEPOINT;
	pe.size = sizeof(pe);
	pe.config = (uint64_t)id;
	pe.sample_period = 1;
	pe.sample_type = PERF_SAMPLE_RAW;
	int fd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	long page = sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *up = fd >= 0 ? mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, fd, 0)
						  : MAP_FAILED;
	CHECK("perf consumer", fd >= 0 && up != MAP_FAILED);

	int ok = 1;
	for (uint32_t i = 0; i < WRITES; i++) {
		struct { uint32_t index, n; } payload = {reg.write_index, i};
		ok &= write(data_fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
	}
	CHECK("written at once", ok);
	uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	CHECK("every write one sample", head == WRITES * SAMPLE_SIZE);
	const unsigned char *data = (const unsigned char *)up + page;
	for (uint32_t i = 0; ok && i < WRITES; i++) {
		const unsigned char *r = data + i * SAMPLE_SIZE;
		struct perf_event_header h;
		uint32_t raw_size, n;
		uint16_t common_type;
		memcpy(&h, r, sizeof(h));
		memcpy(&raw_size, r + sizeof(h), sizeof(raw_size));
		memcpy(&common_type, r + sizeof(h) + 4, sizeof(common_type));
		memcpy(&n, r + sizeof(h) + 4 + off_n, sizeof(n));
		ok = h.type == PERF_RECORD_SAMPLE && h.size == SAMPLE_SIZE && raw_size == 20 &&
		     common_type == (uint16_t)id && n == i;
	}
	CHECK("samples in order, raw data exact", ok);
	printf("checks %d\n", checks);
	return 0;
}
