/*
 * Points the daemon's accesses to this process's memory at pages of a mapping
 * of the mount's own files that nobody has touched yet (issue 11, item 1).
 * Such an access faults, and the fault is a FUSE read sent to the daemon
 * that is making the access.
 *
 * usage: fault_mem MODE MOUNT FILE
 *   FILE (relative to MOUNT, or absolute: a file elsewhere) is mapped
 *   (read-only, shared) over the second page of a two-page
 *   area whose first page is ordinary memory; "at the mapping" below means
 *   at the start of that second page, "across" means 8 bytes before it, so
 *   that the first 8 bytes (which the kernel copies in for a restricted
 *   ioctl) are ordinary memory and the rest lies in the mapping.
 *
 *   reg-name       DIAG_IOCSREG, name_args at the mapping
 *   reg-struct     DIAG_IOCSREG, struct user_reg across
 *   reg-struct-after OTHER
 *                  as reg-struct, but the first page is a mapping of the
 *                  file OTHER (another filesystem's, which answers: the
 *                  struct's first 8 bytes come from it)
 *   reg-enable     DIAG_IOCSREG, enable_addr at the mapping
 *   reg-5.18       DIAG_IOCSREG, 5.18 struct user_reg (24 bytes) across
 *   reg-6.1        DIAG_IOCSREG, 6.1 struct user_reg (20 bytes) across
 *   del-name       DIAG_IOCSDEL, the name across
 *   unreg-struct   DIAG_IOCSUNREG, struct user_unreg across
 *   remap NAME     register NAME (enable bit in ordinary memory), then map
 *                  FILE over the enable word's page; print "ready" and wait
 *                  for a line on stdin before unregistering
 *   fork NAME      as remap, then fork (the child waits to be killed);
 *                  print "forked PID" and wait for a line on stdin
 *   reg-late       as reg-name, but print "ready" and wait for a line on
 *                  stdin between the mapping and the ioctl
 *   touch-late     map FILE, print "ready" and wait for a line on stdin,
 *                  then read the mapping's first byte (a page-cache fill,
 *                  from this process): print "touch-late rc=0 errno=0", or
 *                  die of SIGBUS if the fill is refused
 *
 * Prints "<op> rc=<result> errno=<name>" per ioctl and exits 0 unless the
 * setup itself failed (exit 2).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user_events_uapi.h"

#define PAGE 4096UL

static void die(const char *what)
{
	fprintf(stderr, "fault_mem: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void report(const char *op, int rc)
{
	printf("%s rc=%d errno=%s\n", op, rc,
	       rc < 0 ? strerrorname_np(errno) : "0");
	fflush(stdout);
}

/* Maps `file` (under `mount`, or an absolute path) over `page`, never
 * touching it. */
static void map_over(const char *mount, const char *file, char *page)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", file[0] == '/' ? "" : mount, file);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	if (mmap(page, PAGE, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) != page)
		die("mmap");
	close(fd);
}

static int reg(int data, const char *name, uint64_t enable_addr)
{
	struct user_reg r = {
		.size = sizeof(r), .enable_bit = 0, .enable_size = 4,
		.enable_addr = enable_addr, .name_args = (uint64_t)name};
	return ioctl(data, DIAG_IOCSREG, &r);
}

static void wait_line(void)
{
	char line[64];
	if (!fgets(line, sizeof(line), stdin))
		die("stdin");
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: fault_mem MODE MOUNT FILE [NAME]\n");
		return 2;
	}
	const char *mode = argv[1], *mount = argv[2], *file = argv[3];
	char path[4096];
	snprintf(path, sizeof(path), "%s/user_events_data", mount);
	int data = open(path, O_RDWR);
	if (data < 0)
		die(path);
	char *area = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		die("mmap area");
	char *mapped = area + PAGE, *across = mapped - 8;
	static uint32_t word;  /* an enable word in ordinary memory */
	memset(area, 0, PAGE);

	if (!strcmp(mode, "reg-name")) {
		map_over(mount, file, mapped);
		report(mode, reg(data, mapped, (uint64_t)&word));
	} else if (!strcmp(mode, "reg-late")) {
		map_over(mount, file, mapped);
		printf("ready\n");
		fflush(stdout);
		wait_line();
		report(mode, reg(data, mapped, (uint64_t)&word));
	} else if (!strcmp(mode, "touch-late")) {
		map_over(mount, file, mapped);
		printf("ready\n");
		fflush(stdout);
		wait_line();
		report(mode, *(volatile char *)mapped & 0);
	} else if (!strcmp(mode, "reg-struct-after") && argc == 5) {
		map_over(mount, argv[4], area);
		map_over(mount, file, mapped);
		report(mode, ioctl(data, DIAG_IOCSREG, across));
	} else if (!strcmp(mode, "reg-struct")) {
		*(uint32_t *)across = sizeof(struct user_reg);
		across[5] = 4;  /* enable_size; the rest lies in the mapping */
		map_over(mount, file, mapped);
		report(mode, ioctl(data, DIAG_IOCSREG, across));
	} else if (!strcmp(mode, "reg-enable")) {
		map_over(mount, file, mapped);
		report(mode, reg(data, "fault_enable u32 a", (uint64_t)mapped));
	} else if (!strcmp(mode, "reg-5.18") || !strcmp(mode, "reg-6.1")) {
		*(uint32_t *)across = !strcmp(mode, "reg-5.18") ? 24 : 20;
		map_over(mount, file, mapped);
		report(mode, ioctl(data, DIAG_IOCSREG, across));
	} else if (!strcmp(mode, "del-name")) {
		memcpy(across, "fault_de", 8);  /* the name goes on in the mapping */
		map_over(mount, file, mapped);
		report(mode, ioctl(data, DIAG_IOCSDEL, across));
	} else if (!strcmp(mode, "unreg-struct")) {
		*(uint32_t *)across = sizeof(struct user_unreg);
		map_over(mount, file, mapped);
		report(mode, ioctl(data, DIAG_IOCSUNREG, across));
	} else if ((!strcmp(mode, "remap") || !strcmp(mode, "fork")) && argc > 4) {
		uint32_t *enable = (uint32_t *)mapped;
		report("reg", reg(data, argv[4], (uint64_t)enable));
		map_over(mount, file, mapped);
		pid_t child = 0;
		if (!strcmp(mode, "fork")) {
			child = fork();
			if (child < 0)
				die("fork");
			if (child == 0) {
				for (;;)
					pause();  /* until the parent kills it */
			}
			printf("forked %d\n", child);
		} else {
			printf("ready\n");
		}
		fflush(stdout);
		wait_line();
		if (child > 0) {
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
		}
		/* The enable word's page is the mapping now: the kernel's answer
		 * to an unregistration is to clear the bit there. */
		struct user_unreg u = {.size = sizeof(u),
				       .disable_addr = (uint64_t)enable};
		report("unreg", ioctl(data, DIAG_IOCSUNREG, &u));
	} else {
		fprintf(stderr, "fault_mem: unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
