/*
 * The benchmark client: every syscall sequence the suite times or counts.
 * Each mode prints "key=value" lines for bench/_client.py to parse; errors go
 * to stderr with a non-zero exit.
 *
 *   write PATH NPROC SECONDS COUNT MODE
 *       NPROC forked writers, each with its own fd, write until SECONDS have
 *       passed or COUNT records are written (0: no cap).  MODE:
 *         register  DIAG_IOCSREG "bench_write u64 seq; u64 value", then
 *                   writev([u32 write_index][16 B]); the enable bit must be
 *                   set when the writers start
 *         rawv      the same writev with index 0 (trace_marker_raw, floors)
 *         raw1      one write() of the same 20 bytes
 *       Protocol: "ready" once every writer is set up (registered), then one
 *       line on stdin starts them all at once.  Prints rate= (records/s,
 *       summed over writers) and writes=.
 *   loop PATH ITERATIONS
 *       Register "bench_loop u64 seq; u64 value", print "ready", wait for a
 *       line, then ITERATIONS times: if the enable bit is set, writev.  The
 *       loop is bracketed by getppid() calls so that strace shows exactly the
 *       syscalls made inside it.  Prints writes=.
 *   enable DIR NPROC ROUNDS REFPATH
 *       NPROC forked processes register "bench_enable u32 value", each with
 *       its enable word in one MAP_SHARED page of the parent's, so the parent
 *       sees every process's bit with a plain load.  ROUNDS times: write "1"
 *       to the event's enable file, then check every bit (missed= counts
 *       bits still clear after the write returned), write "0" likewise; and
 *       a write of 20 bytes to REFPATH (a reference FUSE round trip).
 *       Prints one enable_ns= and ref_ns= line per round.
 *   forks DIR NPROC ROUNDS
 *       Register "bench_forks u32 value" (a word in .data), then ROUNDS times:
 *       fork NPROC children that wait (they inherit the enabler, and the
 *       daemon has not seen them yet), write "1" to the event's enable file,
 *       read every child's copy of the word (process_vm_readv: missed= counts
 *       bits still clear after the write returned), write "0" likewise, and
 *       let the children go. Prints one enable_ns= line per round.
 *   hold DIR COUNT
 *       Register COUNT enablers of "bench_hold u32 value" from one process
 *       (bits 0-31 of COUNT/32 words), print "ready" and wait until killed.
 *   storm SECONDS RATE
 *       Fork children that exit at once (and reap them), RATE a second at
 *       most, for SECONDS: someone else's fork storm. Prints forks=.
 *   brood DIR COUNT
 *       Register "bench_brood u32 value", fork COUNT children that sleep in
 *       read() of a pipe (they inherit the enabler), print "ready" and keep
 *       them until stdin is closed.
 *   probe PATH
 *       pread() PATH in a loop until stdin is closed; prints reads= and the
 *       longest single read, max_ns=.
 *   register PATH COUNT
 *       Register COUNT distinct events "bench_reg_<i> u32 value" from one
 *       process; prints one ns= line per ioctl and total_ns=, then "ready"
 *       and keeps them registered until stdin is closed.
 *   drain PATH [READS] read 4096-byte pages with O_NONBLOCK until empty, or
 *                      READS times (the floors, whose file never empties)
 *   cat PATH           read 64 KiB chunks until end of file
 *       Both print bytes=, lines= (newlines seen), reads= (read() calls that
 *       returned data), ns= and cpu_ns= (the loop's user + system time: for
 *       the kernel's files, the kernel's own work).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* include/uapi/linux/user_events.h (6.4+) */
struct user_reg {
	uint32_t size;
	uint8_t enable_bit;
	uint8_t enable_size;
	uint16_t flags;
	uint64_t enable_addr;
	uint64_t name_args;
	uint32_t write_index;
} __attribute__((__packed__));

#define DIAG_IOCSREG _IOWR('*', 0, struct user_reg *)

struct payload {
	uint64_t seq;
	uint64_t value;
};

static void die(const char *what)
{
	fprintf(stderr, "client: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t do_register_bit(int fd, const char *name_args, volatile uint32_t *word, int bit)
{
	struct user_reg reg = {
		.size = sizeof reg,
		.enable_bit = (uint8_t)bit,
		.enable_size = sizeof *word,
		.enable_addr = (uint64_t)(uintptr_t)word,
		.name_args = (uint64_t)(uintptr_t)name_args,
	};
	if (ioctl(fd, DIAG_IOCSREG, &reg))
		die("DIAG_IOCSREG");
	return reg.write_index;
}

static uint32_t do_register(int fd, const char *name_args, volatile uint32_t *word)
{
	return do_register_bit(fd, name_args, word, 0);
}

/* Wait for the orchestrator's go line. */
static void await_go(void)
{
	char line[16];
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		die("no go line on stdin");
}

static volatile uint32_t enabled;

struct writer_result {
	uint64_t writes;
	uint64_t ns;
};

static struct writer_result run_writer(const char *path, const char *mode, double seconds,
				       uint64_t cap, int ready_fd, int go_fd)
{
	int reg = !strcmp(mode, "register");
	int fd = open(path, reg ? O_RDWR : O_WRONLY);
	if (fd < 0)
		die(path);
	uint32_t index = reg ? do_register(fd, "bench_write u64 seq; u64 value", &enabled) : 0;
	char one = 1, byte;
	if (write(ready_fd, &one, 1) != 1)
		die("ready pipe");
	if (read(go_fd, &byte, 1) != 0)
		die("go pipe");
	if (reg && !(enabled & 1)) {
		fprintf(stderr, "client: enable bit not set when writing started\n");
		exit(1);
	}
	struct payload p = { .seq = 0, .value = 42 };
	struct iovec io[2] = { { &index, sizeof index }, { &p, sizeof p } };
	char flat[sizeof index + sizeof p];
	memcpy(flat, &index, sizeof index);
	int single = !strcmp(mode, "raw1");
	uint64_t budget = (uint64_t)(seconds * 1e9), start = now_ns(), elapsed = 0;
	while ((!cap || p.seq < cap) && elapsed < budget) {
		ssize_t n;
		if (single) {
			memcpy(flat + sizeof index, &p, sizeof p);
			n = write(fd, flat, sizeof flat);
		} else {
			n = writev(fd, io, 2);
		}
		if (n != (ssize_t)(sizeof index + sizeof p))
			die("write");
		p.seq++;
		elapsed = now_ns() - start;
	}
	return (struct writer_result){ p.seq, elapsed };
}

static int cmd_write(char **argv)
{
	const char *path = argv[0], *mode = argv[4];
	int nproc = atoi(argv[1]);
	double seconds = atof(argv[2]);
	uint64_t cap = strtoull(argv[3], NULL, 10);
	int ready[2], go[2], results[2];
	if (pipe(ready) || pipe(go) || pipe(results))
		die("pipe");
	for (int i = 0; i < nproc; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(go[1]);
			struct writer_result r = run_writer(path, mode, seconds, cap, ready[1], go[0]);
			if (write(results[1], &r, sizeof r) != sizeof r)
				die("results pipe");
			_exit(0);
		}
	}
	/* Only the writers hold these ends now: a read sees EOF if they all die. */
	close(go[0]);
	close(ready[1]);
	close(results[1]);
	for (int i = 0; i < nproc; i++) {
		char byte;
		if (read(ready[0], &byte, 1) != 1) {
			fprintf(stderr, "client: a writer failed to start\n");
			return 1;
		}
	}
	await_go();
	close(go[1]); /* every writer's read() returns 0 at once */
	double rate = 0;
	uint64_t writes = 0;
	for (int i = 0; i < nproc; i++) {
		struct writer_result r;
		if (read(results[0], &r, sizeof r) != sizeof r) {
			fprintf(stderr, "client: a writer failed\n");
			return 1;
		}
		rate += r.writes / (r.ns / 1e9);
		writes += r.writes;
	}
	while (wait(NULL) > 0)
		;
	printf("rate=%.1f\nwrites=%llu\n", rate, (unsigned long long)writes);
	return 0;
}

static int cmd_loop(char **argv)
{
	long iterations = atol(argv[1]);
	int fd = open(argv[0], O_RDWR);
	if (fd < 0)
		die(argv[0]);
	uint32_t index = do_register(fd, "bench_loop u64 seq; u64 value", &enabled);
	await_go();
	struct payload p = { .seq = 0, .value = 42 };
	struct iovec io[2] = { { &index, sizeof index }, { &p, sizeof p } };
	long writes = 0;
	getppid(); /* marker: the loop starts */
	for (long i = 0; i < iterations; i++) {
		if (enabled & 1) {
			p.seq = (uint64_t)i;
			if (writev(fd, io, 2) < 0)
				die("writev");
			writes++;
		}
	}
	getppid(); /* marker: the loop ended */
	printf("writes=%ld\n", writes);
	return 0;
}

static void write_str(int fd, const char *s, size_t len, const char *what)
{
	if (pwrite(fd, s, len, 0) != (ssize_t)len)
		die(what);
}

static int cmd_enable(char **argv)
{
	const char *dir = argv[0];
	int nproc = atoi(argv[1]), rounds = atoi(argv[2]);
	char path[4096];
	volatile uint32_t *words = mmap(NULL, (size_t)nproc * sizeof *words, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (words == MAP_FAILED)
		die("mmap");
	int ready[2], done[2];
	if (pipe(ready) || pipe(done))
		die("pipe");
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	for (int i = 0; i < nproc; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(done[1]);
			int fd = open(path, O_RDWR);
			if (fd < 0)
				die(path);
			do_register(fd, "bench_enable u32 value", &words[i]);
			char one = 1, byte;
			if (write(ready[1], &one, 1) != 1)
				die("ready pipe");
			/* Stay registered until the parent is done. */
			if (read(done[0], &byte, 1) < 0)
				die("done pipe");
			_exit(0);
		}
	}
	close(done[0]);
	close(ready[1]);
	for (int i = 0; i < nproc; i++) {
		char byte;
		if (read(ready[0], &byte, 1) != 1) {
			fprintf(stderr, "client: a process failed to register\n");
			return 1;
		}
	}
	snprintf(path, sizeof path, "%s/events/user_events/bench_enable/enable", dir);
	int efd = open(path, O_WRONLY);
	if (efd < 0)
		die(path);
	int rfd = open(argv[3], O_WRONLY);
	if (rfd < 0)
		die(argv[3]);
	char ref[20] = { 0 };
	long missed = 0;
	for (int r = 0; r < rounds; r++) {
		uint64_t t0 = now_ns();
		write_str(efd, "1", 1, "enable");
		uint64_t t1 = now_ns();
		for (int i = 0; i < nproc; i++)
			missed += !(words[i] & 1);
		write_str(efd, "0", 1, "disable");
		for (int i = 0; i < nproc; i++)
			missed += words[i] & 1;
		uint64_t t2 = now_ns();
		if (write(rfd, ref, sizeof ref) != sizeof ref) /* a stream: no pwrite */
			die("reference write");
		uint64_t t3 = now_ns();
		printf("enable_ns=%llu\nref_ns=%llu\n", (unsigned long long)(t1 - t0),
		       (unsigned long long)(t3 - t2));
	}
	printf("missed=%ld\n", missed);
	fflush(stdout);
	close(done[1]);
	while (wait(NULL) > 0)
		;
	return 0;
}

static volatile uint32_t forks_word;

/* Each child's copy of forks_word, read from the parent. */
static uint32_t child_word(pid_t pid)
{
	uint32_t value = 0;
	struct iovec local = { &value, sizeof value };
	struct iovec remote = { (void *)&forks_word, sizeof forks_word };
	if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof value)
		die("process_vm_readv");
	return value;
}

static int cmd_forks(char **argv)
{
	const char *dir = argv[0];
	int nproc = atoi(argv[1]), rounds = atoi(argv[2]);
	char path[4096];
	snprintf(path, sizeof path, "%s/user_events_data", dir);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die(path);
	do_register(fd, "bench_forks u32 value", &forks_word);
	snprintf(path, sizeof path, "%s/events/user_events/bench_forks/enable", dir);
	int efd = open(path, O_WRONLY);
	if (efd < 0)
		die(path);
	pid_t *pids = calloc((size_t)nproc, sizeof *pids);
	if (!pids)
		die("calloc");
	long missed = 0;
	for (int r = 0; r < rounds; r++) {
		int done[2];
		if (pipe(done))
			die("pipe");
		for (int i = 0; i < nproc; i++) {
			pids[i] = fork();
			if (pids[i] < 0)
				die("fork");
			if (pids[i] == 0) {
				char byte;
				close(done[1]);
				_exit(read(done[0], &byte, 1) < 0);
			}
		}
		close(done[0]);
		uint64_t t0 = now_ns();
		write_str(efd, "1", 1, "enable");
		uint64_t t1 = now_ns();
		for (int i = 0; i < nproc; i++)
			missed += !(child_word(pids[i]) & 1);
		write_str(efd, "0", 1, "disable");
		for (int i = 0; i < nproc; i++)
			missed += child_word(pids[i]) & 1;
		close(done[1]);
		for (int i = 0; i < nproc; i++)
			waitpid(pids[i], NULL, 0);
		printf("enable_ns=%llu\n", (unsigned long long)(t1 - t0));
	}
	printf("missed=%ld\n", missed);
	return 0;
}

_Noreturn static void cmd_hold(char **argv)
{
	int count = atoi(argv[1]);
	char path[4096];
	snprintf(path, sizeof path, "%s/user_events_data", argv[0]);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die(path);
	volatile uint32_t *words = calloc((size_t)count / 32 + 1, sizeof *words);
	if (!words)
		die("calloc");
	for (int i = 0; i < count; i++)
		do_register_bit(fd, "bench_hold u32 value", &words[i / 32], i % 32);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int cmd_storm(char **argv)
{
	double seconds = atof(argv[0]);
	uint64_t rate = strtoull(argv[1], NULL, 10);
	uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9), forks = 0;
	for (uint64_t t = start; t < end; t = now_ns()) {
		/* Pace to the rate: never ahead of forks/rate seconds since the start. */
		uint64_t due = start + forks * 1000000000u / rate;
		if (t < due) {
			struct timespec pause = { 0, (long)(due - t) };
			nanosleep(&pause, NULL);
			continue;
		}
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(0);
		waitpid(pid, NULL, 0);
		forks++;
	}
	printf("forks=%llu\n", (unsigned long long)forks);
	return 0;
}

static volatile uint32_t brood_word;

static int cmd_brood(char **argv)
{
	int count = atoi(argv[1]);
	char path[4096];
	snprintf(path, sizeof path, "%s/user_events_data", argv[0]);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die(path);
	do_register(fd, "bench_brood u32 value", &brood_word);
	int done[2];
	if (pipe(done))
		die("pipe");
	pid_t *pids = calloc((size_t)count, sizeof *pids);
	if (!pids)
		die("calloc");
	for (int i = 0; i < count; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork");
		if (pids[i] == 0) {
			char byte;
			close(done[1]);
			_exit(read(done[0], &byte, 1) < 0);
		}
	}
	close(done[0]);
	printf("ready\n");
	fflush(stdout);
	while (getchar() != EOF)
		;
	close(done[1]);
	for (int i = 0; i < count; i++)
		waitpid(pids[i], NULL, 0);
	return 0;
}

static int cmd_probe(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	/* Until stdin is closed: the orchestrator decides when the teardown is over. */
	int flags = fcntl(0, F_GETFL);
	fcntl(0, F_SETFL, flags | O_NONBLOCK);
	uint64_t reads = 0, max_ns = 0;
	for (;;) {
		char byte;
		if (read(0, &byte, 1) == 0)
			break;
		uint64_t t0 = now_ns();
		if (pread(fd, buf, sizeof buf, 0) < 0)
			die("pread");
		uint64_t ns = now_ns() - t0;
		max_ns = ns > max_ns ? ns : max_ns;
		reads++;
	}
	printf("reads=%llu\nmax_ns=%llu\n", (unsigned long long)reads, (unsigned long long)max_ns);
	return 0;
}

static int cmd_register(char **argv)
{
	int count = atoi(argv[1]);
	int fd = open(argv[0], O_RDWR);
	if (fd < 0)
		die(argv[0]);
	volatile uint32_t *words = calloc((size_t)count, sizeof *words);
	if (!words)
		die("calloc");
	char name[64];
	uint64_t start = now_ns();
	for (int i = 0; i < count; i++) {
		snprintf(name, sizeof name, "bench_reg_%d u32 value", i);
		uint64_t t0 = now_ns();
		do_register(fd, name, &words[i]);
		printf("ns=%llu\n", (unsigned long long)(now_ns() - t0));
	}
	printf("total_ns=%llu\nready\n", (unsigned long long)(now_ns() - start));
	fflush(stdout);
	/* Hold the registrations while the daemon's memory is measured. */
	while (getchar() != EOF)
		;
	return 0;
}

/* The process's user + system time, exact (not rusage's tick-based split). */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmd_read(const char *path, int nonblock, size_t chunk, uint64_t max_reads)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY | (nonblock ? O_NONBLOCK : 0));
	if (fd < 0)
		die(path);
	uint64_t bytes = 0, lines = 0, reads = 0, cpu = cpu_ns(), start = now_ns();
	while (!max_reads || reads < max_reads) {
		ssize_t n = read(fd, buf, chunk);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			die("read");
		if (n == 0)
			break;
		reads++;
		bytes += (uint64_t)n;
		for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))); p++)
			lines++;
	}
	uint64_t ns = now_ns() - start;
	cpu = cpu_ns() - cpu;
	printf("bytes=%llu\nlines=%llu\nreads=%llu\nns=%llu\ncpu_ns=%llu\n",
	       (unsigned long long)bytes, (unsigned long long)lines, (unsigned long long)reads,
	       (unsigned long long)ns, (unsigned long long)cpu);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "write") && argc == 7)
		return cmd_write(argv + 2);
	if (!strcmp(mode, "loop") && argc == 4)
		return cmd_loop(argv + 2);
	if (!strcmp(mode, "enable") && argc == 6)
		return cmd_enable(argv + 2);
	if (!strcmp(mode, "register") && argc == 4)
		return cmd_register(argv + 2);
	if (!strcmp(mode, "forks") && argc == 5)
		return cmd_forks(argv + 2);
	if (!strcmp(mode, "hold") && argc == 4)
		cmd_hold(argv + 2);
	if (!strcmp(mode, "storm") && argc == 4)
		return cmd_storm(argv + 2);
	if (!strcmp(mode, "brood") && argc == 4)
		return cmd_brood(argv + 2);
	if (!strcmp(mode, "probe") && argc == 3)
		return cmd_probe(argv[2]);
	if (!strcmp(mode, "drain") && (argc == 3 || argc == 4)) /* trace_pipe_raw: whole pages */
		return cmd_read(argv[2], 1, 4096, argc == 4 ? strtoull(argv[3], NULL, 10) : 0);
	if (!strcmp(mode, "cat") && argc == 3)
		return cmd_read(argv[2], 0, 65536, 0);
	fprintf(stderr, "usage: see the comment at the top of bench/client.c\n");
	return 2;
}
