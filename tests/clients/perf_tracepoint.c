/*
 * What perf-collect and LinuxTracepoints' TracepointSession do with an event:
 * read its id from events/SYSTEM/NAME/id and open a perf tracepoint event
 * with that id on the running kernel.
 *
 * usage: perf_tracepoint ID_FILE
 * prints: "id=N perf_event_open=ok" or "id=N perf_event_open=ERRNAME"
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s ID_FILE\n", argv[0]);
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	unsigned long long id;
	if (!f || fscanf(f, "%llu", &id) != 1) {
		perror(argv[1]);
		return 1;
	}
	fclose(f);
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_TRACEPOINT;
	attr.config = id;
	attr.sample_type = PERF_SAMPLE_RAW;
	attr.sample_period = 1;
	attr.disabled = 1;
	/* This process, any CPU: what a per-process collector opens. */
	int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd < 0) {
		const char *name = errno == ENOENT ? "ENOENT" : errno == EINVAL ? "EINVAL"
			: errno == EACCES ? "EACCES" : errno == EPERM ? "EPERM" : strerror(errno);
		printf("id=%llu perf_event_open=%s\n", id, name);
		return 0;
	}
	printf("id=%llu perf_event_open=ok\n", id);
	close(fd);
	return 0;
}
