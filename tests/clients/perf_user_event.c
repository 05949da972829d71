/*
 * What the kernel's selftest user_events/perf_test.c (6.12: perf_write,
 * perf_empty_events) checks, written from its description: register an
 * event, open it as a perf tracepoint of this thread (RAW samples, period 1,
 * enabled), map 1+1 pages read-only, see the enable bit set, write once, and
 * find the sample at data_offset at once: PERF_RECORD_SAMPLE, then the raw
 * size, then the trace entry with our payload at the format's offsets; the
 * last close of the perf fd (not a dup's) clears the bit before close()
 * returns; unregister.
 *
 * usage: perf_user_event TRACEFS
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

static const char *tracefs;

static int open_perf(const char *event)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", tracefs, event);
	long id = read_number(path);
	if (id < 0)
		return -1;
	struct perf_event_attr pe;
	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_TRACEPOINT;
	pe.size = sizeof(pe);
	pe.config = (uint64_t)id;
	pe.sample_type = PERF_SAMPLE_RAW;
	pe.sample_period = 1;
	pe.wakeup_events = 1;
	return (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0);
}

static void one_event(int data_fd, const char *event, const char *args, int with_fields)
{
	char label[128];
	int check = 0;
	struct user_reg reg;
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	char name_args[256];
	snprintf(name_args, sizeof(name_args), "%s%s", event, args);
	reg.name_args = (uint64_t)(uintptr_t)name_args;
	reg.enable_bit = 31;
	reg.enable_addr = (uint64_t)(uintptr_t)&check;
	reg.enable_size = sizeof(check);
	snprintf(label, sizeof(label), "%s: register", event);
	CHECK(label, ioctl(data_fd, DIAG_IOCSREG, &reg) == 0 && check == 0);

	int fd = open_perf(event);
	snprintf(label, sizeof(label), "%s: perf_event_open", event);
	CHECK(label, fd >= 0);
	long page = sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *perf_page = mmap(NULL, page * 2, PROT_READ, MAP_SHARED, fd, 0);
	snprintf(label, sizeof(label), "%s: mmap", event);
	CHECK(label, perf_page != MAP_FAILED);
	snprintf(label, sizeof(label), "%s: enable bit set", event);
	CHECK(label, check == 1 << reg.enable_bit);

	struct { uint32_t index, field1, field2; } payload = {reg.write_index, 0xdeadbeef, 0xfeedface};
	size_t size = with_fields ? sizeof(payload) : sizeof(payload.index);
	snprintf(label, sizeof(label), "%s: write", event);
	CHECK(label, write(data_fd, &payload, size) == (ssize_t)size);

	uint32_t *val = (void *)((char *)perf_page + perf_page->data_offset);
	snprintf(label, sizeof(label), "%s: PERF_RECORD_SAMPLE at data_offset", event);
	CHECK(label, perf_page->data_head > 0 && val[0] == PERF_RECORD_SAMPLE);
	if (with_fields) {
		int offset = u32_field_offset(tracefs, event, "field1");
		snprintf(label, sizeof(label), "%s: field1 at its offset", event);
		/* header (8 bytes) and raw size (4), then the entry */
		CHECK(label, offset > 0 && *(uint32_t *)((char *)(val + 3) + offset) == 0xdeadbeef);
		offset = u32_field_offset(tracefs, event, "field2");
		snprintf(label, sizeof(label), "%s: field2 at its offset", event);
		CHECK(label, offset > 0 && *(uint32_t *)((char *)(val + 3) + offset) == 0xfeedface);
	} else {
		/* entry of 8 bytes, padded so that size + data end on 8 */
		snprintf(label, sizeof(label), "%s: raw size of an empty event", event);
		CHECK(label, val[2] == 12);
	}

	munmap(perf_page, page * 2);
	/* perf_release runs at the last close of the fd, before close() returns
	 * (6.12's perf_test checks the bit right after close): a dup keeps it. */
	close(dup(fd));
	snprintf(label, sizeof(label), "%s: closing a dup keeps the event", event);
	CHECK(label, check == 1 << reg.enable_bit);
	close(fd);
	snprintf(label, sizeof(label), "%s: the last close clears the bit", event);
	CHECK(label, check == 0);
	struct user_unreg unreg;
	memset(&unreg, 0, sizeof(unreg));
	unreg.size = sizeof(unreg);
	unreg.disable_bit = 31;
	unreg.disable_addr = (uint64_t)(uintptr_t)&check;
	snprintf(label, sizeof(label), "%s: unregister clears the bit", event);
	CHECK(label, ioctl(data_fd, DIAG_IOCSUNREG, &unreg) == 0 && check == 0);
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
	int data_fd = open(path, O_RDWR);
	CHECK("open user_events_data", data_fd >= 0);
	one_event(data_fd, "__test_event", " u32 field1; u32 field2", 1); /* perf_write */
	one_event(data_fd, "__test_empty", "", 0);                        /* perf_empty_events */
	printf("checks %d\n", checks);
	return 0;
}
