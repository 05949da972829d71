/*
 * A seeded fuzzer for user_events_data through a real mount: registrations,
 * unregistrations and deletions with random struct sizes, flags, bits,
 * addresses and names; writes with random iovecs; ioctl numbers nobody
 * knows; reads of random files; descriptors closed and reopened; children
 * forked that fuzz too and die.
 *
 * usage: adv_fuzz TRACEFS_DIR SEED COUNT [FILE...]
 *   FILE: paths (relative to TRACEFS_DIR) that the read operation picks from.
 *
 * Judging is the test's business: the client prints, sorted, one line per
 * (operation, input class, outcome) with a count,
 *   "<op> <class> <0|errno name> <count>"
 * and at the end "tried <n>".  An input class names what makes the input
 * special (an unmapped struct, a bit past the size, ...), so that the test
 * can hold each class to the kernel's answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user_events_uapi.h"

#define PAGE 4096
#define MAX_OUTCOMES 512
#define MAX_REGS 64

static uint64_t rng;

static uint64_t next(void)
{
	/* xorshift64*: deterministic per seed, so a failure replays */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static uint64_t below(uint64_t n)
{
	return n ? next() % n : 0;
}

struct outcome {
	char key[96];
	long count;
};
static struct outcome outcomes[MAX_OUTCOMES];
static int n_outcomes;
static long tried;

static void note(const char *op, const char *class, long ret)
{
	char key[96];
	snprintf(key, sizeof key, "%s %s %s", op, class, ret < 0 ? strerrorname_np(errno) : "0");
	tried++;
	for (int i = 0; i < n_outcomes; i++)
		if (!strcmp(outcomes[i].key, key)) {
			outcomes[i].count++;
			return;
		}
	if (n_outcomes < MAX_OUTCOMES) {
		strcpy(outcomes[n_outcomes].key, key);
		outcomes[n_outcomes++].count = 1;
	}
}

static int cmp_outcome(const void *a, const void *b)
{
	return strcmp(((const struct outcome *)a)->key, ((const struct outcome *)b)->key);
}

/*
 * Memory the operations point into: rw is 4 pages (0: enable words,
 * 1: structs, 2: write payloads, 3: names), then a PROT_NONE page, then a
 * read-only one holding a name; gone was mapped and is not.
 */
static unsigned char *rw, *none, *ro, *gone;
#define WORDS (rw)
#define STRUCTS (rw + PAGE)
#define PAYLOAD (rw + 2 * PAGE)
#define NAMES (rw + 3 * PAGE)
static const char *dir;
static int fds[2];

struct reg_made {
	uint64_t addr;
	uint8_t bit;
	int index;
	int fd;
};
static struct reg_made regs[MAX_REGS];
static int n_regs;

static const char *const grammar[] = {
	"fz_a u32 a", "fz_b u64 b; u32 c", "fz_c char[16] s", "fz_d __data_loc char[] s",
	"fz_e __rel_loc char[] s", "fz_f struct x y 8", "fz_g", "fz_h:BPF u32 a", "fz_i s32 a;",
	"fz_j u32 a;;u32 b", " fz_k u32 a", "fz_l  u32 a", "fz_m u8 a; u16 b; u32 c; u64 d",
	"fz_a u64 a", "fz_n unknown_type a", "fz_o char[0] s", "fz_p char[4096] s",
	"a", "", ";", "u32 a", "fz_q u32 a; u32 a", "fz_r long a", "fz_s int a", "fz_t char a",
	"fz/u u32 a", "fz_v:flag1,flag2 u32 a", "fz_w __data_loc u32 a", "fz_x char[] s",
};

/* A name somewhere in rw (or ro), or an address where no name can be read. */
static uint64_t name_arg(const char **class)
{
	unsigned char *p = NAMES;
	size_t len;
	switch (below(10)) {
	case 0:
		*class = "name_unmapped";
		return (uint64_t)(uintptr_t)gone;
	case 1:
		*class = "name_null";
		return 0;
	case 2:
		/* runs into the PROT_NONE page: no terminating NUL readable */
		*class = "name_unterminated";
		memset(none - 16, 'z', 16);
		return (uint64_t)(uintptr_t)(none - 16);
	case 3:
		*class = "name_long";
		len = 500 + below(40); /* around MAX_EVENT_DESC (512) */
		memset(p, 'L', len);
		memcpy(p, "fz_long u32 a;", 14);
		p[len] = 0;
		return (uint64_t)(uintptr_t)p;
	case 4:
		*class = "name_bytes";
		len = below(64);
		for (size_t i = 0; i < len; i++)
			p[i] = (unsigned char)(1 + below(255));
		p[len] = 0;
		return (uint64_t)(uintptr_t)p;
	case 5:
		*class = "name_readonly";
		return (uint64_t)(uintptr_t)ro;
	default:
		*class = "name";
		strcpy((char *)p, grammar[below(sizeof grammar / sizeof *grammar)]);
		return (uint64_t)(uintptr_t)p;
	}
}

/* An enable word: mostly good, sometimes not. */
static uint64_t enable_addr(int size, const char **class)
{
	switch (below(12)) {
	case 0:
		*class = "addr_unmapped";
		return (uint64_t)(uintptr_t)gone;
	case 1:
		*class = "addr_readonly";
		return (uint64_t)(uintptr_t)ro;
	case 2:
		*class = "addr_none";
		return (uint64_t)(uintptr_t)none;
	case 3:
		*class = "addr_unaligned";
		return (uint64_t)(uintptr_t)(WORDS + 1 + below(3));
	case 4:
		*class = "addr_kernel";
		return 0xffff888000000000ULL;
	case 5:
		*class = "addr_null";
		return 0;
	default:
		*class = "addr";
		return (uint64_t)(uintptr_t)(WORDS + size * below(64));
	}
}

static void op_reg(int fd)
{
	/* struct user_reg at the start of its page: sizes up to a page fit */
	static const uint32_t sizes[] = {0, 1, 4, 19, 20, 24, 28, 32, 33, 40, 64, 4096, 4097};
	const char *class = "reg", *aclass, *nclass;
	uint32_t size = sizes[below(sizeof sizes / sizeof *sizes)];
	struct user_reg r = {.size = size, .enable_bit = (uint8_t)(below(4) ? below(40) : next()),
			     .enable_size = (uint8_t)(below(3) ? 4u << below(2) : below(20)),
			     .flags = (uint16_t)(below(3) ? 0 : below(4) ? below(4) : next())};
	r.enable_addr = enable_addr(r.enable_size ? r.enable_size : 4, &aclass);
	r.name_args = name_arg(&nclass);
	unsigned char *at = STRUCTS;
	memset(at, 0, PAGE);
	memcpy(at, &r, sizeof r);
	if (size > sizeof r && size <= PAGE && below(2)) {
		class = "reg_trailing"; /* non-zero bytes past the struct: E2BIG */
		at[sizeof r + below(size - sizeof r)] = 1;
	}
	uint64_t arg = (uint64_t)(uintptr_t)at;
	switch (below(16)) {
	case 0:
		class = "reg_struct_unmapped";
		arg = (uint64_t)(uintptr_t)gone;
		break;
	case 1:
		class = "reg_struct_straddles";
		arg = (uint64_t)(uintptr_t)(none - 4);
		memcpy(none - 4, &size, 4);
		break;
	}
	/* The first problem in the kernel's order (user_reg_get, then the ioctl) */
	if (!strcmp(class, "reg") || !strcmp(class, "reg_trailing")) {
		int trailing = !strcmp(class, "reg_trailing");
		if (size > PAGE)
			class = "reg_size_big";
		else if (size == 20 || size == 24)
			class = "reg_old_abi"; /* 6.1's and 5.18's struct user_reg (--abi auto) */
		else if (size < 28)
			class = "reg_size_small";
		else if (trailing)
			class = "reg_trailing";
		else if (r.flags & ~3)
			class = "reg_flags";
		else if (r.enable_size != 4 && r.enable_size != 8)
			class = "reg_enable_size";
		else if (r.enable_addr % r.enable_size)
			class = "reg_unaligned";
		else if (r.enable_bit >= r.enable_size * 8)
			class = "reg_bit";
		else if (strcmp(aclass, "addr"))
			class = aclass;
		else if (strcmp(nclass, "name"))
			class = nclass;
	}
	long ret = ioctl(fd, DIAG_IOCSREG, (void *)(uintptr_t)arg);
	note("reg", class, ret);
	if (ret == 0 && n_regs < MAX_REGS) {
		struct user_reg *done = (struct user_reg *)at;
		regs[n_regs++] = (struct reg_made){r.enable_addr, r.enable_bit,
						   (int)done->write_index, fd};
	}
}

static void op_unreg(int fd)
{
	const char *class = "unreg";
	struct user_unreg u = {.size = sizeof u};
	if (n_regs && below(3)) {
		struct reg_made *m = &regs[below(n_regs)];
		u.disable_addr = m->addr;
		u.disable_bit = m->bit;
		class = "unreg_known";
	} else {
		const char *aclass;
		u.disable_addr = enable_addr(4, &aclass);
		u.disable_bit = (uint8_t)below(40);
	}
	switch (below(8)) {
	case 0:
		u.__reserved = (uint8_t)(1 + below(255));
		class = "unreg_reserved";
		break;
	case 1:
		u.size = (uint32_t)below(16);
		class = "unreg_size_small";
		break;
	case 2:
		u.size = PAGE + 1;
		class = "unreg_size_big";
		break;
	}
	long ret = below(20) ? ioctl(fd, DIAG_IOCSUNREG, &u)
			     : (class = "unreg_struct_unmapped", ioctl(fd, DIAG_IOCSUNREG, gone));
	note("unreg", class, ret);
}

static void op_del(int fd)
{
	const char *class;
	uint64_t name = name_arg(&class);
	if (!strcmp(class, "name")) {
		/* a bare name: DIAG_IOCSDEL takes no fields */
		char *p = (char *)(uintptr_t)name;
		p[strcspn(p, " ")] = 0;
	}
	note("del", class, ioctl(fd, DIAG_IOCSDEL, (void *)(uintptr_t)name));
}

static void op_write(int fd)
{
	struct iovec iov[8];
	int n = 1 + (int)below(8);
	const char *class = "write";
	int32_t index = n_regs && below(4) ? regs[below(n_regs)].index : (int32_t)(below(3) ? below(8) : next());
	unsigned char *payload = PAYLOAD;
	for (int i = 0; i < PAGE / 8; i++)
		payload[i] = (unsigned char)next();
	memcpy(payload, &index, 4);
	iov[0] = (struct iovec){payload, below(8) ? 4 : below(4)};
	if (iov[0].iov_len < 4)
		class = "write_short_index";
	for (int i = 1; i < n; i++)
		iov[i] = (struct iovec){payload + 4 + below(256), below(64)};
	switch (below(16)) {
	case 0:
		iov[0] = (struct iovec){gone, 4};
		class = "write_index_unmapped";
		break;
	case 1:
		if (n > 1) {
			iov[n - 1] = (struct iovec){gone, 1 + below(64)};
			class = "write_payload_unmapped";
		}
		break;
	}
	note("write", class, writev(fd, iov, n));
}

static void op_unknown_ioctl(int fd)
{
	static unsigned char arg[1 << 14];
	unsigned int cmd = (unsigned int)next();
	/* the three user_events numbers, and the VFS's own (do_vfs_ioctl) */
	if (cmd == DIAG_IOCSREG || cmd == DIAG_IOCSDEL || cmd == DIAG_IOCSUNREG ||
	    (cmd >> 8 & 0xff) == 0x54 || (cmd >> 8 & 0xff) == 'f' || (cmd >> 8 & 0xff) == 'X' ||
	    (cmd >> 8 & 0xff) == 0x94 || cmd <= 2)
		return;
	note("ioctl", "unknown", ioctl(fd, cmd, arg));
}

static void op_read(int argc, char **argv)
{
	static char buf[1 << 16];
	char path[512];
	if (argc <= 4)
		return;
	snprintf(path, sizeof path, "%s/%s", dir, argv[4 + below(argc - 4)]);
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		note("read", "open", -1);
		return;
	}
	size_t size = below(4) ? sizeof buf : below(200);
	note("read", "file", pread(fd, buf, size, below(4) ? 0 : (off_t)below(1 << 20)));
	close(fd);
}

static void reopen(int slot)
{
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	if (fds[slot] >= 0)
		close(fds[slot]);
	/* registrations of the closed descriptor are no longer writable */
	for (int i = 0; i < n_regs; i++)
		if (regs[i].fd == fds[slot])
			regs[i--] = regs[--n_regs];
	fds[slot] = open(path, O_RDWR);
	if (fds[slot] < 0) {
		perror(path);
		exit(1);
	}
}

static void fuzz(long count, int argc, char **argv, int depth)
{
	for (long i = 0; i < count; i++) {
		int fd = fds[below(2)];
		switch (below(20)) {
		case 0 ... 5: op_reg(fd); break;
		case 6 ... 8: op_unreg(fd); break;
		case 9 ... 10: op_del(fd); break;
		case 11 ... 15: op_write(fd); break;
		case 16: op_unknown_ioctl(fd); break;
		case 17: op_read(argc, argv); break;
		case 18: reopen((int)below(2)); break;
		case 19:
			if (depth == 0 && below(8) == 0) {
				/* a child fuzzes with inherited enablers, then dies mid-way */
				pid_t pid = fork();
				if (pid == 0) {
					rng ^= (uint64_t)getpid() << 32;
					fuzz(20, argc, argv, 1);
					_exit(0);
				}
				int status;
				errno = ECHILD;
				long ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
					  !WEXITSTATUS(status);
				note("fork", "child", ok ? 0 : -1);
			}
			break;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s TRACEFS_DIR SEED COUNT [FILE...]\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	rng = strtoull(argv[2], NULL, 0) * 2654435761u + 1;
	long count = atol(argv[3]);
	rw = mmap(NULL, 6 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rw == MAP_FAILED)
		return 1;
	none = rw + 4 * PAGE;
	ro = rw + 5 * PAGE;
	strcpy((char *)ro, "fz_ro u32 a");
	mprotect(none, PAGE, PROT_NONE);
	mprotect(ro, PAGE, PROT_READ);
	gone = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(gone, PAGE);
	fds[0] = fds[1] = -1;
	reopen(0);
	reopen(1);
	fuzz(count, argc, argv, 0);
	qsort(outcomes, n_outcomes, sizeof *outcomes, cmp_outcome);
	for (int i = 0; i < n_outcomes; i++)
		printf("%s %ld\n", outcomes[i].key, outcomes[i].count);
	printf("tried %ld\n", tried);
	return 0;
}
