/*
 * The ring-buffer mmap ABI (6.10+) on per_cpu/cpuN/trace_pipe_raw, the way
 * the kernel's map_test and libtracefs use it: map the meta page, map the
 * sub-buffers, write markers from CPU N, GET_READER, decode the reader page.
 *
 * usage: rb_mmap TRACEFS_DIR CPU NMARKERS
 * Prints "key=value" lines; exits non-zero with a message on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* include/uapi/linux/trace_mmap.h */
struct trace_buffer_meta {
	uint32_t meta_page_size;
	uint32_t meta_struct_len;
	uint32_t subbuf_size;
	uint32_t nr_subbufs;
	struct {
		uint64_t lost_events;
		uint32_t id;
		uint32_t read;
	} reader;
	uint64_t flags;
	uint64_t entries;
	uint64_t overrun;
	uint64_t read;
	uint64_t Reserved1;
	uint64_t Reserved2;
};
#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Count data events of one sub-buffer (type_len 1..28 and 0). */
static int count_events(const unsigned char *page, uint32_t skip)
{
	uint64_t commit;
	memcpy(&commit, page + 8, 8);
	uint32_t size = commit & ((1u << 27) - 1), off = 16 + skip;
	int n = 0;
	while (off < 16 + size) {
		uint32_t hdr, len;
		memcpy(&hdr, page + off, 4);
		uint32_t type_len = hdr & 31;
		if (type_len == 29) {           /* padding */
			if (!(hdr >> 5))
				break;
			memcpy(&len, page + off + 4, 4);
			off += 4 + len;
		} else if (type_len >= 30) {    /* time extend / stamp */
			off += 8;
		} else if (type_len == 0) {
			memcpy(&len, page + off + 4, 4);
			off += 4 + len;
			n++;
		} else {
			off += 4 + 4 * type_len;
			n++;
		}
	}
	return n;
}

int main(int argc, char **argv)
{
	char path[512];
	if (argc < 4) {
		fprintf(stderr, "usage: %s TRACEFS_DIR CPU NMARKERS\n", argv[0]);
		return 2;
	}
	int cpu = atoi(argv[2]), markers = atoi(argv[3]);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set))
		die("sched_setaffinity");

	snprintf(path, sizeof path, "%s/per_cpu/cpu%d/trace_pipe_raw", argv[1], cpu);
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		die(path);
	printf("get_reader_unmapped=%s\n",
	       ioctl(fd, TRACE_MMAP_IOCTL_GET_READER) ? strerror(errno) : "0");

	struct trace_buffer_meta *meta = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (meta == MAP_FAILED)
		die("mmap meta");
	printf("meta_page_size=%u meta_struct_len=%u subbuf_size=%u nr_subbufs=%u\n",
	       meta->meta_page_size, meta->meta_struct_len, meta->subbuf_size, meta->nr_subbufs);
	size_t data_len = (size_t)meta->subbuf_size * meta->nr_subbufs;
	unsigned char *data = mmap(NULL, data_len, PROT_READ, MAP_SHARED, fd,
				   meta->meta_page_size);
	if (data == MAP_FAILED)
		die("mmap data");

	snprintf(path, sizeof path, "%s/buffer_size_kb", argv[1]);
	int size_fd = open(path, O_WRONLY);
	printf("resize_while_mapped=%s\n",
	       write(size_fd, "64", 2) < 0 ? strerror(errno) : "ok");

	snprintf(path, sizeof path, "%s/trace_marker", argv[1]);
	int mfd = open(path, O_WRONLY);
	if (mfd < 0)
		die("trace_marker");
	for (int i = 0; i < markers; i++)
		if (write(mfd, "mmap marker", 11) != 11)
			die("write marker");

	if (ioctl(fd, TRACE_MMAP_IOCTL_GET_READER))
		die("GET_READER");
	printf("reader_id=%u reader_read=%u entries=%llu overrun=%llu read=%llu\n",
	       meta->reader.id, meta->reader.read, (unsigned long long)meta->entries,
	       (unsigned long long)meta->overrun, (unsigned long long)meta->read);
	printf("events_on_reader_page=%d\n",
	       count_events(data + (size_t)meta->reader.id * meta->subbuf_size, 0));

	/* read() while mapped takes the copy path and leaves the meta page alone */
	if (write(mfd, "after", 5) != 5)
		die("write marker");
	unsigned char page[4096];
	ssize_t n = read(fd, page, sizeof page);
	printf("read_while_mapped=%zd events=%d meta_entries=%llu\n", n,
	       n > 0 ? count_events(page, 0) : -1, (unsigned long long)meta->entries);

	munmap(data, data_len);
	munmap(meta, 4096);
	close(fd);
	printf("resize_after_unmap=%s\n",
	       write(size_fd, "64", 2) < 0 ? strerror(errno) : "ok");
	return 0;
}
