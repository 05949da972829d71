// Concurrent direct writes, or a write loop for benchmarks.
//
// usage: bridge_pwrite parallel FILE N   N threads, own fd each, one 16-byte
//                                        pwrite at offset 0; prints "done=N"
//        bridge_pwrite bench FILE SECONDS
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static const char record[16] = "0123456789abcdef";

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *one_write(void *unused)
{
	(void)unused;
	int fd = open(path, O_WRONLY);
	if (fd < 0 || pwrite(fd, record, sizeof(record), 0) != sizeof(record)) {
		perror(path);
		exit(errno);
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s parallel|bench FILE N|SECONDS\n", argv[0]);
		return EINVAL;
	}
	path = argv[2];
	if (!strcmp(argv[1], "parallel")) {
		int n = atoi(argv[3]);
		pthread_t t[16];
		for (int i = 0; i < n && i < 16; i++)
			pthread_create(&t[i], NULL, one_write, NULL);
		for (int i = 0; i < n && i < 16; i++)
			pthread_join(t[i], NULL);
		printf("done=%d\n", n);
		return 0;
	}
	int fd = open(path, O_WRONLY);
	if (fd < 0) {
		perror(path);
		return errno;
	}
	double t0 = now_us(), end = t0 + atof(argv[3]) * 1e6;
	long n = 0;
	while (now_us() < end) {
		if (write(fd, record, sizeof(record)) != sizeof(record)) {
			perror("write");
			return errno;
		}
		n++;
	}
	printf("writes=%ld us_per_write=%.1f\n", n, (now_us() - t0) / n);
	return 0;
}
