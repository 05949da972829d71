/*
 * Mappings of trace_pipe_raw the kernel refuses (ring_buffer_map: private,
 * writable; meta page size): what a client sees.  On the kernel mmap() fails;
 * through FUSE mmap() never reaches the daemon, so the first touch of the
 * mapping faults instead (SIGBUS).  Prints "case: mmap=<result> touch=<result>".
 *
 * usage: rb_mmap_refusals TRACEFS_DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)

static sigjmp_buf fault;

static void on_sigbus(int sig)
{
	siglongjmp(fault, sig);
}

static void try_map(const char *name, int fd, int prot, int flags)
{
	void *p = mmap(NULL, 4096, prot, flags, fd, 0);
	if (p == MAP_FAILED) {
		printf("%s: mmap=%s\n", name, strerrorname_np(errno));
		return;
	}
	volatile unsigned char c = 0;
	if (sigsetjmp(fault, 1) == 0) {
		c = *(volatile unsigned char *)p;
		printf("%s: mmap=0 touch=ok\n", name);
	} else {
		printf("%s: mmap=0 touch=SIGBUS\n", name);
	}
	(void)c;
	printf("%s: get_reader=%s\n", name,
	       ioctl(fd, TRACE_MMAP_IOCTL_GET_READER) ? strerrorname_np(errno) : "0");
	munmap(p, 4096);
}

int main(int argc, char **argv)
{
	char path[512];
	if (argc < 2) {
		fprintf(stderr, "usage: %s TRACEFS_DIR\n", argv[0]);
		return 2;
	}
	signal(SIGBUS, on_sigbus);
	snprintf(path, sizeof path, "%s/per_cpu/cpu0/trace_pipe_raw", argv[1]);
	/* O_NONBLOCK: a blocking GET_READER first waits for buffer_percent of data */
	int ro = open(path, O_RDONLY | O_NONBLOCK), rw = open(path, O_RDWR | O_NONBLOCK);
	if (ro < 0 || rw < 0) {
		perror(path);
		return 1;
	}
	try_map("private", ro, PROT_READ, MAP_PRIVATE);
	try_map("shared_write", rw, PROT_READ | PROT_WRITE, MAP_SHARED);
	try_map("shared_read", ro, PROT_READ, MAP_SHARED);
	return 0;
}
