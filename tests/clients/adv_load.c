/*
 * Load: PROCS processes of THREADS threads each write RECORDS records of the
 * user event "adv_load u32 p; u32 t; u32 n" (n counting from 0 per thread),
 * each thread through its own registration, checking its enable bit before
 * every write (the event stays enabled throughout: a clear bit is wrong).
 *
 * usage: adv_load TRACEFS_DIR PROCS THREADS RECORDS
 * Prints one line per thread: "p=<p> t=<t> written=<n> failed=<n> bit_wrong=<n>".
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
#include <sys/wait.h>
#include <unistd.h>

#include "user_events_uapi.h"

struct worker {
	int fd;
	uint32_t p, t, records;
	volatile uint32_t word;
	long written, failed, bit_wrong;
};

static void *run(void *arg)
{
	struct worker *w = arg;
	struct user_reg r = {.size = sizeof r, .enable_bit = 0, .enable_size = 4,
			     .enable_addr = (uint64_t)(uintptr_t)&w->word,
			     .name_args = (uint64_t)(uintptr_t)"adv_load u32 p; u32 t; u32 n"};
	if (ioctl(w->fd, DIAG_IOCSREG, &r) < 0) {
		w->failed = w->records;
		return NULL;
	}
	for (uint32_t n = 0; n < w->records; n++) {
		uint32_t payload[4] = {r.write_index, w->p, w->t, n};
		if (!(w->word & 1))
			w->bit_wrong++;
		if (write(w->fd, payload, sizeof payload) == sizeof payload)
			w->written++;
		else
			w->failed++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s TRACEFS_DIR PROCS THREADS RECORDS\n", argv[0]);
		return 2;
	}
	int procs = atoi(argv[2]), threads = atoi(argv[3]);
	uint32_t records = (uint32_t)atol(argv[4]);
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", argv[1]);
	fflush(stdout);
	for (int p = 0; p < procs; p++) {
		if (fork() != 0)
			continue;
		int fd = open(path, O_RDWR);
		if (fd < 0) {
			perror(path);
			_exit(1);
		}
		struct worker *w = calloc(threads, sizeof *w);
		pthread_t *tids = calloc(threads, sizeof *tids);
		for (int t = 0; t < threads; t++) {
			w[t] = (struct worker){.fd = fd, .p = p, .t = t, .records = records};
			pthread_create(&tids[t], NULL, run, &w[t]);
		}
		for (int t = 0; t < threads; t++) {
			pthread_join(tids[t], NULL);
			printf("p=%d t=%d written=%ld failed=%ld bit_wrong=%ld\n", p, t, w[t].written,
			       w[t].failed, w[t].bit_wrong);
		}
		fflush(stdout);
		_exit(0);
	}
	int status, ok = 1;
	while (wait(&status) > 0)
		ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
	return ok ? 0 : 1;
}
