// tfctl: one tracefs file operation per call, with the errno spelled out.
//
// The capture script (synth_capture.sh) runs in the kernel oracle's busybox VM,
// where "echo x > file" only says "write error". Each call prints exactly one
// line describing the outcome, so the host side can turn it into golden data:
//
//   tfctl write  FILE TEXT     open(O_WRONLY), one write()    -> "ok N" | "open ENAME" | "write ENAME"
//   tfctl append FILE TEXT     open(O_WRONLY|O_APPEND)
//   tfctl trunc  FILE [TEXT]   open(O_WRONLY|O_TRUNC), then the write if TEXT is given
//   tfctl read   FILE          prints "ok N" then the bytes; or "open ENAME" | "read ENAME"
//   tfctl raw    DIR           per CPU: drains DIR/per_cpu/cpuN/trace_pipe_raw
//                              (O_NONBLOCK) and prints "cpuN page HEX" per sub-buffer
//   tfctl uwrite DIR CMD HEX   registers user event CMD ("name fields") through DIR/
//                              user_events_data and writes HEX as its payload
//
// TEXT may contain \n, \t, \v (backslash escapes) and \0 for a NUL.
//
// Build (static, for the VM):
//   gcc -static -O2 -isystem "$(python -m tests.oracle.kernel build 6.12)/usr/include" \
//       tfctl.c -o tfctl
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/user_events.h>

static const char *ename(int e)
{
	// strerrorname_np() does not know the kernel-internal ENOTSUPP (524).
	if (e == 524)
		return "ENOTSUPP";
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

static size_t unescape(const char *in, char *out)
{
	size_t n = 0;
	for (; *in; in++) {
		if (in[0] == '\\' && in[1] == 'n') {
			out[n++] = '\n';
			in++;
		} else if (in[0] == '\\' && in[1] == '0') {
			out[n++] = '\0';
			in++;
		} else if (in[0] == '\\' && in[1] == 't') {
			out[n++] = '\t';
			in++;
		} else if (in[0] == '\\' && in[1] == 'v') {
			out[n++] = '\v';
			in++;
		} else {
			out[n++] = *in;
		}
	}
	return n;
}

static int do_write(const char *path, int flags, const char *text)
{
	int fd = open(path, flags);
	if (fd < 0) {
		printf("open %s\n", ename(errno));
		return 1;
	}
	if (!text) {
		printf("ok 0\n");
		close(fd);
		return 0;
	}
	char *buf = malloc(strlen(text) + 1);
	size_t len = unescape(text, buf);
	ssize_t r = write(fd, buf, len);
	if (r < 0)
		printf("write %s\n", ename(errno));
	else
		printf("ok %zd\n", r);
	close(fd);
	free(buf);
	return r < 0;
}

static int do_read(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		printf("open %s\n", ename(errno));
		return 1;
	}
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0) {
			printf("read %s\n", ename(errno));
			close(fd);
			return 1;
		}
		if (r == 0)
			break;
		n += r;
	}
	close(fd);
	printf("ok %zu\n", n);
	fwrite(buf, 1, n, stdout);
	return 0;
}

static int do_raw(const char *dir)
{
	static unsigned char page[4096];
	char path[256];
	for (int cpu = 0; cpu < 64; cpu++) {
		snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/trace_pipe_raw", dir, cpu);
		int fd = open(path, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			break;
		for (;;) {
			ssize_t r = read(fd, page, sizeof(page));
			if (r <= 0)
				break;
			printf("cpu%d page ", cpu);
			for (ssize_t i = 0; i < r; i++)
				printf("%02x", page[i]);
			printf("\n");
		}
		close(fd);
	}
	return 0;
}

static int do_uwrite(const char *dir, const char *cmd, const char *hex)
{
	char path[256];
	static uint32_t enabled;
	snprintf(path, sizeof(path), "%s/user_events_data", dir);
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		printf("open %s\n", ename(errno));
		return 1;
	}
	struct user_reg reg = {
		.size = sizeof(reg),
		.enable_bit = 0,
		.enable_size = sizeof(enabled),
		.enable_addr = (uintptr_t)&enabled,
		.name_args = (uintptr_t)cmd,
	};
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		printf("reg %s\n", ename(errno));
		return 1;
	}
	size_t len = strlen(hex) / 2;
	unsigned char *payload = malloc(len + 1);
	for (size_t i = 0; i < len; i++)
		sscanf(hex + 2 * i, "%2hhx", &payload[i]);
	struct iovec io[2] = {
		{ &reg.write_index, sizeof(reg.write_index) },
		{ payload, len },
	};
	ssize_t r = writev(fd, io, 2);
	if (r < 0)
		printf("write %s\n", ename(errno));
	else
		printf("ok %zd\n", r);
	close(fd);
	return r < 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "write"))
		return do_write(argv[2], O_WRONLY, argv[3]);
	if (argc >= 4 && !strcmp(argv[1], "append"))
		return do_write(argv[2], O_WRONLY | O_APPEND, argv[3]);
	if (argc >= 3 && !strcmp(argv[1], "trunc"))
		return do_write(argv[2], O_WRONLY | O_TRUNC, argc >= 4 ? argv[3] : NULL);
	if (argc >= 3 && !strcmp(argv[1], "read"))
		return do_read(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "raw"))
		return do_raw(argv[2]);
	if (argc >= 5 && !strcmp(argv[1], "uwrite"))
		return do_uwrite(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: tfctl write|append|trunc|read|raw|uwrite ...\n");
	return 2;
}
