/*
 * An enable word on a userfaultfd page that is never resolved (issue 19,
 * item 3): every access the daemon makes to it waits in handle_userfault()
 * for as long as this process likes. The kernel's user_events never waits
 * there (user_event_enabler_write pins with FOLL_NOFAULT and faults in from
 * a work item); neither may the daemon make anyone else wait.
 *
 * The userfaultfd is made without UFFD_USER_MODE_ONLY, so faults the kernel
 * takes on behalf of others (process_vm_writev, /proc/<pid>/mem) reach it
 * too: root, or vm.unprivileged_userfaultfd=1.
 *
 * usage: adv_uffd MODE MOUNT NAME
 *   reg     arm a missing-page userfaultfd over a fresh page, print "armed",
 *           then DIAG_IOCSREG NAME with enable_addr in that page (the
 *           daemon's first write of the bit waits there); prints the
 *           ioctl's result if it ever returns
 *   later   DIAG_IOCSREG NAME with enable_addr in an ordinary page, then
 *           drop the page and arm the userfaultfd over it (the next write
 *           of the bit, at an enable, waits there); print "armed" and wait
 *           for a line on stdin
 *   writev  DIAG_IOCSREG NAME (its word in ordinary memory), then a writev
 *           of 300 four-byte iovecs, each on a page of its own, the last on
 *           a page armed as above: FUSE sends the first 256 pages (its page
 *           limit) as one request, and the daemon, looking at the whole
 *           write (fuse/_whole_write.py), reads the last there; print
 *           "armed" first, and the writev's result if it ever returns
 *   round   a bystander's round trip: DIAG_IOCSREG NAME, write 1 to its
 *           enable file, check the bit, write one event, write 0 to enable,
 *           check the bit again; print "round ok"
 *
 * Exits non-zero on any wrong result (2: setup failed, 1: a wrong answer).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "user_events_uapi.h"

#define PAGE 4096UL
/* More iovecs than FUSE's default page limit per request (256). */
#define IOVECS 300

static void die(const char *what)
{
	fprintf(stderr, "adv_uffd: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void wrong(const char *what)
{
	fprintf(stderr, "adv_uffd: %s\n", what);
	exit(1);
}

/* A missing-page userfaultfd over `page`, never read: a fault there waits
 * until this process exits (userfaultfd_release wakes the waiters). */
static void arm(void *page)
{
	int uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		die("userfaultfd");
	struct uffdio_api api = {.api = UFFD_API};
	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		die("UFFDIO_API");
	struct uffdio_register r = {
		.range = {.start = (unsigned long)page, .len = PAGE},
		.mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(uffd, UFFDIO_REGISTER, &r) < 0)
		die("UFFDIO_REGISTER");
}

static int reg(int data, const char *name, void *enable, uint32_t *index)
{
	struct user_reg r = {
		.size = sizeof(r), .enable_bit = 0, .enable_size = 4,
		.enable_addr = (uint64_t)enable, .name_args = (uint64_t)name};
	int rc = ioctl(data, DIAG_IOCSREG, &r);
	if (index)
		*index = r.write_index;
	return rc;
}

static void set_enable(const char *mount, const char *name, const char *value)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/events/user_events/%s/enable", mount, name);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		die(path);
	if (write(fd, value, 1) != 1)
		die("write enable");
	close(fd);
}

static void say(const char *line)
{
	printf("%s\n", line);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: adv_uffd reg|later|writev|round MOUNT NAME\n");
		return 2;
	}
	const char *mode = argv[1], *mount = argv[2], *name = argv[3];
	char path[4096];
	snprintf(path, sizeof(path), "%s/user_events_data", mount);
	int data = open(path, O_RDWR);
	if (data < 0)
		die(path);
	char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		die("mmap");
	char command[256];
	snprintf(command, sizeof(command), "%s u32 a", name);

	if (!strcmp(mode, "reg")) {
		arm(page);
		say("armed");
		int rc = reg(data, command, page, NULL);
		printf("reg rc=%d errno=%s\n", rc, rc < 0 ? strerrorname_np(errno) : "0");
		return 0;
	}
	if (!strcmp(mode, "later")) {
		if (reg(data, command, page, NULL) < 0)
			die("DIAG_IOCSREG");
		if (madvise(page, PAGE, MADV_DONTNEED) < 0)
			die("madvise");
		arm(page);
		say("armed");
		char line[64];
		if (!fgets(line, sizeof(line), stdin))
			die("stdin");
		return 0;
	}
	if (!strcmp(mode, "writev")) {
		uint32_t index;
		if (reg(data, command, page, &index) < 0)
			die("DIAG_IOCSREG");
		char *pages = mmap(NULL, IOVECS * PAGE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pages == MAP_FAILED)
			die("mmap pages");
		static struct iovec io[IOVECS];
		for (int i = 0; i < IOVECS; i++) {
			io[i].iov_base = pages + i * PAGE;
			io[i].iov_len = 4;
		}
		memcpy(pages, &index, 4);
		arm(pages + (IOVECS - 1) * PAGE);
		say("armed");
		ssize_t rc = writev(data, io, IOVECS);
		printf("writev rc=%zd errno=%s\n", rc, rc < 0 ? strerrorname_np(errno) : "0");
		return 0;
	}
	if (!strcmp(mode, "round")) {
		static volatile uint32_t enabled;
		uint32_t index;
		if (reg(data, command, (void *)&enabled, &index) < 0)
			die("DIAG_IOCSREG");
		if (enabled)
			wrong("enabled before the enable");
		set_enable(mount, name, "1");
		if (enabled != 1)
			wrong("bit not set when the enable write returned");
		uint32_t value = 7;
		struct iovec io[2] = {{&index, 4}, {&value, 4}};
		if (writev(data, io, 2) != 8)
			die("writev");
		set_enable(mount, name, "0");
		if (enabled != 0)
			wrong("bit not cleared when the disable write returned");
		say("round ok");
		return 0;
	}
	fprintf(stderr, "adv_uffd: unknown mode %s\n", mode);
	return 2;
}
