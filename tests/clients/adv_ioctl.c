/*
 * ioctl numbers a file does not know, with good and bad arguments: what
 * each returns.  One line per case: "<case>: <0|errno name>[ value=<n>]".
 *
 * usage: adv_ioctl FILE
 *
 * The cases differ in what the number says about the argument (_IOC_DIR,
 * _IOC_SIZE): FUSE copies _IOC_SIZE bytes in for _IOC_WRITE numbers before
 * the daemon sees the request (fs/fuse/ioctl.c, fuse_do_ioctl), the kernel's
 * own files look at the number first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "user_events_uapi.h"

static void report(const char *name, long ret, int value, int show_value)
{
	if (ret < 0)
		printf("%s: %s\n", name, strerrorname_np(errno));
	else if (show_value)
		printf("%s: %ld value=%d\n", name, ret, value);
	else
		printf("%s: %ld\n", name, ret);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	int fd = open(argv[1], O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	/* A page that was mapped and is no more: an argument nobody can read. */
	unsigned char *gone = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(gone, 4096);
	static unsigned char big[1 << 14];
	int value = -1;

	report("none", ioctl(fd, _IO('*', 9), 0), 0, 0);
	report("write_unreadable", ioctl(fd, _IOW('*', 9, char *), gone), 0, 0);
	report("write_readable", ioctl(fd, _IOW('*', 9, char *), big), 0, 0);
	report("read_unwritable", ioctl(fd, _IOR('*', 9, char *), gone), 0, 0);
	report("all_ones_unreadable", ioctl(fd, 0xffffffffu, gone), 0, 0);
	report("all_ones_null", ioctl(fd, 0xffffffffu, NULL), 0, 0);
	report("all_ones_readable", ioctl(fd, 0xffffffffu, big), 0, 0);
	report("reg_unreadable", ioctl(fd, DIAG_IOCSREG, gone), 0, 0);
	long ret = ioctl(fd, FIONREAD, &value);
	report("fionread", ret, value, 1);
	return 0;
}
