/*
 * enable_on_exec, as perf record -- CMD uses it: the parent forks a child
 * that waits, opens the event as a disabled tracepoint of that child with
 * enable_on_exec (RAW, period 1), maps 1+1 pages and lets the child go. The
 * child writes once before its exec (not recorded: the event is still
 * disabled) and once after, from the new image (recorded: the exec enabled
 * it). The ring holds exactly that second sample and read() counts one.
 *
 * usage: perf_enable_on_exec TRACEFS       (perf_enable_on_exec TRACEFS exec: the child's new image)
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
#include <sys/wait.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define EVENT "__exec_event"

static int enabled;

/* open user_events_data and register the event; the data fd, -1 on failure */
static int register_event(const char *tracefs, struct user_reg *reg)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	int fd = open(path, O_RDWR);
	memset(reg, 0, sizeof(*reg));
	reg->size = sizeof(*reg);
	reg->name_args = (uint64_t)(uintptr_t)(EVENT " u32 a");
	reg->enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg->enable_size = sizeof(enabled);
	if (fd < 0 || ioctl(fd, DIAG_IOCSREG, reg))
		return -1;
	return fd;
}

static int emit(int fd, const struct user_reg *reg, uint32_t a)
{
	struct { uint32_t index, a; } payload = {reg->write_index, a};
	return write(fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
}

int main(int argc, char **argv)
{
	struct user_reg reg;
	if (argc == 3 && !strcmp(argv[2], "exec")) {
		int fd = register_event(argv[1], &reg);
		return fd >= 0 && emit(fd, &reg, 2) ? 0 : 3;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	int data_fd = register_event(argv[1], &reg);
	CHECK("register", data_fd >= 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", argv[1], EVENT);
	FILE *f = fopen(path, "r");
	long event_id = -1;
	if (!f || fscanf(f, "%ld", &event_id) != 1)
		event_id = -1;
	if (f)
		fclose(f);
	CHECK("event id", event_id > 0);

	int go[2];
	CHECK("pipe", pipe(go) == 0);
	pid_t child = fork();
	if (child == 0) {
		char byte;
		close(go[1]);
		if (read(go[0], &byte, 1) != 1)
			_exit(4);
		if (!emit(data_fd, &reg, 1)) /* before the exec: not recorded */
			_exit(5);
		execl("/proc/self/exe", argv[0], argv[1], "exec", (char *)NULL);
		_exit(6);
	}
	CHECK("fork", child > 0);
	close(go[0]);

	struct perf_event_attr pe;
	raw_attr(&pe, event_id);
	pe.disabled = 1;
	pe.enable_on_exec = 1;
	int fd = (int)syscall(SYS_perf_event_open, &pe, child, -1, -1, 0);
	CHECK("perf_event_open of the child, enable_on_exec", fd >= 0);
	long page = sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *up = mmap(NULL, page * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("mmap", up != MAP_FAILED);
	CHECK("disabled until the exec", up->data_head == 0);

	int status;
	CHECK("the child goes", write(go[1], "g", 1) == 1);
	CHECK("the child wrote before and after its exec",
	      waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	unsigned char *data = (unsigned char *)up + up->data_offset;
	struct perf_event_header *h = (void *)data;
	uint32_t a = 0;
	if (head >= 24)
		memcpy(&a, data + 12 + 8, sizeof(a)); /* header, raw size, trace_entry */
	CHECK("one sample, from after the exec", head > 0 && head == h->size &&
						       h->type == PERF_RECORD_SAMPLE && a == 2);
	uint64_t count = 0;
	CHECK("read() counts one", read(fd, &count, sizeof(count)) == sizeof(count) && count == 1);
	munmap(up, page * 2);
	close(fd);
	printf("checks %d\n", checks);
	return 0;
}
