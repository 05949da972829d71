/*
 * Hostile and careless perf clients under `tracefs-fuse run` (issue 20 item 6):
 * none may wedge or bloat the daemon, and after each a bystander (a fresh
 * process that registers an event and writes it) is still served.
 *
 *   mapdie:    50 children each open a perf event of themselves, map a
 *              writable 1+4-page ring, write 3 samples and are killed
 *              (SIGKILL, nothing closed or unmapped): every event goes with
 *              its process (our enable bit clears), the daemon keeps no
 *              descriptor for any of them.
 * The bystander opens a perf event of itself on its own event, writes once
 * and reads the count (1) back.
 *   noread:    a 1+1-page writable ring nobody reads (its first page looked
 *              at once), 2,000 writes: every write is served, the ring keeps
 *              what fits before the unread tail, read() counts every write
 *              and exactly the lost ones.
 *   setoutput: 2,000 rounds of SET_OUTPUT A->B, A->-1, B->A, B->-1 (each 0),
 *              and into a descriptor that is no perf event (EBADF).
 *   many:      with RLIMIT_NOFILE at 256, perf fds are opened until the
 *              kernel refuses one (EMFILE, as for any fd: the fd is ours to
 *              install and the limit the client's); the daemon holds no
 *              descriptor per event; then 2,000 opened and closed in a row.
 * The daemon is the client's parent (run serves in the process that forked
 * CMD): its descriptors are counted in /proc/PPID/fd.
 *
 * usage: adv_perf TRACEFS
 * prints one "ok NAME" line per check, then "checks N"; exits 1 at the first
 * wrong result.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_checks.h"
#include "user_events_uapi.h"

#define PAGE 4096
#define MANY_LIMIT 256
/* What the daemon may keep meanwhile for its own purposes: /proc/<tid>/stat
 * of its last 64 writers (process/_tasks.py), a few pidfds of processes it
 * follows. Per event or per process seen, nothing. */
#define DAEMON_SLACK (64 + 8)

static const char *tracefs;
static volatile uint32_t enabled;
static int data_fd;
static uint32_t write_index;
static long event_id;

static int register_event(const char *name_args, volatile uint32_t *word, uint32_t *index)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	int fd = open(path, O_RDWR);
	struct user_reg reg;
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.name_args = (uint64_t)(uintptr_t)name_args;
	reg.enable_addr = (uint64_t)(uintptr_t)word;
	reg.enable_size = sizeof(*word);
	if (fd < 0 || ioctl(fd, DIAG_IOCSREG, &reg) != 0)
		return -1;
	*index = reg.write_index;
	return fd;
}

static int emit(int fd, uint32_t index, uint32_t n)
{
	struct { uint32_t index, n; } payload = {index, n};
	return write(fd, &payload, sizeof(payload)) == (ssize_t)sizeof(payload);
}

static int perf_open(long id)
{
	struct perf_event_attr pe;
	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_TRACEPOINT;
	pe.size = sizeof(pe);
	pe.config = (uint64_t)id;
	pe.sample_period = 1;
	pe.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_RAW;
	pe.read_format = PERF_FORMAT_LOST;
	return (int)syscall(__NR_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int daemon_fds(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)getppid());
	DIR *dir = opendir(path);
	int n = 0;
	while (dir && readdir(dir))
		n++;
	if (dir)
		closedir(dir);
	return dir ? n - 2 : -1;
}

/* A fresh process registers its own event, opens a perf event of itself on
 * it, writes once and reads the count back. */
static int bystander(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		static volatile uint32_t word;
		uint32_t index;
		char path[512];
		int fd = register_event("adv_perf_bystander u32 n", &word, &index);
		snprintf(path, sizeof(path), "%s/events/user_events/adv_perf_bystander/id", tracefs);
		long id = read_number(path);
		int perf = fd < 0 || id < 0 ? -1 : perf_open(id);
		uint64_t counts[2] = {0, 0};
		_exit(perf >= 0 && emit(fd, index, 1) &&
		      read(perf, counts, sizeof(counts)) == sizeof(counts) && counts[0] == 1 ? 0 : 3);
	}
	int status;
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

/* Our enable bit clear again (bounded wait: 10 s). */
static int bit_cleared(void)
{
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 10000 && enabled; i++)
		nanosleep(&ms, NULL);
	return !enabled;
}

static void mapdie(int baseline)
{
	for (int i = 0; i < 50; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			int fd = perf_open(event_id);
			void *ring = fd < 0 ? MAP_FAILED :
				mmap(NULL, 5 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (ring == MAP_FAILED || !emit(data_fd, write_index, 1) ||
			    !emit(data_fd, write_index, 2) || !emit(data_fd, write_index, 3))
				_exit(3);
			raise(SIGKILL);
		}
		int status;
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status)) {
			CHECK("mapdie: a child mapped, wrote and was killed", 0);
		}
	}
	CHECK("mapdie: 50 children mapped, wrote and were killed", 1);
	CHECK("mapdie: every event went with its process (enable bit clear)", bit_cleared());
	CHECK("mapdie: the daemon keeps no descriptor for them", daemon_fds() <= baseline + DAEMON_SLACK);
	CHECK("mapdie: a bystander is served", bystander());
}

static void noread(void)
{
	int fd = perf_open(event_id);
	void *ring = fd < 0 ? MAP_FAILED :
		mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("noread: open and map 1+1 pages", ring != MAP_FAILED);
	/* Its first page looked at once, as any reader does (else, docs/perf.md:
	 * the ring overwrites). */
	struct perf_event_mmap_page *page = ring;
	CHECK("noread: the ring is empty", page->data_head == 0);
	int served = 0;
	for (int i = 0; i < 2000; i++)
		served += emit(data_fd, write_index, (uint32_t)i);
	CHECK("noread: all 2000 writes served", served == 2000);
	uint64_t counts[2] = {0, 0};
	/* A sample is 40 bytes (header, pid/tid, raw: u32 size + 12 bytes of
	 * entry padded to 20); CIRC_SPACE leaves 4095 bytes: 102 fit. */
	CHECK("noread: read() counts 2000, 1898 of them lost",
	      read(fd, counts, sizeof(counts)) == sizeof(counts) && counts[0] == 2000 &&
	      counts[1] == 2000 - (PAGE - 1) / 40);
	CHECK("noread: the ring stopped short of its unread tail", page->data_head < PAGE);
	munmap(ring, 2 * PAGE);
	close(fd);
	CHECK("noread: a bystander is served", bystander());
}

static void setoutput(void)
{
	int a = perf_open(event_id), b = perf_open(event_id);
	CHECK("setoutput: two events", a >= 0 && b >= 0);
	int zero = 0;
	for (int i = 0; i < 2000; i++)
		zero += ioctl(a, PERF_EVENT_IOC_SET_OUTPUT, b) == 0 &&
			ioctl(a, PERF_EVENT_IOC_SET_OUTPUT, -1) == 0 &&
			ioctl(b, PERF_EVENT_IOC_SET_OUTPUT, a) == 0 &&
			ioctl(b, PERF_EVENT_IOC_SET_OUTPUT, -1) == 0;
	CHECK("setoutput: 2000 rounds, every answer 0", zero == 2000);
	errno = 0;
	CHECK("setoutput: into a descriptor that is no perf event: EBADF",
	      ioctl(a, PERF_EVENT_IOC_SET_OUTPUT, data_fd) == -1 && errno == EBADF);
	CHECK("setoutput: writes still recorded", emit(data_fd, write_index, 7));
	close(a);
	close(b);
	CHECK("setoutput: a bystander is served", bystander());
}

static void many(int baseline)
{
	struct rlimit old;
	CHECK("many: RLIMIT_NOFILE 256", getrlimit(RLIMIT_NOFILE, &old) == 0 &&
	      setrlimit(RLIMIT_NOFILE, &(struct rlimit){MANY_LIMIT, old.rlim_max}) == 0);
	static int fds[MANY_LIMIT];
	int n = 0, fd;
	errno = 0;
	while (n < MANY_LIMIT && (fd = perf_open(event_id)) >= 0)
		fds[n++] = fd;
	CHECK("many: opened until the kernel refused one with EMFILE",
	      n > MANY_LIMIT - 16 && n < MANY_LIMIT && errno == EMFILE);
	CHECK("many: the daemon holds no descriptor per event",
	      daemon_fds() <= baseline + DAEMON_SLACK);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	CHECK("many: the limit back", setrlimit(RLIMIT_NOFILE, &old) == 0);
	int ok = 0;
	for (int i = 0; i < 2000; i++) {
		fd = perf_open(event_id);
		ok += fd >= 0 && close(fd) == 0;
	}
	CHECK("many: 2000 opened and closed in a row", ok == 2000);
	CHECK("many: the daemon's descriptors are back", daemon_fds() <= baseline + DAEMON_SLACK);
	CHECK("many: every event closed (enable bit clear)", bit_cleared());
	CHECK("many: a bystander is served", bystander());
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACEFS\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	tracefs = argv[1];
	data_fd = register_event("adv_perf u32 n", &enabled, &write_index);
	CHECK("register", data_fd >= 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/events/user_events/adv_perf/id", tracefs);
	event_id = read_number(path);
	CHECK("event id", event_id > 0);
	int baseline = daemon_fds();
	CHECK("the daemon's descriptors counted", baseline > 0);
	mapdie(baseline);
	noread();
	setoutput();
	many(baseline);
	printf("checks %d\n", checks);
	return 0;
}
