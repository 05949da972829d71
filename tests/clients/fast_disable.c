/*
 * A disable is seen by every write that starts after write(enable, "0")
 * returns.  Writer threads write an enabled event as fast as they can, each
 * write's payload the CLOCK_MONOTONIC time it started; the main thread
 * disables the event ROUNDS times, noting when each write(enable, "0")
 * returned, and re-enables it.
 *
 * usage: fast_disable TRACEFS_DIR THREADS ROUNDS
 * Prints "late N" (writes that started after a disable returned and before
 * the next enable, yet succeeded: must be 0), "writes N", "ebadf N", and a
 * line "window START END" per round (the test checks the buffer holds no
 * record started inside a window).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "user_events_uapi.h"

#define MAX_ROUNDS 64

static const char *dir;
static int data_fd;
static uint32_t word;
static volatile int stop;
static uint64_t windows[MAX_ROUNDS][2];  /* [disable returned, enable began) */
static volatile int nwindows;
static unsigned long long writes, ebadf, late;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void set_enable(const char *value)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/events/user_events/fast_disable/enable", dir);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, value, 1) != 1) {
		perror(path);
		exit(2);
	}
	close(fd);
}

static void *writer(void *unused)
{
	(void)unused;
	int32_t index = 0;
	unsigned long long mine = 0, bad = 0, mylate = 0;
	while (!stop) {
		uint64_t started = now();
		struct iovec iov[2] = {{&index, sizeof(index)}, {&started, sizeof(started)}};
		ssize_t rc = writev(data_fd, iov, 2);
		mine++;
		if (rc < 0) {
			if (errno != EBADF) {
				perror("writev");
				exit(2);
			}
			bad++;
			continue;
		}
		/* A success must not have started inside a closed window. */
		int n = nwindows;
		for (int i = 0; i < n; i++)
			if (started > windows[i][0] &&
			    (windows[i][1] == 0 || started < windows[i][1]))
				mylate++;
	}
	pthread_mutex_lock(&count_lock);
	writes += mine;
	ebadf += bad;
	late += mylate;
	pthread_mutex_unlock(&count_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: fast_disable TRACEFS_DIR THREADS ROUNDS\n");
		return 2;
	}
	dir = argv[1];
	int threads = atoi(argv[2]), rounds = atoi(argv[3]);
	if (rounds > MAX_ROUNDS)
		rounds = MAX_ROUNDS;
	char path[4096];
	snprintf(path, sizeof(path), "%s/user_events_data", dir);
	data_fd = open(path, O_RDWR);
	struct user_reg reg = {.size = sizeof(reg), .enable_size = 4,
			       .enable_addr = (uint64_t)&word,
			       .name_args = (uint64_t)"fast_disable u64 started"};
	if (data_fd < 0 || ioctl(data_fd, DIAG_IOCSREG, &reg)) {
		perror("register");
		return 2;
	}
	set_enable("1");
	pthread_t th[16];
	for (int i = 0; i < threads && i < 16; i++)
		pthread_create(&th[i], NULL, writer, NULL);
	for (int r = 0; r < rounds; r++) {
		usleep(5000);
		set_enable("0");
		windows[r][0] = now();
		windows[r][1] = 0;
		__atomic_store_n(&nwindows, r + 1, __ATOMIC_RELEASE);
		usleep(5000);
		windows[r][1] = now();
		set_enable("1");
	}
	stop = 1;
	for (int i = 0; i < threads && i < 16; i++)
		pthread_join(th[i], NULL);
	printf("late %llu\nwrites %llu\nebadf %llu\n", late, writes, ebadf);
	for (int r = 0; r < rounds; r++)
		printf("window %llu %llu\n", (unsigned long long)windows[r][0],
		       (unsigned long long)windows[r][1]);
	return 0;
}
