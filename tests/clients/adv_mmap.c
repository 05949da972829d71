/*
 * Mappings of trace_pipe_raw as adversarial tests need them: a script of
 * steps, run in order, one output line each.
 *
 * usage: adv_mmap TRACEFS_DIR STEP...
 *   open          open per_cpu/cpu0/trace_pipe_raw read-only, O_NONBLOCK (a
 *                 blocking GET_READER waits for buffer_percent of data)
 *   open-blocking the same without O_NONBLOCK
 *   weird         map a file whose name is not UTF-8 (bytes 0xff 0xfe) and
 *                 keep the mapping (the file itself is unlinked at once)
 *   many=N        make N more mappings of anonymous memory (one region,
 *                 every other page PROT_NONE, so no two merge)
 *   map           map the meta page, then the whole buffer (as libtracefs)
 *   touch         read every page of the mapping     -> "touch: ok|SIGBUS"
 *   reader        TRACE_MMAP_IOCTL_GET_READER        -> "reader: 0|ENODEV…"
 *   readers=N     N of them, timed  -> "readers: N errors=E ns_per_call=T"
 *   unmap         munmap the buffer
 *   wait          print "waiting", then wait for a line on stdin
 * Exits 0 unless a step could not be run at all (then with its errno).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)

/* include/uapi/linux/trace_mmap.h: the first three fields are enough here */
struct trace_buffer_meta_head {
	uint32_t meta_page_size;
	uint32_t meta_struct_len;
	uint32_t subbuf_size;
	uint32_t nr_subbufs;
};

static sigjmp_buf fault;
static const char *dir;
static int fd = -1;
static unsigned char *map;
static size_t map_len;

static void on_sigbus(int sig)
{
	siglongjmp(fault, sig);
}

static int fail(const char *what)
{
	int e = errno;
	printf("%s: %s\n", what, strerrorname_np(e));
	fflush(stdout);
	exit(e ? e : 1);
}

static void step_open(int flags)
{
	char path[512];
	snprintf(path, sizeof path, "%s/per_cpu/cpu0/trace_pipe_raw", dir);
	fd = open(path, O_RDONLY | flags);
	if (fd < 0)
		fail("open");
	printf("open: ok\n");
}

static void step_weird(void)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/tfuse-adv-\xff\xfe-%d", getpid());
	int wfd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (wfd < 0 || ftruncate(wfd, 4096) < 0)
		fail("weird");
	void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, wfd, 0);
	unlink(path);
	close(wfd);
	if (p == MAP_FAILED)
		fail("weird");
	printf("weird: ok\n");
}

static void step_many(long n)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *p = mmap(NULL, (size_t)n * page, PROT_READ,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		fail("many");
	for (long i = 1; i < n; i += 2)
		if (mprotect(p + i * page, page, PROT_NONE) < 0)
			fail("many");
	printf("many: %ld\n", n);
}

static void step_map(void)
{
	struct trace_buffer_meta_head *meta =
		mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (meta == MAP_FAILED)
		fail("map");
	if (sigsetjmp(fault, 1) != 0) {
		printf("map: SIGBUS\n");
		return;
	}
	map_len = meta->meta_page_size + (size_t)meta->subbuf_size * meta->nr_subbufs;
	munmap(meta, 4096);
	map = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		fail("map");
	printf("map: ok\n");
}

static void step_touch(void)
{
	volatile unsigned char sum = 0;
	if (sigsetjmp(fault, 1) != 0) {
		printf("touch: SIGBUS\n");
		return;
	}
	for (size_t off = 0; off < map_len; off += 4096)
		sum += map[off];
	printf("touch: ok\n");
}

static const char *reader(void)
{
	return ioctl(fd, TRACE_MMAP_IOCTL_GET_READER) ? strerrorname_np(errno) : "0";
}

static void step_readers(long n)
{
	struct timespec a, b;
	long errors = 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		errors += ioctl(fd, TRACE_MMAP_IOCTL_GET_READER) != 0;
	clock_gettime(CLOCK_MONOTONIC, &b);
	long long ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
	printf("readers: %ld errors=%ld ns_per_call=%lld\n", n, errors, ns / (n ? n : 1));
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s TRACEFS_DIR STEP...\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	signal(SIGBUS, on_sigbus);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 2; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "open"))
			step_open(O_NONBLOCK);
		else if (!strcmp(s, "open-blocking"))
			step_open(0);
		else if (!strcmp(s, "weird"))
			step_weird();
		else if (!strncmp(s, "many=", 5))
			step_many(atol(s + 5));
		else if (!strcmp(s, "map"))
			step_map();
		else if (!strcmp(s, "touch"))
			step_touch();
		else if (!strcmp(s, "reader"))
			printf("reader: %s\n", reader());
		else if (!strncmp(s, "readers=", 8))
			step_readers(atol(s + 8));
		else if (!strcmp(s, "unmap")) {
			munmap(map, map_len);
			printf("unmap: ok\n");
		} else if (!strcmp(s, "wait")) {
			char line[16];
			printf("waiting\n");
			if (!fgets(line, sizeof line, stdin))
				return 0;
		} else {
			fprintf(stderr, "unknown step %s\n", s);
			return 2;
		}
	}
	return 0;
}
