/*
 * Issue 19, item 3: GET_READER loops from a process with many mappings,
 * none of ours, and what a bystander waits meanwhile.
 *
 * usage: getreader_storm storm TRACEFS_DIR MAPPINGS THREADS SECONDS
 *          MAPPINGS anonymous vmas (one region, every other page
 *          PROT_NONE, so no two merge); trace_pipe_raw opened, never
 *          mapped; THREADS threads call TRACE_MMAP_IOCTL_GET_READER in a
 *          loop for SECONDS    -> "storm: running" once they started,
 *                                 then "storm: calls=N ns_per_call=T"
 *        getreader_storm bystander TRACEFS_DIR SECONDS
 *          open + read + close of tracing_on in a loop for SECONDS
 *                              -> "bystander: reads=N max_ns=M"
 * Every GET_READER must fail with ENODEV (nothing is mapped) and every
 * read must give "0\n" or "1\n": anything else exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)

static int fd;
static long long until_ns;
static atomic_long calls;
static atomic_int wrong;

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *loop(void *arg)
{
	(void)arg;
	while (now_ns() < until_ns) {
		if (ioctl(fd, TRACE_MMAP_IOCTL_GET_READER) == 0 || errno != ENODEV)
			atomic_store(&wrong, 1);
		atomic_fetch_add(&calls, 1);
	}
	return NULL;
}

static int storm(const char *dir, long mappings, int threads, int seconds)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *p = mmap(NULL, (size_t)mappings * page, PROT_READ,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return perror("mmap"), 1;
	for (long i = 1; i < mappings; i += 2)
		if (mprotect(p + i * page, page, PROT_NONE) < 0)
			return perror("mprotect"), 1;
	char path[512];
	snprintf(path, sizeof path, "%s/per_cpu/cpu0/trace_pipe_raw", dir);
	fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return perror(path), 1;
	pthread_t tids[threads];
	long long start = now_ns();
	until_ns = start + seconds * 1000000000LL;
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tids[i], NULL, loop, NULL))
			return fprintf(stderr, "pthread_create\n"), 1;
	printf("storm: running\n");
	fflush(stdout);
	for (int i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);
	long n = atomic_load(&calls);
	printf("storm: calls=%ld ns_per_call=%lld\n", n, (now_ns() - start) * threads / (n ? n : 1));
	return atomic_load(&wrong);
}

static int bystander(const char *dir, int seconds)
{
	char path[512], buf[8];
	snprintf(path, sizeof path, "%s/tracing_on", dir);
	long long end = now_ns() + seconds * 1000000000LL, longest = 0;
	long reads = 0;
	while (now_ns() < end) {
		long long a = now_ns();
		int f = open(path, O_RDONLY);
		if (f < 0)
			return perror(path), 1;
		ssize_t n = read(f, buf, sizeof buf);
		close(f);
		long long waited = now_ns() - a;
		if (n != 2 || (buf[0] != '0' && buf[0] != '1') || buf[1] != '\n')
			return fprintf(stderr, "tracing_on read %zd bytes\n", n), 1;
		if (waited > longest)
			longest = waited;
		reads++;
	}
	printf("bystander: reads=%ld max_ns=%lld\n", reads, longest);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "storm"))
		return storm(argv[2], atol(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (argc == 4 && !strcmp(argv[1], "bystander"))
		return bystander(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: %s storm DIR MAPPINGS THREADS SECONDS | bystander DIR SECONDS\n",
		argv[0]);
	return 2;
}
