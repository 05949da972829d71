// ioctl client for tests/fuse/bridge_testfs.py (the "ioctl" file).
//
// usage: bridge_ioctl reg|thread|data|unknown FILE
//        bridge_ioctl reg-mapped FILE MAPPED: struct bridge_reg across the end
//            of ordinary memory into an untouched private writable mapping of
//            MAPPED, so that the daemon's process_vm_writev faults into a read
//            of MAPPED from the daemon itself; prints ret= and errno=
//        bridge_ioctl bench|bench-task FILE SECONDS
// Prints key=value lines; exits with errno on an unexpected failure.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

// Mirrors user_events' DIAG_IOCSREG: the size in the cmd is that of a
// pointer, so the kernel copies in only the first 8 bytes of the struct.
struct bridge_reg {
	uint32_t size;
	uint32_t marker;  // daemon overwrites it with process_vm_writev
	uint64_t result;  // daemon: marker + size, from the copied-in bytes
	uint32_t tid;     // daemon: the pid it saw in the request
	uint32_t pad;
};
#define IOC_REG _IOWR('*', 0, struct bridge_reg *)
#define IOC_DATA _IOWR('*', 2, uint64_t[2])
#define IOC_NOP _IO('*', 3)       // replied inline by the handler
#define IOC_NOP_TASK _IO('*', 4)  // replied from a trio task
#define IOC_UNKNOWN _IO('*', 9)

static int fd;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *do_reg(void *unused)
{
	(void)unused;
	struct bridge_reg reg = {.size = sizeof(reg), .marker = 0x11111111,
				 .result = 0xdeadbeef, .tid = 0};
	int ret = ioctl(fd, IOC_REG, &reg);
	if (ret < 0) {
		perror("ioctl(IOC_REG)");
		exit(errno);
	}
	printf("ret=%d size=%u marker=%#x result=%#llx tid_seen=%u gettid=%d getpid=%d\n",
	       ret, reg.size, reg.marker, (unsigned long long)reg.result,
	       reg.tid, gettid(), getpid());
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s reg|thread|data|unknown|bench|bench-task FILE [SECONDS]\n", argv[0]);
		return EINVAL;
	}
	const char *mode = argv[1];
	fd = open(argv[2], O_RDWR);
	if (fd < 0) {
		perror("open");
		return errno;
	}
	if (!strcmp(mode, "reg")) {
		do_reg(NULL);
	} else if (!strcmp(mode, "thread")) {
		pthread_t t;
		pthread_create(&t, NULL, do_reg, NULL);
		pthread_join(t, NULL);
	} else if (!strcmp(mode, "reg-mapped") && argc == 4) {
		char *area = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int mfd = open(argv[3], O_RDONLY);
		if (area == MAP_FAILED || mfd < 0 ||
		    mmap(area + 4096, 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_FIXED, mfd, 0) != area + 4096) {
			perror("mmap");
			return errno;
		}
		struct bridge_reg *reg = (void *)(area + 4096 - 8);
		reg->size = sizeof(*reg);  /* the first 8 bytes: ordinary memory */
		reg->marker = 0x11111111;
		int ret = ioctl(fd, IOC_REG, reg);
		printf("ret=%d errno=%s\n", ret, ret < 0 ? strerrorname_np(errno) : "0");
	} else if (!strcmp(mode, "data")) {
		uint64_t v[2] = {41, 99};
		int ret = ioctl(fd, IOC_DATA, v);
		if (ret < 0) {
			perror("ioctl(IOC_DATA)");
			return errno;
		}
		printf("ret=%d v0=%llu v1=%llu\n", ret, (unsigned long long)v[0],
		       (unsigned long long)v[1]);
	} else if (!strcmp(mode, "unknown")) {
		int ret = ioctl(fd, IOC_UNKNOWN, 0);
		printf("ret=%d errno=%s\n", ret, ret < 0 ? strerrorname_np(errno) : "0");
	} else if (!strncmp(mode, "bench", 5) && argc == 4) {
		unsigned long cmd = strcmp(mode, "bench-task") ? IOC_NOP : IOC_NOP_TASK;
		double end = now_us() + atof(argv[3]) * 1e6, t0 = now_us();
		long n = 0;
		while (now_us() < end) {
			if (ioctl(fd, cmd, 0) != 0) {
				perror("ioctl(IOC_NOP)");
				return errno;
			}
			n++;
		}
		printf("calls=%ld us_per_call=%.1f\n", n, (now_us() - t0) / n);
	} else {
		fprintf(stderr, "bad mode %s\n", mode);
		return EINVAL;
	}
	return 0;
}
