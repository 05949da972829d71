// trace_output: what the kernel's text trace files show, as a replayable log.
//
// Registers user events of every field type print_event_fields() knows, writes
// values of every size and shape (negative, non-printable, over-long, empty),
// writes trace_marker and trace_marker_raw, overruns a small buffer, switches
// to the counter clock, deletes an event under its records, and reads trace,
// per_cpu/cpuN/trace, trace_pipe and per_cpu/cpuN/trace_pipe with large and
// small read sizes. tests/engine/test_output.py replays the same steps through
// the engine and compares every read byte for byte.
//
// The user_events cases run on the oracle kernel (the machine's kernel has no
// user_events); the marker, buffer and option cases run in a private instance
// of the machine's own tracefs, the reference for those (mkdir it first):
//
//   K=$(python -m tests.oracle.kernel build 6.12)
//   gcc -static -O2 -Wall -Wextra -isystem $K/usr/include
//       tests/oracle/clients/trace_output.c -o /tmp/trace_output
//   python -m tests.oracle.kernel run 6.12 /tmp/trace_output --
//       './trace_output /sys/kernel/tracing/ fields long unknown_type' > /tmp/oracle.log
//   /tmp/trace_output /sys/kernel/tracing/instances/NAME/ markers early_stop
//       lost counter_clock truncate options > /tmp/host.log
//   .venv/bin/python tests/oracle/clients/trace_output_golden.py /tmp/oracle.log
//       tests/data/trace-output-6.12.117.json   (and the host log likewise)
//
// Output: one step per line, bytes in hex (the VM console is a tty):
//   CASE <name>
//   REGISTER <write_index> <event id> <hex command>       (ioctl DIAG_IOCSREG)
//   EVENT <cpu> <write_index> <ret> <hex payload>         (writev of index+payload)
//   WRITE <path> <cpu> <trunc> <ret> <hex data>           (open, write, close)
//   READ <path> <size> <hex>|EAGAIN|ERR<errno>            (one read(2))
//   CLOSE <path>
//   PID <pid> / KERNEL <release>
// A negative <ret> is -errno. Every path is relative to TRACEFS.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/user_events.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

static const char *root = "/sys/kernel/tracing/";

static int data_fd;
static int enable_word[64];
static int nregs;

static int open_data(void)
{
	char path[256];
	snprintf(path, sizeof path, "%suser_events_data", root);
	return open(path, O_RDWR);
}

static void hex(const void *p, size_t n)
{
	const unsigned char *b = p;
	if (!n)
		putchar('-');
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static int reg(const char *command)
{
	struct user_reg r = {0};
	char path[256], idbuf[32] = "0";
	r.size = sizeof r;
	r.enable_bit = 0;
	r.enable_size = 4;
	r.enable_addr = (uint64_t)(uintptr_t)&enable_word[nregs++];
	r.name_args = (uint64_t)(uintptr_t)command;
	if (ioctl(data_fd, DIAG_IOCSREG, &r) < 0) {
		printf("REGISTER -%d 0 ", errno);
		hex(command, strlen(command));
		putchar('\n');
		return -1;
	}
	size_t len = strcspn(command, " ");
	snprintf(path, sizeof path, "%sevents/user_events/%.*s/id", root, (int)len, command);
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, idbuf, sizeof idbuf - 1);
		idbuf[n > 0 ? n : 0] = 0;
		close(fd);
	}
	printf("REGISTER %u %d ", r.write_index, atoi(idbuf));
	hex(command, strlen(command));
	putchar('\n');
	return r.write_index;
}

static void event(int cpu, int index, const void *payload, size_t n)
{
	struct iovec io[2] = {{&index, 4}, {(void *)payload, n}};
	pin(cpu);
	ssize_t ret = writev(data_fd, io, 2);
	printf("EVENT %d %d %zd ", cpu, index, ret < 0 ? -(ssize_t)errno : ret);
	hex(payload, n);
	putchar('\n');
}

static void put(const char *path, int cpu, int trunc, const void *data, size_t n)
{
	char full[256];
	snprintf(full, sizeof full, "%s%s", root, path);
	pin(cpu);
	ssize_t ret;
	int fd = open(full, O_WRONLY | (trunc ? O_TRUNC : 0));
	if (fd < 0) {
		ret = -errno;
	} else {
		ret = write(fd, data, n);
		if (ret < 0)
			ret = -errno;
		close(fd);
	}
	printf("WRITE %s %d %d %zd ", path, cpu, trunc, ret);
	hex(data, n);
	putchar('\n');
}

static void puts_file(const char *path, const char *text)
{
	put(path, 0, 0, text, strlen(text));
}

// Reads with read(2) calls of `size` until EOF, EAGAIN or `max` calls.
static void cat(const char *path, size_t size, int nonblock, int max)
{
	static char buf[1 << 17];
	char full[256];
	snprintf(full, sizeof full, "%s%s", root, path);
	int fd = open(full, O_RDONLY | (nonblock ? O_NONBLOCK : 0));
	if (fd < 0) {
		printf("READ %s %zu ERR%d\n", path, size, errno);
		return;
	}
	for (int i = 0; i < max; i++) {
		ssize_t n = read(fd, buf, size);
		printf("READ %s %zu ", path, size);
		if (n < 0) {
			printf(errno == EAGAIN ? "EAGAIN\n" : "ERR%d\n", errno);
			break;
		}
		hex(buf, n);
		putchar('\n');
		if (n == 0)
			break;
	}
	close(fd);
	printf("CLOSE %s\n", path);
}

static void clear(void)
{
	put("trace", 0, 1, "", 0);
}

static void u8s(int cpu, int idx, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	uint8_t p[4] = {a, b, c, d};
	event(cpu, idx, p, sizeof p);
}

static void u16s(int idx, uint16_t a, uint16_t b, uint16_t c, uint16_t d)
{
	uint16_t p[4] = {a, b, c, d};
	event(0, idx, p, sizeof p);
}

static void u32s(int idx, uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
	uint32_t p[4] = {a, b, c, d};
	event(0, idx, p, sizeof p);
}

static void u64s(int idx, uint64_t a, uint64_t b)
{
	uint64_t p[2] = {a, b};
	event(0, idx, p, sizeof p);
}

// One __data_loc/__rel_loc word followed by its data.
static void loc_event(int idx, uint32_t loc, const void *data, size_t n)
{
	char p[4096];
	memcpy(p, &loc, 4);
	memcpy(p + 4, data, n);
	event(0, idx, p, 4 + n);
}

static void case_fields(void)
{
	printf("CASE fields\n");
	clear();
	int t8 = reg("t_8 u8 a; s8 b; char c; unsigned char d");
	int t16 = reg("t_16 u16 a; s16 b; short c; unsigned short d");
	int t32 = reg("t_32 u32 a; s32 b; int c; unsigned int d");
	int t64 = reg("t_64 u64 a; s64 b");
	int tstr = reg("t_str char[8] s; unsigned char[4] u");
	int test = reg("test u32 count; char[20] msg");
	int tdl = reg("test_dl __data_loc char[] s; u32 n");
	int tstruct = reg("test_struct struct foo bar 16");
	int tempty = reg("test_empty");
	int trl = reg("test_rl __rel_loc char[] s");
	int tbin = reg("t_dlbin __data_loc char[] s");
	int tarr = reg("t_arr __data_loc u8[] a; __rel_loc u32[] b");
	int tuc = reg("t_dluc __data_loc unsigned char[] s");
	int tmask = reg("t_mask __data_loc cpumask_t[] m");
	int tstructs = reg("t_structs struct a s1 1; struct b s2 2; struct c s3 3; "
			   "struct d s4 4; struct e s8 8; struct f s5 5");
	int tweird = reg("t_weird struct char[2] x 2; struct __data_loc y 4");

	// Disabled: EBADF, nothing recorded.
	struct { uint32_t count; char msg[20]; } tv = {42, "hello"};
	event(0, test, &tv, sizeof tv);
	puts_file("events/user_events/enable", "1");

	u8s(0, t8, 0x41, 0xff, ' ', 0x7e);
	u8s(0, t8, 0x00, 0x7f, 0x80, 0xa0);
	u8s(0, t8, 0xe9, 0x9f, '\n', 0xff);
	u16s(t16, 0, 0xffff, 0x8000, 0x7fff);
	u16s(t16, 1, (uint16_t)-2, 300, 65535);
	u32s(t32, 0, 0xffffffff, 0x80000000, 0x7fffffff);
	u32s(t32, 42, (uint32_t)-42, 1, 3000000000u);
	u64s(t64, 0, (uint64_t)-1);
	u64s(t64, 0x8000000000000000ull, 0x7fffffffffffffffull);
	u64s(t64, 42, (uint64_t)-42);
	u64s(t64, 0xffffffff81000000ull, 0xffff888000000000ull);
	event(0, tstr, "abc\0\0\0\0\0xy\0\0", 12);
	event(0, tstr, "12345678wxyz", 12);
	event(0, tstr, "a\x01\xe9\x80\0zz\0\0abc", 12);

	// The oracle-captures.md section 6 writes.
	event(0, test, &tv, sizeof tv);
	event(0, test, &tv, 0);
	event(0, test, &tv, 4);
	char big[128] = {0};
	tv.count = 42;
	memcpy(big, &tv.count, 4);
	memcpy(big + 4, "extra", 6);
	event(0, test, big, sizeof big);
	tv.count = 7;
	memset(tv.msg, 0, sizeof tv.msg);
	strcpy(tv.msg, "plain write");
	event(0, test, &tv, sizeof tv);
	struct __attribute__((packed)) { uint32_t loc; uint32_t n; char s[6]; } dl = {(6 << 16) | 16, 5, "world"};
	event(0, tdl, &dl, sizeof dl);
	dl.loc = (6 << 16) | 8;
	dl.n = 6;
	event(0, tdl, &dl, sizeof dl);
	dl.loc = (6 << 16) | 40;
	event(0, tdl, &dl, sizeof dl);
	dl.loc = (7 << 16) | 16;
	event(0, tdl, &dl, sizeof dl);
	memcpy(dl.s, "worlds", 6);
	dl.loc = (6 << 16) | 16;
	event(0, tdl, &dl, sizeof dl);
	dl.loc = (0 << 16) | 16;
	dl.n = 7;
	event(0, tdl, &dl, sizeof dl);
	char bar[16];
	memset(bar, 0x5a, sizeof bar);
	event(0, tstruct, bar, sizeof bar);
	event(0, tempty, "", 0);
	loc_event(trl, (6 << 16) | 0, "relat", 6);
	loc_event(trl, (6 << 16) | 1, "relat", 6);

	// Dynamic strings: non-printable bytes and an embedded NUL.
	loc_event(tbin, (8 << 16) | 12, "a\x01\xe9\x7f\x80\tb", 8);
	loc_event(tbin, (6 << 16) | 12, "ab\0cd", 6);
	loc_event(tuc, (6 << 16) | 12, "uchar", 6);
	// Dynamic arrays: hex bytes, empty, relative.
	{
		uint32_t p[6];
		p[0] = (5 << 16) | 16;		// a: 5 bytes after both loc words
		p[1] = (8 << 16) | 5;		// b: rel to its end (offset 16) + 5 = 21
		memcpy(&p[2], "\x01\x02\xff\x00\x7f", 5);
		memcpy((char *)&p[2] + 5, "\x10\x00\x00\x00\xff\xff\xff\xff", 8);
		event(0, tarr, p, 8 + 13);
		p[0] = (0 << 16) | 16;
		p[1] = (0 << 16) | 0;
		event(0, tarr, p, 8);
	}
	{
		uint32_t p[3] = {(8 << 16) | 12, 3, 0};
		event(0, tmask, p, sizeof p);
	}
	{
		char p[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
			      13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
		event(0, tstructs, p, 23);
	}
	{
		char p[6] = {'h', 'i', 0, 0, 0, 0};
		uint32_t bad = (2 << 16) | 200;		// no validator: <OVERFLOW>
		memcpy(p + 2, &bad, 4);
		event(0, tweird, p, 6);
		uint32_t ok = (4 << 16) | 10;		// its own four bytes
		memcpy(p + 2, &ok, 4);
		p[0] = 'x';
		p[1] = '\x01';
		event(0, tweird, p, 6);
	}

	cat("trace", 65536, 0, 100);
	cat("per_cpu/cpu0/trace", 65536, 0, 100);
	cat("per_cpu/cpu1/trace", 65536, 0, 100);
	cat("trace_pipe", 100, 1, 1000);
	cat("trace", 65536, 0, 100);
	puts_file("events/user_events/enable", "0");
}

static void case_markers(void)
{
	static char raw[4064];
	printf("CASE markers\n");
	clear();
	put("trace_marker", 1, 0, "hello", 5);
	put("trace_marker", 1, 0, "with newline\n", 13);
	put("trace_marker", 1, 0, "", 0);
	put("trace_marker", 1, 0, "ab\0cd", 5);
	put("trace_marker", 1, 0, "two\nlines", 9);
	put("trace_marker", 1, 0, "tab\tcr\r\x01\xff\xe9" "end", 13);
	put("trace_marker_raw", 1, 0, "\x34\x12\x00\x00", 4);
	put("trace_marker_raw", 1, 0, "\x34\x12\x00\x00" "A", 5);
	put("trace_marker_raw", 1, 0, "\x78\x56\x34\x12" "ABCDEFGH", 12);
	put("trace_marker_raw", 1, 0, "\x78\x56\x34", 3);
	put("trace_marker", 0, 0, "on cpu0", 7);
	static char text[5000];
	memset(text, 'x', sizeof text);
	put("trace_marker", 1, 0, text, sizeof text);
	memcpy(raw, "\xef\xbe\xad\xde", 4);
	for (size_t i = 4; i < sizeof raw; i++)
		raw[i] = (char)i;
	put("trace_marker_raw", 1, 0, raw, sizeof raw);
	put("trace_marker_raw", 1, 0, raw, 2704);
	put("trace_marker", 1, 0, "end", 3);
	cat("trace", 65536, 0, 100);
	cat("per_cpu/cpu1/trace", 65536, 0, 100);
	cat("per_cpu/cpu0/trace", 65536, 0, 100);
	cat("per_cpu/cpu0/trace_pipe", 65536, 1, 100);
	cat("trace_pipe", 8192, 1, 100);
}

static void case_long(void)
{
	static char p[4096];
	printf("CASE long\n");
	clear();
	int tlong = reg("t_long __data_loc char[] s");
	int tbig = reg("t_bigarr __data_loc u8[] a");
	int tmix = reg("t_mix __data_loc u8[] a; char[1024] s");
	int tsmall = reg("t_small u32 a");
	puts_file("events/user_events/enable", "1");

	memset(p, 0, sizeof p);
	memset(p + 4, 'L', 4000);
	uint32_t loc = (4001 << 16) | 12;
	memcpy(p, &loc, 4);
	event(0, tlong, p, 4 + 4001);

	for (int i = 0; i < 3000; i++)
		p[4 + i] = (char)(i * 7);
	loc = (3000 << 16) | 12;
	memcpy(p, &loc, 4);
	event(0, tbig, p, 4 + 3000);

	uint32_t one = 1;
	event(0, tsmall, &one, 4);

	// The array alone overflows the trace_seq (cut after a comma); with a
	// shorter one the string is the piece that does not fit, and there is
	// room left for "[LINE TOO BIG]".
	for (int n = 2700; n >= 2600; n -= 100) {
		memset(p, 0, sizeof p);
		loc = (n << 16) | (12 + 1024);
		memcpy(p, &loc, 4);
		memset(p + 4, 'S', 1024);
		for (int i = 0; i < n; i++)
			p[4 + 1024 + i] = (char)i;
		event(0, tmix, p, 4 + 1024 + n);
		one++;
		event(0, tsmall, &one, 4);
	}

	cat("trace", 65536, 0, 100);
	cat("trace_pipe", 65536, 1, 100);
	puts_file("events/user_events/enable", "0");
}

static void case_early_stop(void)
{
	printf("CASE early_stop\n");
	clear();
	put("trace_marker", 0, 0, "first", 5);
	put("trace_marker", 0, 0, "second", 6);
	put("trace_marker", 1, 0, "third", 5);
	cat("trace_pipe", 10, 1, 1);
	cat("trace", 65536, 0, 100);
	cat("trace_pipe", 7, 1, 100);
}

static void case_lost(void)
{
	char text[32];
	printf("CASE lost\n");
	puts_file("buffer_size_kb", "4");
	clear();
	const int cpus[3] = {0, 1, 0};
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 300; i++) {
			int n = snprintf(text, sizeof text, "cpu%d-%d", cpus[round], i);
			put("trace_marker", cpus[round], 0, text, n);
		}
	}
	cat("trace", 65536, 0, 100);
	cat("per_cpu/cpu1/trace", 65536, 0, 100);
	cat("trace_pipe", 65536, 1, 100);
	puts_file("buffer_size_kb", "1408");
}

static void case_clock(void)
{
	printf("CASE counter_clock\n");
	puts_file("trace_clock", "counter");
	put("trace_marker", 0, 0, "tick", 4);
	put("trace_marker", 1, 0, "tock", 4);
	put("trace_marker", 0, 0, "tick", 4);
	cat("trace", 65536, 0, 100);
	cat("trace_pipe", 65536, 1, 100);
	puts_file("trace_clock", "local");
}

static void case_unknown(void)
{
	printf("CASE unknown_type\n");
	clear();
	int fd = data_fd;
	data_fd = open_data();
	int gone = reg("t_gone u32 a");
	puts_file("events/user_events/t_gone/enable", "1");
	uint32_t a = 0x1234;
	event(0, gone, &a, 4);
	puts_file("events/user_events/t_gone/enable", "0");
	put("trace_marker", 0, 0, "after", 5);
	struct user_unreg u = {0};
	u.size = sizeof u;
	u.disable_bit = 0;
	u.disable_addr = (uint64_t)(uintptr_t)&enable_word[nregs - 1];
	ioctl(data_fd, DIAG_IOCSUNREG, &u);
	close(data_fd);
	data_fd = fd;
	int ret = -1;
	for (int i = 0; i < 5000 && ret; i++) {
		ret = ioctl(data_fd, DIAG_IOCSDEL, "t_gone") < 0 ? errno : 0;
		if (ret == EBUSY)
			usleep(1000);
		else if (ret)
			break;
	}
	printf("DELETE t_gone %d\n", -ret);
	cat("trace", 65536, 0, 100);
	cat("trace_pipe", 65536, 1, 100);
}

static void case_truncate(void)
{
	printf("CASE truncate\n");
	clear();
	put("trace_marker", 0, 0, "zero", 4);
	put("trace_marker", 1, 0, "one", 3);
	put("trace_marker", 1, 0, "uno", 3);
	cat("per_cpu/cpu1/trace_pipe", 65536, 1, 100);
	put("trace_marker", 1, 0, "eins", 4);
	put("per_cpu/cpu1/trace", 0, 1, "", 0);
	cat("trace", 65536, 0, 100);
	put("trace", 0, 1, "garbage", 7);
	cat("trace", 65536, 0, 100);
}

static void case_options(void)
{
	printf("CASE options\n");
	clear();
	puts_file("options/irq-info", "0");
	put("trace_marker", 0, 0, "no irq info", 11);
	cat("trace", 65536, 0, 100);
	puts_file("options/irq-info", "1");
	puts_file("options/record-tgid", "1");
	put("trace_marker", 1, 0, "with tgid", 9);
	cat("trace", 65536, 0, 100);
	puts_file("options/irq-info", "0");
	cat("trace", 65536, 0, 100);
	puts_file("options/irq-info", "1");
	puts_file("options/record-tgid", "0");
}

static const struct {
	const char *name;
	void (*run)(void);
	int user_events;
} cases[] = {
	{"fields", case_fields, 1},
	{"long", case_long, 1},
	{"unknown_type", case_unknown, 1},
	{"markers", case_markers, 0},
	{"early_stop", case_early_stop, 0},
	{"lost", case_lost, 0},
	{"counter_clock", case_clock, 0},
	{"truncate", case_truncate, 0},
	{"options", case_options, 0},
};

// trace_output [TRACEFS/ [CASE...]]: every case by default.
int main(int argc, char **argv)
{
	struct utsname u;
	uname(&u);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1)
		root = argv[1];
	printf("KERNEL %s\n", u.release);
	printf("PID %d\n", getpid());
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int wanted = argc <= 2;
		for (int a = 2; a < argc; a++)
			wanted |= !strcmp(argv[a], cases[i].name);
		if (!wanted)
			continue;
		if (cases[i].user_events && data_fd <= 0) {
			data_fd = open_data();
			if (data_fd < 0) {
				perror("user_events_data");
				return 1;
			}
		}
		cases[i].run();
	}
	printf("END\n");
	return 0;
}
