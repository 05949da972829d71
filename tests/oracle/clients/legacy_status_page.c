// legacy_status_page: what a 6.1-era user_events tracefs answers, as key=value lines.
//
// The differential check for the status-page ABI (6.1-6.3: packed 20-byte
// struct user_reg, one bit per event in the page mapped from
// user_events_status). Run it on the real 6.1 kernel and on our mount pinned
// to --abi 6.1; the outputs must agree (tests/data/user_events-6.1.192-legacy.txt
// holds the kernel's).
//
//   gcc -static -O2 -Wall -Wextra legacy_status_page.c -o legacy_status_page
//   python -m tests.oracle.kernel run 6.1 legacy_status_page -- './legacy_status_page [--fill] [TRACEFS]'
//
// TRACEFS defaults to /sys/kernel/tracing. --fill also registers events until
// the page is full (32767 of them: slow, ~1 min under TCG) and checks EMFILE.
// Values are C-escaped (\n, \t, \\); errno values are printed by name.
// Every event name starts with "__legacy" so nothing else is touched.
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

// include/linux/user_events.h of 6.1 (quoted: this program needs no header).
struct user_reg {
	uint32_t size;          // Input: Size of the user_reg structure being used
	uint64_t name_args;     // Input: Pointer to string with event name, description and flags
	uint32_t status_bit;    // Output: Bitwise index of the event within the status page
	uint32_t write_index;   // Output: Index of the event to use when writing data
} __attribute__((__packed__));

#define DIAG_IOC_MAGIC '*'
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)
#define DIAG_IOCSDEL _IOW(DIAG_IOC_MAGIC, 1, char *)
// 6.4's DIAG_IOCSUNREG: 6.1 does not know it.
#define DIAG_IOCSUNREG _IOW(DIAG_IOC_MAGIC, 2, void *)

static char root[2048] = "/sys/kernel/tracing";
static long page_size;

static const char *ename(int e)
{
	static char b[32];
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case ENOENT: return "ENOENT";
	case EBUSY: return "EBUSY";
	case EFAULT: return "EFAULT";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EPERM: return "EPERM";
	case ENOMEM: return "ENOMEM";
	case EMFILE: return "EMFILE";
	case EACCES: return "EACCES";
	case ENOTTY: return "ENOTTY";
	case ENODEV: return "ENODEV";
	case EADDRINUSE: return "EADDRINUSE";
	}
	snprintf(b, sizeof b, "errno%d", e);
	return b;
}

static void put(const char *key, const char *value)
{
	printf("%s=", key);
	for (const char *p = value; *p; p++) {
		if (*p == '\n') fputs("\\n", stdout);
		else if (*p == '\t') fputs("\\t", stdout);
		else if (*p == '\\') fputs("\\\\", stdout);
		else putchar(*p);
	}
	putchar('\n');
	fflush(stdout);
}

static void putf(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(const char *key, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	put(key, buf);
}

// "0" or the errno name of a -1 result.
static const char *rc(long ret) { return ret < 0 ? ename(errno) : "0"; }

static char *path(const char *rel)
{
	static char p[4][4096];
	static int slot;
	char *o = p[slot++ & 3];
	snprintf(o, 4096, "%s/%s", root, rel);
	return o;
}

static void text(const char *key, const char *rel)
{
	static char buf[1 << 20];
	int fd = open(path(rel), O_RDONLY);
	if (fd < 0) {
		putf(key, "(open: %s)", ename(errno));
		return;
	}
	ssize_t n, tot = 0;
	while ((n = read(fd, buf + tot, sizeof buf - 1 - tot)) > 0)
		tot += n;
	close(fd);
	buf[tot] = 0;
	put(key, buf);
}

static long reg_raw(int fd, struct user_reg *r, size_t size_field, const void *tail, size_t tail_len)
{
	static char arg[8192] __attribute__((aligned(8)));
	memset(arg, 0, sizeof arg);
	r->size = size_field;
	memcpy(arg, r, sizeof *r);
	if (tail)
		memcpy(arg + sizeof *r, tail, tail_len);
	long ret = ioctl(fd, DIAG_IOCSREG, arg);
	memcpy(r, arg, sizeof *r);
	return ret;
}

// Registers; prints "<key>=<errno> bit=<status_bit> index=<write_index>".
static struct user_reg reg(const char *key, int fd, const char *command)
{
	struct user_reg r = {.name_args = (uint64_t)(uintptr_t)command,
			     .status_bit = 0xdeadbeef, .write_index = 0xdeadbeef};
	long ret = reg_raw(fd, &r, sizeof r, NULL, 0);
	if (ret < 0)
		putf(key, "%s", ename(errno));
	else
		putf(key, "0 bit=%u index=%u", r.status_bit, r.write_index);
	return r;
}

static int set_enable(const char *event, int on)
{
	char rel[512];
	snprintf(rel, sizeof rel, "events/user_events/%s/enable", event);
	int fd = open(path(rel), O_WRONLY);
	if (fd < 0)
		return -errno;
	int n = write(fd, on ? "1" : "0", 1);
	int e = errno;
	close(fd);
	return n < 0 ? -e : 0;
}

static int event_id(const char *event)
{
	char rel[512], buf[32] = {0};
	snprintf(rel, sizeof rel, "events/user_events/%s/id", event);
	int fd = open(path(rel), O_RDONLY);
	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof buf - 1) < 0)
		buf[0] = 0;
	close(fd);
	return atoi(buf);
}

static int bit_set(const unsigned char *page, unsigned bit)
{
	return !!(page[bit >> 3] & (1 << (bit & 7)));
}

// The page's non-zero bytes as "offset:hex ...", or "zero".
static void page_bytes(const char *key, const unsigned char *page)
{
	char buf[4096] = "";
	size_t n = 0;
	for (long i = 0; i < page_size && n < sizeof buf - 16; i++)
		if (page[i])
			n += snprintf(buf + n, sizeof buf - n, "%s%ld:%02x", n ? " " : "", i, page[i]);
	put(key, n ? buf : "zero");
}

static long del(int fd, const char *name) { return ioctl(fd, DIAG_IOCSDEL, name); }

static ssize_t ue_write(int fd, uint32_t index, const void *payload, size_t len)
{
	struct iovec io[2] = {{&index, sizeof index}, {(void *)payload, len}};
	return writev(fd, io, 2);
}

static int dyn(const char *cmd)
{
	int fd = open(path("dynamic_events"), O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, cmd, strlen(cmd));
	int e = errno;
	close(fd);
	return n < 0 ? -e : 0;
}

static void modes(void)
{
	struct stat st;
	const char *files[] = {"user_events_status", "user_events_data"};
	for (int i = 0; i < 2; i++) {
		char key[64];
		snprintf(key, sizeof key, "mode.%s", files[i]);
		if (stat(path(files[i]), &st) == 0)
			putf(key, "%04o", st.st_mode & 07777);
		else
			putf(key, "(stat: %s)", ename(errno));
	}
}

// mmap() of user_events_status: which lengths, offsets and protections work.
static void mappings(void)
{
	int ro = open(path("user_events_status"), O_RDONLY);
	int rw = open(path("user_events_status"), O_RDWR);
	struct { const char *key; int fd; size_t len; int prot; int flags; off_t off; } cases[] = {
		{"mmap.page", ro, 4096, PROT_READ, MAP_SHARED, 0},
		{"mmap.one_byte", ro, 1, PROT_READ, MAP_SHARED, 0},
		{"mmap.two_pages", ro, 8192, PROT_READ, MAP_SHARED, 0},
		{"mmap.offset_page", ro, 4096, PROT_READ, MAP_SHARED, 4096},
		{"mmap.private", ro, 4096, PROT_READ, MAP_PRIVATE, 0},
		{"mmap.private_write", ro, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0},
		{"mmap.shared_write_rdonly_fd", ro, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0},
		{"mmap.shared_write", rw, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0},
		{"mmap.exec", ro, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		void *p = mmap(NULL, cases[i].len, cases[i].prot, cases[i].flags, cases[i].fd, cases[i].off);
		put(cases[i].key, p == MAP_FAILED ? ename(errno) : "0");
		if (p != MAP_FAILED)
			munmap(p, cases[i].len);
	}
	// Can a writable shared mapping change the page? Try from a child (it may
	// die of SIGSEGV/SIGBUS) and look through an independent read-only mapping.
	unsigned char *view = mmap(NULL, 4096, PROT_READ, MAP_SHARED, ro, 0);
	pid_t child = fork();
	if (child == 0) {
		unsigned char *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
		if (w == MAP_FAILED)
			_exit(100);
		w[4000] = 0x5a;
		_exit(0);
	}
	int status = 0;
	waitpid(child, &status, 0);
	if (WIFSIGNALED(status))
		putf("mmap.shared_write_store", "signal %d", WTERMSIG(status));
	else
		putf("mmap.shared_write_store", "exit %d", WEXITSTATUS(status));
	putf("mmap.shared_write_visible", "%02x", view[4000]);
	if (view[4000]) {
		// Put it back through the same hole so later output is unaffected.
		unsigned char *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
		if (w != MAP_FAILED) {
			w[4000] = 0;
			munmap(w, 4096);
		}
	}
	munmap(view, 4096);
	// read() after mmap on the same open file still gives the text.
	char buf[256] = {0};
	void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, ro, 0);
	ssize_t n = read(ro, buf, sizeof buf - 1);
	putf("mmap.then_read", "%s %s", n < 0 ? ename(errno) : "0", n > 0 ? buf : "");
	if (m != MAP_FAILED)
		munmap(m, 4096);
	close(ro);
	close(rw);
}

static void registration_checks(void)
{
	int fd = open(path("user_events_data"), O_RDWR);
	const char *name = "__legacy_size u32 a";
	struct user_reg r;
	struct { const char *key; size_t size; const void *tail; size_t tail_len; } sizes[] = {
		{"reg.size0", 0, NULL, 0},
		{"reg.size19", 19, NULL, 0},
		{"reg.size20", 20, NULL, 0},
		{"reg.size24_zero_tail", 24, "\0\0\0\0", 4},
		{"reg.size24_nonzero_tail", 24, "\1\0\0\0", 4},
		{"reg.size4096", 4096, NULL, 0},
		{"reg.size4097", 4097, NULL, 0},
	};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		memset(&r, 0, sizeof r);
		r.name_args = (uint64_t)(uintptr_t)name;
		long ret = reg_raw(fd, &r, sizes[i].size, sizes[i].tail, sizes[i].tail_len);
		if (ret < 0)
			put(sizes[i].key, ename(errno));
		else
			putf(sizes[i].key, "0 bit=%u index=%u", r.status_bit, r.write_index);
	}
	memset(&r, 0, sizeof r);
	putf("reg.name_null", "%s", rc(reg_raw(fd, &r, sizeof r, NULL, 0)));
	// What the ioctl writes back: only status_bit and write_index.
	memset(&r, 0, sizeof r);
	r.name_args = (uint64_t)(uintptr_t)name;
	r.status_bit = r.write_index = 0xdeadbeef;
	reg_raw(fd, &r, sizeof r, NULL, 0);
	putf("reg.written_back", "size=%u name_args_kept=%d bit=%u index=%u", r.size,
	     r.name_args == (uint64_t)(uintptr_t)name, r.status_bit, r.write_index);
	// A malformed command takes no bit: the next event gets the next one.
	reg("reg.bad_field", fd, "__legacy_bad u33 a");
	reg("reg.after_bad_field", fd, "__legacy_after");
	// The longest name (511 bytes and the NUL), on its own file so that it
	// can be deleted at once and keep the texts below short.
	char big[600];
	memset(big, 'x', sizeof big);
	memcpy(big, "__legacy", 8);
	big[511] = 0;
	int long_fd = open(path("user_events_data"), O_RDWR);
	reg("reg.name511", long_fd, big);
	close(long_fd);
	putf("reg.name511_deleted", "%s", rc(del(fd, big)));
	big[511] = 'x';
	big[512] = 0;
	reg("reg.name512", fd, big);
	putf("ioctl.unreg", "%s", rc(ioctl(fd, DIAG_IOCSUNREG, &r)));
	putf("ioctl.unknown", "%s", rc(ioctl(fd, _IOW(DIAG_IOC_MAGIC, 9, char *), &r)));
	close(fd);
	del(open(path("user_events_data"), O_RDWR), "__legacy_size");
}

// The example.c flow: map, register, enable, see the bit, write, disable.
static void example_flow(void)
{
	int status_fd = open(path("user_events_status"), O_RDONLY);
	unsigned char *page = mmap(NULL, page_size, PROT_READ, MAP_SHARED, status_fd, 0);
	close(status_fd);
	int fd = open(path("user_events_data"), O_RDWR);
	struct user_reg a = reg("flow.reg_a", fd, "__legacy_a u32 count");
	reg("flow.reg_a_again", fd, "__legacy_a u32 count");
	reg("flow.reg_a_other_fields", fd, "__legacy_a u64 other; char[8] s");
	reg("flow.reg_a_bad_fields", fd, "__legacy_a u33 nonsense");
	reg("flow.reg_a_flags", fd, "__legacy_a:BPF_ITER u32 count");
	struct user_reg b = reg("flow.reg_b_flags", fd, "__legacy_b:FOO,BAR char[8] s");
	text("flow.format_a", "events/user_events/__legacy_a/format");
	text("flow.format_b", "events/user_events/__legacy_b/format");
	int fd2 = open(path("user_events_data"), O_RDWR);
	reg("flow.reg_b_second_file", fd2, "__legacy_b");
	text("flow.status_registered", "user_events_status");
	page_bytes("flow.page_registered", page);

	uint32_t count = 7;
	putf("flow.write_disabled", "%zd", ue_write(fd, a.write_index, &count, sizeof count));
	putf("flow.write_short_disabled", "%s", rc(ue_write(fd, a.write_index, &count, 2)));
	putf("flow.write_unknown_index", "%s", rc(ue_write(fd, 9, &count, sizeof count)));
	putf("flow.write_negative_index", "%s", rc(ue_write(fd, (uint32_t)-1, &count, sizeof count)));
	putf("flow.write_no_index", "%s", rc(write(fd, "ab", 2)));

	putf("flow.enable_a", "%d", set_enable("__legacy_a", 1));
	putf("flow.bit_a_enabled", "%d", bit_set(page, a.status_bit));
	page_bytes("flow.page_a_enabled", page);
	text("flow.status_a_enabled", "user_events_status");
	putf("flow.write_enabled", "%zd", ue_write(fd, a.write_index, &count, sizeof count));
	putf("flow.write_enabled_long", "%zd", ue_write(fd, a.write_index, "0123456789", 10));
	putf("flow.write_short_enabled", "%s", rc(ue_write(fd, a.write_index, &count, 2)));

	// perf as a second probe kind: "Used by ftrace perf", the bit stays set.
	struct perf_event_attr pe = {.type = PERF_TYPE_TRACEPOINT, .size = sizeof pe,
				     .config = event_id("__legacy_b"), .sample_period = 1,
				     .wakeup_events = 1};
	int perf = syscall(__NR_perf_event_open, &pe, 0, -1, -1, 0);
	putf("flow.perf_open_b", "%s", perf < 0 ? ename(errno) : "0");
	putf("flow.bit_b_perf", "%d", bit_set(page, b.status_bit));
	putf("flow.enable_b", "%d", set_enable("__legacy_b", 1));
	text("flow.status_both", "user_events_status");
	if (perf >= 0)
		close(perf);
	putf("flow.bit_b_after_perf_close", "%d", bit_set(page, b.status_bit));
	set_enable("__legacy_b", 0);

	putf("flow.del_enabled", "%s", rc(del(fd, "__legacy_a")));
	putf("flow.disable_a", "%d", set_enable("__legacy_a", 0));
	putf("flow.bit_a_disabled", "%d", bit_set(page, a.status_bit));
	page_bytes("flow.page_disabled", page);
	putf("flow.del_referenced", "%s", rc(del(fd, "__legacy_a")));
	putf("flow.del_missing", "%s", rc(del(fd, "__legacy_nothere")));
	putf("flow.del_with_fields", "%s", rc(del(fd, "__legacy_a u32 count")));
	close(fd);
	putf("flow.del_b_other_file_open", "%s", rc(del(fd2, "__legacy_b")));
	putf("flow.del_a_closed", "%s", rc(del(fd2, "__legacy_a")));
	putf("flow.del_a_again", "%s", rc(del(fd2, "__legacy_a")));
	// The freed bit is the lowest free one again.
	reg("flow.reg_c_reuses_bit", fd2, "__legacy_c");
	close(fd2);
	text("flow.status_end", "user_events_status");
	page_bytes("flow.page_end", page);
	munmap(page, page_size);
	fd = open(path("user_events_data"), O_RDWR);
	del(fd, "__legacy_b");
	del(fd, "__legacy_c");
	del(fd, "__legacy_after");
	close(fd);
}

// Two processes share the page; a child's registration is seen by the parent.
static void two_processes(void)
{
	int status_fd = open(path("user_events_status"), O_RDONLY);
	unsigned char *page = mmap(NULL, page_size, PROT_READ, MAP_SHARED, status_fd, 0);
	int pipefd[2];
	if (pipe(pipefd) < 0)
		return;
	pid_t child = fork();
	if (child == 0) {
		int fd = open(path("user_events_data"), O_RDWR);
		struct user_reg r = {.size = sizeof r, .name_args = (uint64_t)(uintptr_t)"__legacy_child u32 a"};
		ioctl(fd, DIAG_IOCSREG, &r);
		if (write(pipefd[1], &r.status_bit, sizeof r.status_bit) < 0)
			_exit(1);
		_exit(0);  // closing the file leaves the event (no auto-delete)
	}
	uint32_t bit = 0;
	if (read(pipefd[0], &bit, sizeof bit) != sizeof bit)
		bit = 0;
	waitpid(child, NULL, 0);
	putf("fork.child_bit", "%u", bit);
	set_enable("__legacy_child", 1);
	putf("fork.parent_sees_bit", "%d", bit_set(page, bit));
	set_enable("__legacy_child", 0);
	putf("fork.parent_sees_clear", "%d", bit_set(page, bit));
	int fd = open(path("user_events_data"), O_RDWR);
	putf("fork.del_after_child_exit", "%s", rc(del(fd, "__legacy_child")));
	close(fd);
	munmap(page, page_size);
	close(status_fd);
}

// Events made through dynamic_events take a bit too, and delete by name alone.
static void dynamic_events(void)
{
	putf("dyn.create", "%d", dyn("u:__legacy_dyn u32 x; u64 y\n"));
	putf("dyn.create_flags", "%d", dyn("u:__legacy_dyn2:FLAG u32 x\n"));
	text("dyn.listing", "dynamic_events");
	text("dyn.status", "user_events_status");
	int fd = open(path("user_events_data"), O_RDWR);
	reg("dyn.reg_existing", fd, "__legacy_dyn");
	close(fd);
	putf("dyn.delete_by_name", "%d", dyn("-:__legacy_dyn\n"));
	putf("dyn.delete_with_fields", "%d", dyn("-:__legacy_dyn2 u32 x\n"));
	text("dyn.listing_after", "dynamic_events");
}

// Registers until the page is full; the 32768th gets EMFILE.
static void fill(void)
{
	int fd = open(path("user_events_data"), O_RDWR);
	char name[64];
	unsigned n = 0, last = 0;
	int err = 0;
	for (;;) {
		snprintf(name, sizeof name, "__legacy_f%u", n);
		struct user_reg r = {.size = sizeof r, .name_args = (uint64_t)(uintptr_t)name};
		if (ioctl(fd, DIAG_IOCSREG, &r) < 0) {
			err = errno;
			break;
		}
		last = r.status_bit;
		n++;
	}
	putf("fill.registered", "%u", n);
	putf("fill.last_bit", "%u", last);
	putf("fill.error", "%s", ename(err));
	reg("fill.existing_still_registers", fd, "__legacy_f5");
	reg("fill.bad_command_when_full", fd, "__legacy_full u33 a");
	close(fd);
	fd = open(path("user_events_data"), O_RDWR);
	putf("fill.del_one", "%s", rc(del(fd, "__legacy_f99")));
	reg("fill.reuses_freed_bit", fd, "__legacy_new");
	close(fd);
	// Leave the status line totals as evidence, then clean up.
	static char buf[1 << 22];
	int sfd = open(path("user_events_status"), O_RDONLY);
	ssize_t k, tot = 0;
	while ((k = read(sfd, buf + tot, sizeof buf - 1 - tot)) > 0)
		tot += k;
	close(sfd);
	buf[tot] = 0;
	char *tail = strstr(buf, "\n\nActive:");
	put("fill.status_tail", tail ? tail + 2 : "(none)");
	fd = open(path("user_events_data"), O_RDWR);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof name, "__legacy_f%u", i);
		del(fd, name);
	}
	del(fd, "__legacy_new");
	close(fd);
}

int main(int argc, char **argv)
{
	int do_fill = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fill") == 0)
			do_fill = 1;
		else
			snprintf(root, sizeof root, "%s", argv[i]);
	}
	page_size = sysconf(_SC_PAGESIZE);
	putf("struct.user_reg_size", "%zu", sizeof(struct user_reg));
	putf("ioctl.DIAG_IOCSREG", "%#lx", (unsigned long)DIAG_IOCSREG);
	putf("ioctl.DIAG_IOCSDEL", "%#lx", (unsigned long)DIAG_IOCSDEL);
	modes();
	text("status.empty", "user_events_status");
	mappings();
	registration_checks();
	example_flow();
	two_processes();
	dynamic_events();
	text("status.final", "user_events_status");
	if (do_fill)
		fill();
	return 0;
}
