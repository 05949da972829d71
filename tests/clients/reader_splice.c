/*
 * splice() from per_cpu/cpuN/trace_pipe_raw into a pipe, the way libtracefs'
 * tracefs_cpu_buffered_read does (SPLICE_F_MOVE, len = pipe size), then read
 * what reached the pipe and describe each sub-buffer.
 *
 * usage: reader_splice TRACEFS_DIR CPU LEN [nonblock] [repeat N]
 * Prints, per splice call:  "splice <n>: <ret>" or "splice <n>: <ERRNO>"
 * and per sub-buffer that went through the pipe:
 *   "  page ts=<nonzero?> commit=<bytes> flags=<missed,stored> first_id=<id>"
 * where first_id is the raw_data id (first u32 of the first event's payload
 * after the 8 common bytes) so the test can tell which events came through.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case EAGAIN: return "EAGAIN";
	case EINVAL: return "EINVAL";
	case EIO: return "EIO";
	case EINTR: return "EINTR";
	case ENODEV: return "ENODEV";
	default: return strerror(e);
	}
}

static void describe(const unsigned char *page)
{
	uint64_t ts, commit;
	memcpy(&ts, page, 8);
	memcpy(&commit, page + 8, 8);
	uint32_t size = commit & ((1u << 27) - 1);
	uint32_t first_id = 0;
	if (size >= 16) {
		uint32_t hdr;
		memcpy(&hdr, page + 16, 4);
		unsigned type_len = hdr & 31;
		/* data record: payload at +4 (short) or +8 (long); id after common */
		const unsigned char *payload = page + 16 + (type_len == 0 ? 8 : 4);
		if (type_len <= 28)
			memcpy(&first_id, payload + 8, 4);
	}
	printf("  page ts=%s commit=%u flags=%s%s first_id=%#x\n", ts ? "set" : "0",
	       size, commit & (1ull << 31) ? "M" : "-", commit & (1ull << 30) ? "S" : "-",
	       first_id);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s TRACEFS_DIR CPU LEN [nonblock] [repeat N]\n", argv[0]);
		return 2;
	}
	int nonblock = 0, repeat = 1;
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "nonblock"))
			nonblock = 1;
		else if (!strcmp(argv[i], "repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
	}
	char path[512];
	snprintf(path, sizeof path, "%s/per_cpu/cpu%s/trace_pipe_raw", argv[1], argv[2]);
	int fd = open(path, O_RDONLY | (nonblock ? O_NONBLOCK : 0));
	if (fd < 0) {
		perror(path);
		return errno;
	}
	int p[2];
	if (pipe(p)) {
		perror("pipe");
		return errno;
	}
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	size_t len = strtoul(argv[3], NULL, 0);
	static unsigned char buf[1 << 20];
	for (int n = 0; n < repeat; n++) {
		ssize_t r = splice(fd, NULL, p[1], NULL, len,
				   SPLICE_F_MOVE | (nonblock ? SPLICE_F_NONBLOCK : 0));
		if (r < 0) {
			printf("splice %d: %s\n", n, errname(errno));
			continue;
		}
		printf("splice %d: %zd\n", n, r);
		ssize_t got = 0;
		while (got < r) {
			ssize_t k = read(p[0], buf + got, r - got);
			if (k <= 0)
				break;
			got += k;
		}
		for (ssize_t off = 0; off + 4096 <= got; off += 4096)
			describe(buf + off);
		if (got % 4096)
			printf("  tail %zd bytes\n", got % 4096);
		fflush(stdout);
	}
	return 0;
}
