/*
 * The mainline (6.4+) user_events flow, against a tracefs directory:
 * register -> bit clear -> enable -> bit set -> writev -> disable -> EBADF
 * -> unregister -> close -> event deleted.  Prints one line per step;
 * exits with the errno of the first unexpected failure.
 *
 * The uapi comes from user_events_uapi.h (spelled out, not the system
 * header) so the test pins the ABI.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;
static volatile uint32_t enabled = 0x5a5a0000;

#define CHECK(cond, what) do { if (!(cond)) { int e = errno; \
	printf("FAIL %s: %s (errno %d)\n", what, strerror(e), e); exit(e ? e : 1); } } while (0)

static void write_file(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0, path);
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), path);
	close(fd);
}

int main(int argc, char **argv)
{
	char path[512];
	if (argc < 2) {
		fprintf(stderr, "usage: %s TRACEFS_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0, "open user_events_data");

	struct user_reg reg = {0};
	reg.size = sizeof reg;
	reg.enable_bit = 31;
	reg.enable_size = sizeof(enabled);
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.name_args = (uint64_t)(uintptr_t)"flow_test u32 count; char[16] msg";
	reg.write_index = 0xdeadbeef;
	CHECK(ioctl(fd, DIAG_IOCSREG, &reg) == 0, "DIAG_IOCSREG");
	printf("registered index=%u size=%u bit=%u enabled=%#x\n", reg.write_index, reg.size,
	       reg.enable_bit, enabled);

	write_file("events/user_events/flow_test/enable", "1");
	printf("enabled=%#x\n", enabled);

	uint32_t count = 42;
	char msg[16] = "hello";
	struct iovec io[3] = {
		{ &reg.write_index, sizeof reg.write_index },
		{ &count, sizeof count },
		{ msg, sizeof msg },
	};
	ssize_t n = writev(fd, io, 3);
	CHECK(n == 24, "writev while enabled");
	printf("writev=%zd\n", n);

	write_file("events/user_events/flow_test/enable", "0");
	printf("disabled enabled=%#x\n", enabled);
	n = writev(fd, io, 3);
	printf("writev disabled=%zd errno=%d\n", n, n < 0 ? errno : 0);

	struct user_unreg unreg = {0};
	unreg.size = sizeof unreg;
	unreg.disable_bit = 31;
	unreg.disable_addr = (uint64_t)(uintptr_t)&enabled;
	CHECK(ioctl(fd, DIAG_IOCSUNREG, &unreg) == 0, "DIAG_IOCSUNREG");
	printf("unregistered enabled=%#x\n", enabled);
	close(fd);

	/* The kernel deletes from a work item a few ms later (its selftests
	 * poll too); tracefs-fuse at once.  Wait up to 1 s. */
	snprintf(path, sizeof path, "%s/events/user_events/flow_test", dir);
	struct timespec pause = {0, 1000000};
	int waited = 0;
	while (access(path, F_OK) == 0 && waited++ < 1000)
		nanosleep(&pause, NULL);
	printf("after close: %s\n", access(path, F_OK) == 0 ? "present" : "deleted");
	return 0;
}
