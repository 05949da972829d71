/*
 * Enable bits of one word written from two sides at once: the kernel sets and
 * clears each bit atomically (set_bit/clear_bit on the pinned page), so a bit
 * never loses its value to another bit's update.
 *
 *   ue_shared_word DIR ROUNDS
 *
 * Bit 0 of a word is "sw_b"'s. A second thread toggles sw_b (writes 1 and 0
 * to its enable file) and after each write watches bit 0 keep the value just
 * written, while the main thread registers and unregisters "sw_a" at bits 1
 * to 7 of the same word (each a write of the bit: its registration sets it
 * as sw_a is, its unregistration clears it). A bit 0 that changes under the
 * watcher is an update lost to another bit's read-modify-write.
 *
 * Prints "ok <check>" per check; the first wrong result prints
 * "FAIL <check>: ..." and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "user_events_uapi.h"

static const char *dir;
static int rounds;
static volatile uint32_t word;
static volatile int failed;

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	exit(1);
}

static void reg(int fd, const char *command, int bit)
{
	struct user_reg r = {0};
	r.size = sizeof r;
	r.enable_bit = bit;
	r.enable_size = 4;
	r.enable_addr = (uint64_t)(uintptr_t)&word;
	r.name_args = (uint64_t)(uintptr_t)command;
	if (ioctl(fd, DIAG_IOCSREG, &r) != 0)
		die(command);
}

static void unreg(int fd, int bit)
{
	struct user_unreg u = {0};
	u.size = sizeof u;
	u.disable_bit = bit;
	u.disable_addr = (uint64_t)(uintptr_t)&word;
	if (ioctl(fd, DIAG_IOCSUNREG, &u) != 0)
		die("unregister");
}

static void *toggle(void *unused)
{
	(void)unused;
	char path[512];
	snprintf(path, sizeof path, "%s/events/user_events/sw_b/enable", dir);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		die("open sw_b/enable");
	for (int i = 0; i < rounds && !failed; i++) {
		uint32_t on = i & 1;
		if (pwrite(fd, on ? "1" : "0", 1, 0) != 1)
			die("write sw_b/enable");
		for (int look = 0; look < 2000; look++) {
			if ((word & 1) != on) {
				printf("FAIL bit 0 keeps its value: %u after writing %u (round %d, look %d)\n",
				       word & 1, on, i, look);
				failed = 1;
				break;
			}
		}
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s DIR ROUNDS\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	rounds = atoi(argv[2]);
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	reg(fd, "sw_b u32 v", 0);
	reg(fd, "sw_a u32 v", 1);  /* sw_a exists while the loop re-registers it */
	pthread_t t;
	if (pthread_create(&t, NULL, toggle, NULL) != 0)
		die("pthread_create");
	int registrations = 0;
	/* Until the toggler is done: pthread_tryjoin_np says so (EBUSY before). */
	while (pthread_tryjoin_np(t, NULL) == EBUSY) {
		int bit = 2 + registrations % 6;
		reg(fd, "sw_a u32 v", bit);
		unreg(fd, bit);
		registrations++;
	}
	if (failed)
		return 1;
	printf("ok bit 0 kept every value written beside %s registrations\n",
	       registrations ? "other bits'" : "no");
	return registrations ? 0 : 1;
}
