// link: -ltracefs -ltraceevent
// cflags: -I/usr/include/tracefs -I/usr/include/traceevent
/*
 * A trace reader built the way tools build them, on Debian's libtracefs and
 * libtraceevent: tracefs_set_tracing_dir() (no /proc/mounts discovery),
 * event formats and events/header_page through tracefs_local_events_system()
 * (tep_parse_header_page), per-CPU raw reads, decoding with kbuffer and
 * tep_print_event(). It prints nothing that differs between two correct
 * tracefs for the same writes: time stamps and pids are reduced to what the
 * format guarantees (see below), so the output of a real kernel and of
 * tracefs-fuse can be compared byte for byte.
 *
 * usage: tep_reader TRACEFS_DIR MODE [-i INSTANCE] [-p WRITER_PID]
 *   MODE pages:   per CPU, tracefs_cpu_open(nonblock) + tracefs_cpu_read()
 *                 until empty; per sub-buffer one "page" line, per record one
 *                 line with its place in the sub-buffer.
 *   MODE iterate: tracefs_iterate_raw_events() (splice, then read), one line
 *                 per event.
 *
 * Output lines:
 *   header_page subbuf=<tep_get_sub_buffer_size> long=<tep long size>
 *   cpu<c> page<n> commit=<raw commit, hex> size=<data bytes> missed=<n|-1>
 *          tail=<zero|DIRTY>
 *     @<offset> len=<record bytes> ts=<page|page+delta|later|SAME|BACKWARDS>
 *          pid=<W|n> <latency flags> <event name>: <tep_print_event INFO>
 *   cpu<c> pid=<W|n> <latency flags> <event name>: <info>      (iterate)
 * where ts=page means the record carries the sub-buffer's time stamp (a
 * first record normally does; page+delta: it has a delta or a TIME_EXTEND on
 * a page the writer went back to), later means strictly after the previous
 * record; pid=W is the writer's pid given with -p. The latency flags' need-
 * resched column is always '.' (see print_event). A newline in the decoded
 * text is printed as \n.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>
#include <tracefs.h>

static int writer_pid = -1;

static void print_pid(struct trace_seq *s, struct tep_handle *tep, struct tep_record *record)
{
	int pid = tep_data_pid(tep, record);
	if (pid == writer_pid)
		trace_seq_puts(s, "pid=W");
	else
		trace_seq_printf(s, "pid=%d", pid);
}

static void print_event(struct trace_seq *s, struct tep_handle *tep, struct tep_record *record)
{
	struct trace_seq flags;
	trace_seq_init(&flags);
	tep_print_event(tep, &flags, record, "%s", TEP_PRINT_LATENCY);
	trace_seq_terminate(&flags);
	/* The need-resched column is the scheduler's state when the event was
	 * written (a kernel sets it when the writer is about to be preempted),
	 * not the event's: always shown as '.'. */
	if (strlen(flags.buffer) >= 2)
		flags.buffer[1] = '.';
	print_pid(s, tep, record);
	trace_seq_printf(s, " %s ", flags.buffer);
	trace_seq_destroy(&flags);
	tep_print_event(tep, s, record, "%s: %s", TEP_PRINT_NAME, TEP_PRINT_INFO);
	trace_seq_terminate(s);
}

/* One line per record: a marker's own newline is shown as \n, not kept. */
static void put_line(const char *text)
{
	for (; *text; text++) {
		if (*text == '\n')
			fputs("\\n", stdout);
		else
			putchar(*text);
	}
	putchar('\n');
}

static int dump_page(struct tep_handle *tep, struct kbuffer *kbuf, int cpu, int n,
		     unsigned char *page, int subbuf)
{
	unsigned long long commit_raw, page_ts, ts, prev = 0;
	struct trace_seq s;

	memcpy(&page_ts, page, 8);
	memcpy(&commit_raw, page + 8, 8);
	if (kbuffer_load_subbuffer(kbuf, page) < 0) {
		printf("cpu%d page%d: kbuffer_load_subbuffer failed\n", cpu, n);
		return -1;
	}
	int size = kbuffer_subbuffer_size(kbuf);
	int missed = kbuffer_missed_events(kbuf);
	/* Past the data (and the stored missed count) the kernel zero-fills. */
	int end = 16 + size + ((commit_raw & (1ull << 30)) ? 8 : 0);
	int dirty = 0;
	for (int i = end; i < subbuf; i++)
		dirty |= page[i];
	printf("cpu%d page%d commit=%#llx size=%d missed=%d tail=%s\n", cpu, n, commit_raw,
	       size, missed, dirty ? "DIRTY" : "zero");
	trace_seq_init(&s);
	int first = 1;
	for (void *data = kbuffer_read_event(kbuf, &ts); data;
	     data = kbuffer_next_event(kbuf, &ts)) {
		struct tep_record record = {
			.ts = ts, .cpu = cpu, .data = data,
			.size = kbuffer_event_size(kbuf),
		};
		const char *when = first ? (ts == page_ts ? "page" : "page+delta")
				   : ts > prev ? "later" : ts == prev ? "SAME" : "BACKWARDS";
		trace_seq_reset(&s);
		print_event(&s, tep, &record);
		printf("  @%d len=%d ts=%s ", kbuffer_curr_offset(kbuf),
		       kbuffer_curr_size(kbuf), when);
		put_line(s.buffer);
		prev = ts;
		first = 0;
	}
	trace_seq_destroy(&s);
	return 0;
}

static int pages(struct tep_handle *tep, struct tracefs_instance *instance)
{
	struct kbuffer *kbuf = kbuffer_alloc(KBUFFER_LSIZE_SAME_AS_HOST,
					     KBUFFER_ENDIAN_SAME_AS_HOST);
	int cpus = sysconf(_SC_NPROCESSORS_CONF);
	for (int cpu = 0; cpu < cpus; cpu++) {
		struct tracefs_cpu *tcpu = tracefs_cpu_open(instance, cpu, true);
		if (!tcpu) {
			printf("cpu%d: tracefs_cpu_open: %s\n", cpu, strerror(errno));
			return 1;
		}
		int subbuf = tracefs_cpu_read_size(tcpu);
		unsigned char *page = malloc(subbuf);
		for (int n = 0;; n++) {
			int r = tracefs_cpu_read(tcpu, page, true);
			if (r == 0)
				break;
			if (r != subbuf) {
				printf("cpu%d: tracefs_cpu_read: %d (%s)\n", cpu, r, strerror(errno));
				return 1;
			}
			if (dump_page(tep, kbuf, cpu, n, page, subbuf))
				return 1;
		}
		free(page);
		tracefs_cpu_close(tcpu);
	}
	kbuffer_free(kbuf);
	return 0;
}

static int one_event(struct tep_event *event, struct tep_record *record, int cpu, void *ctx)
{
	struct trace_seq *s = ctx;
	(void)event;
	trace_seq_reset(s);
	print_event(s, event->tep, record);
	printf("cpu%d ", cpu);
	put_line(s->buffer);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s TRACEFS_DIR pages|iterate [-i INSTANCE] [-p PID]\n",
			argv[0]);
		return 2;
	}
	const char *instance_name = NULL;
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-i"))
			instance_name = argv[i + 1];
		else if (!strcmp(argv[i], "-p"))
			writer_pid = atoi(argv[i + 1]);
	}
	if (tracefs_set_tracing_dir(argv[1])) {
		perror("tracefs_set_tracing_dir");
		return 1;
	}
	/* Formats of the events we write: markers and user events (a kernel
	 * without user_events has no such system, which is fine). Parsing also
	 * reads events/header_page into the tep handle. */
	static const char *const systems[] = { "ftrace", "user_events", NULL };
	struct tep_handle *tep = tracefs_local_events_system(argv[1], systems);
	if (!tep) {
		perror("tracefs_local_events_system");
		return 1;
	}
	printf("header_page subbuf=%d long=%d\n", tep_get_sub_buffer_size(tep),
	       tep_get_long_size(tep));
	struct tracefs_instance *instance = NULL;
	if (instance_name) {
		instance = tracefs_instance_alloc(argv[1], instance_name);
		if (!instance) {
			perror("tracefs_instance_alloc");
			return 1;
		}
	}
	int ret;
	if (!strcmp(argv[2], "pages")) {
		ret = pages(tep, instance);
	} else {
		struct trace_seq s;
		trace_seq_init(&s);
		ret = tracefs_iterate_raw_events(tep, instance, NULL, 0, one_event, &s) ? 1 : 0;
		trace_seq_destroy(&s);
	}
	tracefs_instance_free(instance);
	tep_free(tep);
	return ret;
}
