/*
 * user_events errno table: one line "<case>: <result>" per case, where result
 * is 0, a count, or the errno's name.  Runs unchanged against a real kernel
 * (the oracle) and against tracefs-fuse, so the two outputs can be compared.
 *
 * usage: ue_cases TRACEFS_DIR
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
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;
static int fd;
static uint64_t words[64];

static const char *errname(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case E2BIG: return "E2BIG";
	case EFAULT: return "EFAULT";
	case ENOMEM: return "ENOMEM";
	case ENOENT: return "ENOENT";
	case EBUSY: return "EBUSY";
	case EADDRINUSE: return "EADDRINUSE";
	case ENOTTY: return "ENOTTY";
	case EBADF: return "EBADF";
	case EPERM: return "EPERM";
	case EMFILE: return "EMFILE";
	default: return "E?";
	}
}

static void report(const char *name, long ret)
{
	if (ret < 0)
		printf("%s: %s\n", name, errname(errno));
	else
		printf("%s: %ld\n", name, ret);
}

/* A fresh registration of `command` on word `w`, bit `bit`; returns ioctl's result. */
static long reg(const char *command, int w, int bit, uint32_t size, uint8_t esize,
		uint16_t flags, uint32_t *index)
{
	static unsigned char buf[8192];
	struct user_reg *r = (struct user_reg *)buf;
	memset(buf, 0, sizeof buf);
	r->size = size;
	r->enable_bit = bit;
	r->enable_size = esize;
	r->flags = flags;
	r->enable_addr = (uint64_t)(uintptr_t)&words[w];
	r->name_args = (uint64_t)(uintptr_t)command;
	long ret = ioctl(fd, DIAG_IOCSREG, r);
	if (index)
		*index = r->write_index;
	return ret;
}

static long unreg(int w, int bit, uint32_t size, uint8_t reserved)
{
	struct user_unreg u = {0};
	u.size = size;
	u.disable_bit = bit;
	u.__reserved = reserved;
	u.disable_addr = (uint64_t)(uintptr_t)&words[w];
	return ioctl(fd, DIAG_IOCSUNREG, &u);
}

static void enable(const char *event, const char *value)
{
	char path[512];
	snprintf(path, sizeof path, "%s/events/user_events/%s/enable", dir, event);
	int efd = open(path, O_WRONLY);
	if (efd < 0 || write(efd, value, 1) != 1) {
		printf("FAIL enable %s: %s\n", event, strerror(errno));
		exit(1);
	}
	close(efd);
}

static long writev3(uint32_t index, const void *payload, size_t len)
{
	struct iovec io[2] = { { &index, sizeof index }, { (void *)payload, len } };
	return writev(fd, io, 2);
}

int main(int argc, char **argv)
{
	char path[512];
	uint32_t idx;
	if (argc < 2) {
		fprintf(stderr, "usage: %s TRACEFS_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	fd = open(path, O_RDWR);
	if (fd < 0) {
		perror(path);
		return 1;
	}

	/* struct user_reg validation */
	report("reg size 27", reg("v01 u32 a", 0, 31, 27, 4, 0, NULL));
	report("reg size 28", reg("v01 u32 a", 1, 31, 28, 4, 0, NULL));
	report("reg size 64", reg("v01 u32 a", 2, 31, 64, 4, 0, NULL));
	report("reg size 8192", reg("v01 u32 a", 3, 31, 8192, 4, 0, NULL));
	report("reg enable_size 1", reg("v01 u32 a", 4, 0, 28, 1, 0, NULL));
	report("reg enable_size 2", reg("v01 u32 a", 4, 0, 28, 2, 0, NULL));
	report("reg enable_size 8 bit 63", reg("v01 u32 a", 5, 63, 28, 8, 0, NULL));
	report("reg enable_size 4 bit 32", reg("v01 u32 a", 6, 32, 28, 4, 0, NULL));
	report("reg flags max", reg("v01 u32 a", 7, 0, 28, 4, 1 << 2, NULL));
	report("reg name NULL", reg(NULL, 8, 0, 28, 4, 0, NULL));
	report("reg same addr+bit", reg("v02 u32 a", 1, 31, 28, 4, 0, NULL));
	report("reg same event other bit", reg("v01 u32 a", 1, 30, 28, 4, 0, NULL));
	report("reg same name other fields", reg("v01 u64 a", 9, 0, 28, 4, 0, NULL));
	report("reg text flags", reg("v03:BPF_ITER u32 a", 10, 0, 28, 4, 0, NULL));
	report("reg bad type", reg("v04 long a", 10, 1, 28, 4, 0, NULL));
	{
		struct user_reg r = {0};
		r.size = 28;
		r.enable_size = 4;
		r.enable_addr = (uint64_t)(uintptr_t)&words[11] + 2;
		r.name_args = (uint64_t)(uintptr_t)"v05 u32 a";
		report("reg unaligned addr", ioctl(fd, DIAG_IOCSREG, &r));
		r.enable_addr = 0x1000;
		report("reg unmapped addr", ioctl(fd, DIAG_IOCSREG, &r));
		void *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		r.enable_addr = (uint64_t)(uintptr_t)ro;
		report("reg read-only addr", ioctl(fd, DIAG_IOCSREG, &r));
		r.name_args = 0;
		r.enable_addr = (uint64_t)(uintptr_t)&words[12];
		report("reg unreadable name", ioctl(fd, DIAG_IOCSREG, &r));
	}
	{
		static char name[1024];
		memset(name, 'n', sizeof name);
		name[511] = 0;
		report("reg 511-byte name", reg(name, 13, 0, 28, 4, 0, NULL));
		name[511] = 'n';
		name[512] = 0;
		report("reg 512-byte name", reg(name, 14, 0, 28, 4, 0, NULL));
	}

	/* delete and unregister */
	static char del_unknown[] = "nothere", del_v01[] = "v01";
	report("del unknown", ioctl(fd, DIAG_IOCSDEL, del_unknown));
	report("del registered", ioctl(fd, DIAG_IOCSDEL, del_v01));
	report("unreg unknown", unreg(60, 0, 16, 0));
	report("unreg reserved", unreg(1, 31, 16, 1));
	report("unreg size 8", unreg(1, 31, 8, 0));
	report("unknown ioctl", ioctl(fd, _IO('*', 9), 0));
	report("unreg", unreg(1, 30, 16, 0));
	report("unreg again", unreg(1, 30, 16, 0));

	/* writes */
	report("reg write event", reg("w01 u32 count; char[20] msg", 20, 31, 28, 4, 0, &idx));
	char payload[24] = {42, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'};
	report("write disabled", writev3(idx, payload, 24));
	report("write unknown index", writev3(77, payload, 24));
	report("write negative index", writev3((uint32_t)-1, payload, 24));
	report("write 2 bytes", write(fd, payload, 2));
	report("write 0 bytes", write(fd, payload, 0));
	report("write short payload disabled", writev3(idx, payload, 4));
	enable("w01", "1");
	printf("bit after enable: %#llx\n", (unsigned long long)words[20]);
	report("write enabled", writev3(idx, payload, 24));
	report("write short payload", writev3(idx, payload, 4));
	static char big[128];
	report("write longer payload", writev3(idx, big, 124));
	enable("w01", "0");
	printf("bit after disable: %#llx\n", (unsigned long long)words[20]);

	report("reg data_loc event", reg("w02 __data_loc char[] s; u32 n", 21, 31, 28, 4, 0, &idx));
	enable("w02", "1");
	{
		unsigned char p[18] = {0};
		uint32_t loc = (6u << 16) | 16, n = 5;
		memcpy(p, &loc, 4);
		memcpy(p + 4, &n, 4);
		memcpy(p + 8, "world", 6);
		report("data_loc from entry start", writev3(idx, p, 14));
		loc = (6u << 16) | 17;
		memcpy(p, &loc, 4);
		report("data_loc past end", writev3(idx, p, 14));
		loc = (7u << 16) | 16;
		memcpy(p, &loc, 4);
		report("data_loc length past end", writev3(idx, p, 14));
		loc = (5u << 16) | 16;
		memcpy(p, &loc, 4);
		report("data_loc without NUL", writev3(idx, p, 14));
		loc = 16;
		memcpy(p, &loc, 4);
		report("data_loc empty", writev3(idx, p, 8));
	}
	enable("w02", "0");
	return 0;
}
