/*
 * The perf benchmarks' client (bench/_perf.py): run under `tracefs-fuse run`
 * for our events, and outside it for the filter's cost. Prints "key=value"
 * lines; errors go to stderr with a non-zero exit.
 *
 *   writes TRACEFS SECONDS ORDER
 *       Register "bench_perf u64 seq; u64 value", then for each consumer in
 *       ORDER (a comma list of ftrace, perf, both), back to back: attach it,
 *       write for SECONDS, detach it. ftrace: "1" into the event's enable
 *       file (the trace buffer overwrites, nobody reads it); perf: the
 *       tracepoint of this thread (pid 0, any CPU), sample_type
 *       IDENTIFIER|TID|TIME|CPU|RAW, period 1, its ring 1+64 pages mapped
 *       read-only (it overwrites, nobody reads it: the ftrace consumer's
 *       terms). Prints rate_CONSUMER= (writes/s) for each.
 *   opens TRACEFS COUNT
 *       COUNT times perf_event_open + close of the tracepoint of a
 *       registered event (ours under run), then of a kernel software counter
 *       (PERF_COUNT_SW_TASK_CLOCK, never ours). Prints ours_ns= and
 *       kernel_ns= (medians). TRACEFS "-": only the kernel's.
 *   ioctls COUNT
 *       A kernel software counter of this thread (task clock); COUNT times
 *       each: PERF_EVENT_IOC_ENABLE + DISABLE, PERF_EVENT_IOC_ID, and, as the
 *       control the filter does not stop, an ioctl of another type (FIONREAD
 *       on a pipe) and a read() of the counter. Prints the medians: enable_ns=,
 *       id_ns=, other_ns=, read_ns=.
 */
#define _GNU_SOURCE
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define DIAG_IOC_MAGIC '*'
struct user_reg {
	uint32_t size;
	uint8_t enable_bit;
	uint8_t enable_size;
	uint16_t flags;
	uint64_t enable_addr;
	uint64_t name_args;
	uint32_t write_index;
} __attribute__((__packed__));
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)

#define DATA_PAGES 64

static void die(const char *what)
{
	fprintf(stderr, "perf_client: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *ns, long n)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	return ns[n / 2];
}

static volatile uint32_t enabled;

/* Register NAME_ARGS; its id from events/user_events/NAME/id. */
static long register_event(const char *tracefs, int data_fd, const char *name_args,
			   const char *name, uint32_t *write_index)
{
	struct user_reg reg = {.size = sizeof(reg), .enable_size = 4,
			       .enable_addr = (uint64_t)(uintptr_t)&enabled,
			       .name_args = (uint64_t)(uintptr_t)name_args};
	if (ioctl(data_fd, DIAG_IOCSREG, &reg))
		die("DIAG_IOCSREG");
	*write_index = reg.write_index;
	char path[512];
	snprintf(path, sizeof(path), "%s/events/user_events/%s/id", tracefs, name);
	FILE *f = fopen(path, "r");
	long id = -1;
	if (!f || fscanf(f, "%ld", &id) != 1)
		die(path);
	fclose(f);
	return id;
}

static int open_event(uint32_t type, uint64_t config, uint64_t sample_type)
{
	struct perf_event_attr pe;
	memset(&pe, 0, sizeof(pe));
	pe.type = type;
	pe.size = sizeof(pe);
	pe.config = config;
	pe.sample_period = sample_type ? 1 : 0;
	pe.sample_type = sample_type;
	return (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void write_enable(const char *tracefs, const char *value)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/events/user_events/bench_perf/enable", tracefs);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, value, 1) != 1)
		die(path);
	close(fd);
}

static int cmd_writes(const char *tracefs, double seconds, char *order)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
	int data_fd = open(path, O_RDWR);
	if (data_fd < 0)
		die(path);
	uint32_t index;
	long id = register_event(tracefs, data_fd, "bench_perf u64 seq; u64 value", "bench_perf",
				 &index);
	long page = sysconf(_SC_PAGESIZE);
	for (char *consumer = strtok(order, ","); consumer; consumer = strtok(NULL, ",")) {
		int ftrace = !strcmp(consumer, "ftrace") || !strcmp(consumer, "both");
		int perf = !strcmp(consumer, "perf") || !strcmp(consumer, "both");
		int fd = -1;
		void *ring = MAP_FAILED;
		if (ftrace)
			write_enable(tracefs, "1");
		if (perf) {
			fd = open_event(PERF_TYPE_TRACEPOINT, (uint64_t)id,
					PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
						PERF_SAMPLE_CPU | PERF_SAMPLE_RAW);
			ring = fd < 0 ? MAP_FAILED
				      : mmap(NULL, (size_t)page * (DATA_PAGES + 1), PROT_READ, MAP_SHARED, fd, 0);
			if (ring == MAP_FAILED)
				die("perf_event_open + mmap");
		}
		if (!(enabled & 1))
			die("event not enabled");
		uint64_t seq = 0, value = 0;
		struct iovec io[3] = {{&index, sizeof(index)}, {&seq, sizeof(seq)}, {&value, sizeof(value)}};
		uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9), stop;
		do {
			for (int k = 0; k < 64; k++, seq++)
				if (writev(data_fd, io, 3) != (ssize_t)(sizeof(index) + 16))
					die("writev");
			stop = now_ns();
		} while (stop < end);
		printf("rate_%s=%.1f\n", consumer, (double)seq / ((double)(stop - start) / 1e9));
		if (perf) {
			munmap(ring, (size_t)page * (DATA_PAGES + 1));
			close(fd);
		}
		if (ftrace)
			write_enable(tracefs, "0");
	}
	return 0;
}

static uint64_t time_opens(uint32_t type, uint64_t config, uint64_t sample_type, long count)
{
	uint64_t *ns = calloc((size_t)count, sizeof(*ns));
	for (long i = 0; i < count; i++) {
		uint64_t t0 = now_ns();
		int fd = open_event(type, config, sample_type);
		ns[i] = now_ns() - t0;
		if (fd < 0)
			die("perf_event_open");
		close(fd);
	}
	uint64_t m = median(ns, count);
	free(ns);
	return m;
}

static int cmd_opens(const char *tracefs, long count)
{
	if (strcmp(tracefs, "-")) {
		char path[512];
		snprintf(path, sizeof(path), "%s/user_events_data", tracefs);
		int data_fd = open(path, O_RDWR);
		if (data_fd < 0)
			die(path);
		uint32_t index;
		long id = register_event(tracefs, data_fd, "bench_open u32 value", "bench_open", &index);
		printf("ours_ns=%llu\n", (unsigned long long)time_opens(
			PERF_TYPE_TRACEPOINT, (uint64_t)id, PERF_SAMPLE_TID | PERF_SAMPLE_RAW, count));
	}
	printf("kernel_ns=%llu\n", (unsigned long long)time_opens(
		PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0, count));
	return 0;
}

static int cmd_ioctls(long count)
{
	int fd = open_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0);
	int pipefd[2];
	if (fd < 0 || pipe(pipefd))
		die("task clock or pipe");
	uint64_t *ns = calloc((size_t)count, sizeof(*ns));
	const char *names[] = {"enable_ns", "id_ns", "other_ns", "read_ns"};
	for (int what = 0; what < 4; what++) {
		for (long i = 0; i < count; i++) {
			uint64_t id, value;
			int avail, ok;
			uint64_t t0 = now_ns();
			switch (what) {
			case 0:
				ok = !ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) && !ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
				break;
			case 1:
				ok = !ioctl(fd, PERF_EVENT_IOC_ID, &id);
				break;
			case 2:
				ok = !ioctl(pipefd[0], FIONREAD, &avail);
				break;
			default:
				ok = read(fd, &value, sizeof(value)) == sizeof(value);
			}
			ns[i] = now_ns() - t0;
			if (!ok)
				die(names[what]);
		}
		printf("%s=%llu\n", names[what], (unsigned long long)median(ns, count));
	}
	free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "writes") && argc == 5)
		return cmd_writes(argv[2], atof(argv[3]), argv[4]);
	if (!strcmp(mode, "opens") && argc == 4)
		return cmd_opens(argv[2], atol(argv[3]));
	if (!strcmp(mode, "ioctls") && argc == 3)
		return cmd_ioctls(atol(argv[2]));
	fprintf(stderr, "usage: perf_client writes TRACEFS SECONDS ORDER | opens TRACEFS|- COUNT | "
			"ioctls COUNT\n");
	return 2;
}
