/*
 * What the perf clients share: one "ok NAME" line per check, the first
 * wrong result printed as "FAIL NAME (errno ...)" and exit 1; the count of
 * checks for the test to assert; a number read from a tracefs file, a u32
 * field's offset from an event's format; a registered event with a perf
 * event of this thread on it.
 */
#ifndef PERF_CHECKS_H
#define PERF_CHECKS_H

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "user_events_uapi.h"

static int checks;

#define CHECK(name, cond)                                                              \
	do {                                                                           \
		if (!(cond)) {                                                         \
			printf("FAIL %s (errno %d: %s)\n", name, errno, strerror(errno)); \
			exit(1);                                                       \
		}                                                                      \
		printf("ok %s\n", name);                                               \
		checks++;                                                              \
	} while (0)

/* The number a tracefs file holds (an event's id), -1 if none. */
static inline long read_number(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = -1;
	if (!f || fscanf(f, "%ld", &n) != 1)
		n = -1;
	if (f)
		fclose(f);
	return n;
}

/* The offset of "field:u32 FIELD;" in user event EVENT's format, -1 if absent. */
static inline int u32_field_offset(const char *tracefs, const char *event, const char *field)
{
	char path[512], line[512], want[128];
	snprintf(path, sizeof(path), "%s/events/user_events/%s/format", tracefs, event);
	snprintf(want, sizeof(want), "field:u32 %s;", field);
	FILE *f = fopen(path, "r");
	int offset = -1;
	while (f && fgets(line, sizeof(line), f)) {
		char *at = strstr(line, want);
		if (at && sscanf(strstr(at, "offset:"), "offset:%d;", &offset) == 1)
			break;
	}
	if (f)
		fclose(f);
	return offset;
}

/* *pe for a tracepoint perf event on EVENT_ID: RAW samples, period 1, the
 * rest 0 (what every client here starts from). */
static inline void raw_attr(struct perf_event_attr *pe, long event_id)
{
	memset(pe, 0, sizeof(*pe));
	pe->type = PERF_TYPE_TRACEPOINT;
	pe->size = sizeof(*pe);
	pe->config = (uint64_t)event_id;
	pe->sample_type = PERF_SAMPLE_RAW;
	pe->sample_period = 1;
}

/* Registers "EVENT u32 a" through a user_events_data descriptor of TRACEFS
 * (*data_fd, *reg; its enable word *enabled) and opens a perf event of this
 * thread on it: RAW samples, period 1, read_format ID|LOST (three checks).
 * Returns the perf event's descriptor. */
static inline int open_raw_event(const char *tracefs, const char *event, int *data_fd,
				 struct user_reg *reg, int *enabled)
{
	char path[512], args[256];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	*data_fd = open(path, O_RDWR);
	CHECK("open user_events_data", *data_fd >= 0);
	snprintf(args, sizeof(args), "%s u32 a", event);
	memset(reg, 0, sizeof(*reg));
	reg->size = sizeof(*reg);
	reg->name_args = (uint64_t)(uintptr_t)args;
	reg->enable_addr = (uint64_t)(uintptr_t)enabled;
	reg->enable_size = sizeof(*enabled);
	CHECK("register", ioctl(*data_fd, DIAG_IOCSREG, reg) == 0);
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", tracefs, event);
	long event_id = read_number(path);

	struct perf_event_attr pe;
	raw_attr(&pe, event_id);
	pe.read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST;
	int fd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0);
	CHECK("perf_event_open", event_id > 0 && fd >= 0);
	return fd;
}

#endif
