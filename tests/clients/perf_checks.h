/*
 * What the perf clients share: one "ok NAME" line per check, the first
 * wrong result printed as "FAIL NAME (errno ...)" and exit 1; the count of
 * checks for the test to assert; a number read from a tracefs file, a u32
 * field's offset from an event's format.
 */
#ifndef PERF_CHECKS_H
#define PERF_CHECKS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif
