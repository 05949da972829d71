/*
 * Runs a user_events script from stdin, one operation a line, and prints
 * each operation's result; the fast-path differential test feeds the same
 * script to a mount with the fast path and to one without.
 *
 * usage: ue_script TRACEFS_DIR     (pins itself to CPU 0)
 *
 *   open                   open user_events_data (files are numbered 0, 1..)
 *   close F                close file F
 *   reg F W NAME ARGS...   DIAG_IOCSREG on F, enable bit 0 of word W
 *   unreg F W              DIAG_IOCSUNREG of word W's bit 0
 *   del NAME               DIAG_IOCSDEL
 *   write F INDEX HEX      writev([s32 INDEX][bytes HEX]) on F
 *   enable NAME 0|1        write to events/user_events/NAME/enable
 *   tracing_on 0|1         write to tracing_on
 *   words                  print every enable word (W 0..63)
 *   stamps F INDEX N GAP   N writes of a u64 payload: CLOCK_MONOTONIC (ns)
 *                          just before the write; every 8th write waits GAP
 *                          microseconds first
 *
 * Each prints "<line> -> <result> <errno name>" (reg adds the write index).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

#define MAX_FILES 16
#define MAX_WORDS 64

static const char *dir;
static int files[MAX_FILES];
static int nfiles;
static uint32_t words[MAX_WORDS];

static int write_text(const char *rel, const char *text)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int rc = (int)write(fd, text, strlen(text));
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

static int unhex(const char *hex, unsigned char *out, size_t cap)
{
	size_t n = strlen(hex) / 2;
	if (n > cap)
		return -1;
	for (size_t i = 0; i < n; i++)
		sscanf(hex + 2 * i, "%2hhx", &out[i]);
	return (int)n;
}

static int file(const char *arg)
{
	int f = atoi(arg);
	return f >= 0 && f < nfiles ? files[f] : -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: ue_script TRACEFS_DIR < script\n");
		return 2;
	}
	dir = argv[1];
	cpu_set_t cpu0;
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	if (sched_setaffinity(0, sizeof(cpu0), &cpu0)) {
		perror("sched_setaffinity");
		return 2;
	}
	static char line[1 << 16];
	static unsigned char payload[1 << 15];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		char copy[sizeof(line)];
		strcpy(copy, line);
		char *op = strtok(copy, " ");
		if (!op)
			continue;
		int rc = -1, index = -1;
		errno = 0;
		if (!strcmp(op, "open")) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/user_events_data", dir);
			rc = nfiles < MAX_FILES ? open(path, O_RDWR) : -1;
			if (rc >= 0)
				files[nfiles++] = rc;
		} else if (!strcmp(op, "close")) {
			rc = close(file(strtok(NULL, " ")));
		} else if (!strcmp(op, "reg")) {
			int fd = file(strtok(NULL, " "));
			int w = atoi(strtok(NULL, " "));
			char *name = strtok(NULL, "");
			struct user_reg r = {.size = sizeof(r), .enable_size = 4,
					     .enable_addr = (uint64_t)&words[w % MAX_WORDS],
					     .name_args = (uint64_t)name};
			rc = ioctl(fd, DIAG_IOCSREG, &r);
			index = (int)r.write_index;
		} else if (!strcmp(op, "unreg")) {
			int fd = file(strtok(NULL, " "));
			int w = atoi(strtok(NULL, " "));
			struct user_unreg u = {.size = sizeof(u),
					       .disable_addr = (uint64_t)&words[w % MAX_WORDS]};
			rc = ioctl(fd, DIAG_IOCSUNREG, &u);
		} else if (!strcmp(op, "del")) {
			rc = ioctl(files[0], DIAG_IOCSDEL, strtok(NULL, " "));
		} else if (!strcmp(op, "write")) {
			int fd = file(strtok(NULL, " "));
			int32_t idx = atoi(strtok(NULL, " "));
			char *hex = strtok(NULL, " ");
			int n = unhex(hex ? hex : "", payload, sizeof(payload));
			struct iovec iov[2] = {{&idx, sizeof(idx)}, {payload, (size_t)n}};
			rc = (int)writev(fd, iov, 2);
		} else if (!strcmp(op, "enable")) {
			char rel[1024];
			char *name = strtok(NULL, " ");
			snprintf(rel, sizeof(rel), "events/user_events/%s/enable", name);
			rc = write_text(rel, strtok(NULL, " "));
		} else if (!strcmp(op, "tracing_on")) {
			rc = write_text("tracing_on", strtok(NULL, " "));
		} else if (!strcmp(op, "stamps")) {
			int fd = file(strtok(NULL, " "));
			int32_t idx = atoi(strtok(NULL, " "));
			int n = atoi(strtok(NULL, " "));
			int gap = atoi(strtok(NULL, " "));
			rc = 0;
			for (int i = 0; i < n && rc >= 0; i++) {
				if (i % 8 == 7)
					usleep((useconds_t)gap);
				struct timespec now;
				clock_gettime(CLOCK_MONOTONIC, &now);
				uint64_t ns = (uint64_t)now.tv_sec * 1000000000u +
					      (uint64_t)now.tv_nsec;
				struct iovec iov[2] = {{&idx, sizeof(idx)}, {&ns, sizeof(ns)}};
				rc = (int)writev(fd, iov, 2);
			}
		} else if (!strcmp(op, "words")) {
			for (int w = 0; w < MAX_WORDS; w++)
				printf("%x%c", words[w], w + 1 < MAX_WORDS ? ' ' : '\n');
			continue;
		}
		printf("%s -> %d %s", line, rc, rc < 0 ? strerrorname_np(errno) : "0");
		if (!strcmp(op, "reg") && rc == 0)
			printf(" index=%d", index);
		printf("\n");
	}
	return 0;
}
