/*
 * The native fast path: an enabled event's write to user_events_data,
 * answered on the receiver thread without the Python thread.
 *
 * The engine (tracefs_fuse/engine/_fast_path.py) publishes, through
 * fuse/_fast_path.py and the bridge, a compact table: each open
 * user_events_data file's write indices (index -> event id), each event's
 * state (enabled, the trace arrays recording it, its minimum size, its
 * __data_loc/__rel_loc validators), each trace array's (recording on, the
 * largest entry, tracing_cpumask, its clock), and each recent writer's CPU,
 * thread group and comm.  fp_handle() answers a write only when that table
 * says the engine would answer it with its full count: it builds the trace
 * entry (struct trace_entry + payload), stamps it with the array's clock and
 * appends it to a staging ring, replies, and returns.  Every other write,
 * every error and every rare case is declined and goes to the engine as
 * before, which takes the staged records in first (fp_staged/fp_consumed),
 * so records keep the order their writes came in.
 *
 * A perf event of ours that records the write (engine/_fast_perf.py
 * describes those whose samples it may write, and their rings) gets its
 * PERF_RECORD_SAMPLE here too: the sample is staged for the engine and
 * stored into the client's ring by the storer thread, which then sends the
 * write's reply (perf_samples).
 *
 * Rules:
 *   - Table updates and the decision for one write hold fp.lock; neither
 *     thread holds it across anything that waits (the receiver reads /proc
 *     between two looks at the table, never while it holds the lock).  A
 *     disable is published before the write to `enable` replies, so every
 *     write that starts after that reply sees it.
 *   - What both threads touch outside fp.lock is a C11 atomic: the switch
 *     (on, debug, wake) and the staging ring's counters.
 *   - A table update that cannot allocate leaves the fast path declining
 *     what it no longer knows (the engine serves it): never a write
 *     acknowledged and recorded nowhere.
 *   - The staging ring has one producer (the receiver) and one consumer (the
 *     Python thread): head and tail are byte counters, published with
 *     release/acquire.  A record never wraps: the producer pads the end of
 *     the ring with a record of array STAGED_WRAP instead, and never leaves
 *     fewer than a header's bytes at the end.
 *   - The perf table is a copy of the engine's rings: live only from the
 *     engine's fp_set_perf to its next fp_revoke_perf, which it calls (and
 *     then takes the staged samples in) before it changes any perf event or
 *     ring itself, so a ring's head has one owner at a time.
 *   - The writer's CPU, tgid and comm come from a cache the Python thread
 *     fills from /proc/<tid>/stat whenever it serves a write itself; an entry
 *     serves for FP_TASK_TTL_NS, then the next write goes to the engine,
 *     which reads /proc again (a pread of stat costs 5 us here, more than a
 *     whole FUSE round trip; docs/performance.md).
 *
 * Kernel: kernel/trace/trace_events_user.c (user_events_write_core,
 * user_event_ftrace, user_event_validate), fs/fuse/file.c (fuse_direct_io:
 * a write FUSE splits arrives as several requests).
 */
#define _GNU_SOURCE
#include "fastpath.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "receiver.h"
#include "storer.h"

/* struct staged_record, the layout engine/_fast_path.py's STAGED_RECORD
 * reads (quoted there). */
struct staged_record {
    uint32_t size;
    uint16_t cpu;
    uint8_t array;
    uint8_t pad;
    uint64_t ts;
    uint64_t previous;
    int32_t pid;
    int32_t tgid;
    uint32_t len;
    uint32_t copy_len;
    uint32_t event_len;
    uint32_t pad2;
    char comm[16];
    unsigned char encoded[];
};
_Static_assert(sizeof(struct staged_record) == 64, "staged_record");
#define STAGED_WRAP 0xFF

/* struct staged_perf, the layout engine/_fast_path.py's STAGED_PERF reads
 * (quoted there): a PERF_RECORD_SAMPLE written into a perf ring natively,
 * for the engine to take in (its count, the ring's head and bytes).  Its
 * first eight bytes are a staged_record's; `array` says which. */
struct staged_perf {
    uint32_t size;
    uint16_t pad0;
    uint8_t array;
    uint8_t pad1;
    uint64_t source;
    uint64_t sink;
    uint32_t len;
    uint8_t pad2[36];
    unsigned char record[];
};
_Static_assert(sizeof(struct staged_perf) == sizeof(struct staged_record),
               "staged_perf");
#define STAGED_PERF 0xFE

/* struct trace_entry { unsigned short type; unsigned char flags;
 *                      unsigned char preempt_count; int pid; };
 * user events record from process context with flags and count 0. */
struct trace_entry {
    uint16_t type;
    uint8_t flags;
    uint8_t preempt_count;
    int32_t pid;
};
_Static_assert(sizeof(struct trace_entry) == 8, "trace_entry");

/* kernel/trace/ring_buffer.c, as engine/_page.py encodes it (x86_64:
 * RB_ALIGNMENT 4, no forced 8-byte alignment). */
#define RB_ALIGNMENT 4
#define RB_EVNT_HDR_SIZE 4
#define RB_MAX_SMALL_DATA (RB_ALIGNMENT * 28)
#define RB_LEN_TIME_EXTEND 8
#define RINGBUF_TYPE_TIME_EXTEND 30
#define TS_SHIFT 27
#define TS_MASK ((1ULL << TS_SHIFT) - 1)
#define TS_EXTEND_MAX (1ULL << 59)

/* rb_calculate_event_length(): the bytes an event with an n-byte body
 * takes (header, array[0] for long ones, 4-aligned, never 12). */
static uint32_t event_length(uint32_t n)
{
    if (!n)
        n = 1;
    if (n > RB_MAX_SMALL_DATA)
        n += 4;
    n = (n + RB_EVNT_HDR_SIZE + RB_ALIGNMENT - 1) & ~(uint32_t)(RB_ALIGNMENT - 1);
    if (n == RB_LEN_TIME_EXTEND + RB_ALIGNMENT)
        n += RB_ALIGNMENT;
    return n;
}

/* What CpuBuffer.write lays down for an n-byte entry written `delta` after
 * the buffer's last event: a TIME_EXTEND if the delta does not fit 27 bits
 * (rb_add_timestamp zeroes it beyond 59 bits or when negative), then the
 * event header (rb_update_event), then the entry.  Returns the header bytes
 * written before the entry; *ext_len gets the TIME_EXTEND's. */
static size_t encode_event(unsigned char *out, uint32_t n, uint64_t delta,
                           uint32_t *ext_len)
{
    size_t at = 0;
    *ext_len = 0;
    if (delta & ~TS_MASK) {
        uint64_t d = delta <= TS_EXTEND_MAX ? delta : 0;  /* u64: negative is huge */
        uint32_t w[2] = {RINGBUF_TYPE_TIME_EXTEND | (uint32_t)((d & TS_MASK) << 5),
                         (uint32_t)(d >> TS_SHIFT)};
        memcpy(out, w, sizeof(w));
        at = *ext_len = RB_LEN_TIME_EXTEND;
        delta = 0;
    }
    uint32_t body = event_length(n) - RB_EVNT_HDR_SIZE;
    if (body > RB_MAX_SMALL_DATA) {
        uint32_t w[2] = {(uint32_t)(delta << 5), body};
        memcpy(out + at, w, sizeof(w));
        at += 8;
    } else {
        uint32_t w = (body >> 2) | (uint32_t)(delta << 5);
        memcpy(out + at, &w, sizeof(w));
        at += 4;
    }
    return at;
}

struct fp_validator {
    uint32_t offset;
    uint8_t rel, ensure_null;
};

struct fp_event {
    uint8_t enabled, recorders;
    uint8_t perf;      /* a perf event of ours records it: see the perf table */
    uint32_t min_size;
    size_t nval;
    struct fp_validator val[];
};

struct fp_array {
    int tracing_on;
    uint32_t max_entry;
    clockid_t clock;
    uint64_t divisor;  /* 0: not a clock the fast path can read */
    uint8_t *cpumask;  /* one bit per CPU */
    size_t mask_len;
    int mask_lost;     /* the last mask could not be copied (out of memory) */
};

struct fp_file {
    struct fp_file *next;
    uint64_t fh;
    uint32_t nslots, cap;
    uint16_t *ids;  /* 0: not an event the fast path knows */
};

struct fp_task {
    pid_t tid;
    int32_t tgid;
    uint16_t cpu;
    char comm[16];
    uint64_t expires;
};

/* struct fp_perf_ring_in, as fuse/_fast_path.py's PERF_RING packs it: a
 * forward ring the engine lets the fast path write, in its state now. */
struct fp_perf_ring_in {
    uint64_t sink;         /* the perf event owning it (engine id) */
    uint64_t ino;          /* its file, for the page stores */
    uint64_t size;         /* data bytes: 2^n pages */
    uint64_t head;         /* data_head (forward: only grows) */
    uint64_t tail;         /* the reader's data_tail as last read */
    uint64_t written;      /* bytes written in all (the watermark's count) */
    uint64_t wakeup_at;    /* `written` at the last wakeup */
    uint64_t watermark;    /* bytes between wakeups */
    int64_t events_left;   /* samples to the next wakeup_events wakeup */
    uint32_t wakeup_events;
    uint8_t writable;      /* respects data_tail */
    uint8_t pad[3];
};
_Static_assert(sizeof(struct fp_perf_ring_in) == 80, "fp_perf_ring_in");

/* struct fp_perf_in, as fuse/_fast_path.py's PERF_EVENT packs it: a perf
 * event of ours on a user event, and whether the fast path can write its
 * samples (ring UINT32_MAX: it cannot, the engine writes them). */
struct fp_perf_in {
    uint64_t id;           /* IDENTIFIER, ID, STREAM_ID */
    uint64_t sample_type;
    uint32_t event;        /* the user event's id */
    int32_t cpu;           /* -1: any */
    int32_t tid;           /* the thread it follows; 0: any (CPU-wide) */
    int32_t clock;         /* clockid_t of its samples' TIME */
    uint32_t ring;         /* index in the rings; UINT32_MAX: the engine's */
    uint8_t enabled;       /* it may record (enabled, or awaiting an exec) */
    uint8_t inherit;       /* other threads' writes are the engine's (followed?) */
    uint8_t comm;          /* a COMM is owed to a writer not announced as it is */
    uint8_t pad;
};
_Static_assert(sizeof(struct fp_perf_in) == 40, "fp_perf_in");

/* struct fp_announced_in, as fuse/_fast_path.py's PERF_ANNOUNCED packs it: a
 * thread a ring's reader was told about (a COMM) and by which name; a
 * writer announced under its current comm is owed no COMM. */
struct fp_announced_in {
    int32_t tid;
    uint32_t ring;
    char comm[16];
};
_Static_assert(sizeof(struct fp_announced_in) == 24, "fp_announced_in");
#define FP_PERF_ENGINE UINT32_MAX

/* include/uapi/linux/perf_event.h: the sample_type bits written here, in
 * perf_output_sample's order; any other bit is the engine's. */
#define PERF_SAMPLE_IP (1u << 0)
#define PERF_SAMPLE_TID (1u << 1)
#define PERF_SAMPLE_TIME (1u << 2)
#define PERF_SAMPLE_ADDR (1u << 3)
#define PERF_SAMPLE_ID (1u << 6)
#define PERF_SAMPLE_CPU (1u << 7)
#define PERF_SAMPLE_PERIOD (1u << 8)
#define PERF_SAMPLE_STREAM_ID (1u << 9)
#define PERF_SAMPLE_RAW (1u << 10)
#define PERF_SAMPLE_IDENTIFIER (1u << 16)
#define FP_SAMPLE_TYPES                                                      \
    (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |             \
     PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |                  \
     PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |          \
     PERF_SAMPLE_RAW)
#define PERF_RECORD_SAMPLE 9
#define PERF_RECORD_MISC_KERNEL 1
/* struct perf_event_mmap_page: data_head's offset; the data from page 1. */
#define PERF_DATA_HEAD 1024
#define PERF_PAGE 4096
/* Samples of one write the fast path writes; more: the engine's. */
#define FP_PERF_MAX 16

/* One ring's state while a write is decided: committed only if served. */
struct fp_perf_ring {
    struct fp_perf_ring_in now, next;
};

#define FILE_BUCKETS 1024
#define TASK_SLOTS 4096
#define TASK_PROBE 4

static struct {
    pthread_mutex_t lock;
    atomic_int on, debug;
    unsigned nr_cpus;
    uint32_t max_write, max_pages;
    struct fp_array arrays[FP_MAX_ARRAYS];
    struct fp_event *events[1 << 16];
    struct fp_file *files[FILE_BUCKETS];
    struct fp_task tasks[TASK_SLOTS];
    unsigned char *ring;
    size_t ring_size;
    /* Per array, per CPU: the time stamp of the last event staged. */
    uint64_t *last_ts[FP_MAX_ARRAYS];
    _Atomic uint64_t head, tail;  /* byte counters */
    atomic_int wake;
    uint64_t task_ttl;
    struct fp_stats stats;
    /* The perf table: live only between the engine's publish and its next
     * revoke (while revoked the engine may write the rings itself). */
    int perf_live;
    size_t nrings, nperf, nannounced;
    struct fp_perf_ring *rings;
    struct fp_perf_in *perfs;
    struct fp_announced_in *announced;
    struct fuse_session *se;
} fp = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const reasons[FP_NR_REASONS] = {
    "served", "other file", "position", "index", "disabled", "min_size",
    "task", "clock", "invalid", "staging_full", "large", "table", "perf",
    "store"};

const char *fp_reason(int why)
{
    return why >= 0 && why < FP_NR_REASONS ? reasons[why] : "?";
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* All or nothing: a ring and its time stamps, or -ENOMEM with the fast path
 * off (every write goes to the engine), never "configured" while off. */
int fp_configure(unsigned nr_cpus, size_t staging_bytes, int debug)
{
    nr_cpus = nr_cpus ? nr_cpus : 1;
    staging_bytes &= ~(size_t)7;
    unsigned char *ring = NULL;
    uint64_t *last_ts[FP_MAX_ARRAYS] = {0};
    int failed = 0;
    if (staging_bytes) {
        failed = !(ring = calloc(1, staging_bytes));
        for (unsigned a = 0; a < FP_MAX_ARRAYS && !failed; a++)
            failed = !(last_ts[a] = calloc(nr_cpus, sizeof(uint64_t)));
    }
    if (failed) {
        free(ring);
        ring = NULL;
        for (unsigned a = 0; a < FP_MAX_ARRAYS; a++) {
            free(last_ts[a]);
            last_ts[a] = NULL;
        }
        staging_bytes = 0;
    }
    pthread_mutex_lock(&fp.lock);
    unsigned char *old_ring = fp.ring;
    uint64_t *old_ts[FP_MAX_ARRAYS];
    memcpy(old_ts, fp.last_ts, sizeof(old_ts));
    memcpy(fp.last_ts, last_ts, sizeof(last_ts));
    fp.ring = ring;
    fp.ring_size = staging_bytes;
    atomic_store_explicit(&fp.head, 0, memory_order_release);
    atomic_store_explicit(&fp.tail, 0, memory_order_release);
    atomic_store_explicit(&fp.on, ring != NULL, memory_order_release);
    atomic_store_explicit(&fp.debug, debug, memory_order_relaxed);
    fp.nr_cpus = nr_cpus;
    memset(&fp.stats, 0, sizeof(fp.stats));
    pthread_mutex_unlock(&fp.lock);
    free(old_ring);
    for (unsigned a = 0; a < FP_MAX_ARRAYS; a++)
        free(old_ts[a]);
    return failed ? -ENOMEM : 0;
}

void fp_set_limits(uint32_t max_write, uint32_t max_pages)
{
    pthread_mutex_lock(&fp.lock);
    fp.max_write = max_write;
    fp.max_pages = max_pages;
    pthread_mutex_unlock(&fp.lock);
}

/* --- table updates (Python thread) ----------------------------------------- */

void fp_set_array(unsigned index, int tracing_on, uint32_t max_entry,
                  const uint8_t *cpumask, size_t mask_len, clockid_t clock,
                  uint64_t divisor)
{
    if (index >= FP_MAX_ARRAYS)
        return;
    uint8_t *mask = malloc(mask_len ? mask_len : 1);
    pthread_mutex_lock(&fp.lock);
    struct fp_array *a = &fp.arrays[index];
    free(a->cpumask);
    a->cpumask = mask;
    a->mask_len = mask ? mask_len : 0;
    /* Without the mask nobody can tell which CPUs record: decide() leaves
     * the events this array records to the engine until a mask comes. */
    a->mask_lost = !mask;
    if (mask)
        memcpy(mask, cpumask, mask_len);
    a->tracing_on = tracing_on;
    a->max_entry = max_entry;
    a->clock = clock;
    a->divisor = divisor;
    pthread_mutex_unlock(&fp.lock);
}

int fp_set_event(uint16_t id, int enabled, int perf, uint8_t recorders,
                 uint32_t min_size, const uint8_t *validators, size_t nval)
{
    struct fp_event *ev = malloc(sizeof(*ev) + nval * sizeof(ev->val[0]));
    if (!ev) {
        /* The old state is stale now: without it the event's writes go to
         * the engine (FP_DISABLED declines) until it is published again. */
        pthread_mutex_lock(&fp.lock);
        struct fp_event *old = fp.events[id];
        fp.events[id] = NULL;
        pthread_mutex_unlock(&fp.lock);
        free(old);
        return -ENOMEM;
    }
    ev->enabled = (uint8_t)!!enabled;
    ev->perf = (uint8_t)!!perf;
    ev->recorders = recorders;
    ev->min_size = min_size;
    ev->nval = nval;
    for (size_t i = 0; i < nval; i++) {
        /* (u32 offset, u8 rel, u8 ensure_null, 2 bytes padding) each */
        memcpy(&ev->val[i].offset, validators + 8 * i, 4);
        ev->val[i].rel = validators[8 * i + 4];
        ev->val[i].ensure_null = validators[8 * i + 5];
    }
    pthread_mutex_lock(&fp.lock);
    struct fp_event *old = fp.events[id];
    fp.events[id] = ev;
    pthread_mutex_unlock(&fp.lock);
    free(old);
    return 0;
}

/* Caller holds fp.lock. */
static struct fp_file **file_slot(uint64_t fh)
{
    struct fp_file **p = &fp.files[fh % FILE_BUCKETS];
    while (*p && (*p)->fh != fh)
        p = &(*p)->next;
    return p;
}

int fp_set_slots(uint64_t fh, uint32_t start, const uint16_t *ids, size_t n)
{
    int rc = 0;
    pthread_mutex_lock(&fp.lock);
    struct fp_file **p = file_slot(fh), *f = *p;
    if (!f && (f = calloc(1, sizeof(*f)))) {
        f->fh = fh;
        *p = f;
    }
    size_t need = (size_t)start + n;
    if (!f) {
        rc = -ENOMEM;
    } else if (need > f->cap) {
        size_t cap = f->cap ? f->cap : 16;
        while (cap < need)
            cap *= 2;
        uint16_t *grown = realloc(f->ids, cap * sizeof(*grown));
        if (grown) {
            memset(grown + f->cap, 0, (cap - f->cap) * sizeof(*grown));
            f->ids = grown;
            f->cap = (uint32_t)cap;
        } else {
            rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        memcpy(f->ids + start, ids, n * sizeof(*ids));
        if (need > f->nslots)
            f->nslots = (uint32_t)need;
    }
    /* On failure the indices it knows stay right; the new ones stay 0
     * (FP_INDEX: the engine serves them). */
    pthread_mutex_unlock(&fp.lock);
    return rc;
}

void fp_drop_file(uint64_t fh)
{
    pthread_mutex_lock(&fp.lock);
    struct fp_file **p = file_slot(fh), *f = *p;
    if (f)
        *p = f->next;
    pthread_mutex_unlock(&fp.lock);
    if (f) {
        free(f->ids);
        free(f);
    }
}

static size_t task_hash(pid_t tid)
{
    return ((uint32_t)tid * 2654435761u) % TASK_SLOTS;
}

void fp_set_task(pid_t tid, int32_t tgid, unsigned cpu, const char *comm,
                 size_t comm_len, uint64_t ttl_ns)
{
    uint64_t now = now_ns();
    pthread_mutex_lock(&fp.lock);
    /* The same tid's slot, else the one expiring first among the probes. */
    struct fp_task *slot = NULL;
    for (size_t i = 0; i < TASK_PROBE; i++) {
        struct fp_task *t = &fp.tasks[(task_hash(tid) + i) % TASK_SLOTS];
        if (t->tid == tid) {
            slot = t;
            break;
        }
        if (!slot || t->expires < slot->expires)
            slot = t;
    }
    slot->tid = tid;
    slot->tgid = tgid;
    slot->cpu = (uint16_t)(cpu % fp.nr_cpus);
    memset(slot->comm, 0, sizeof(slot->comm));
    memcpy(slot->comm, comm, comm_len < 15 ? comm_len : 15);
    slot->expires = now + ttl_ns;
    fp.task_ttl = ttl_ns;
    pthread_mutex_unlock(&fp.lock);
}

/* What one write's decision needs from /proc, read by fp_handle() between
 * two looks at the table, without fp.lock (rule 1). */
struct proc_facts {
    enum { WANT_SYSCALL = 1, WANT_STAT } want;  /* what decide() asks for */
    int stat_read, stat_ok;      /* a writer's stat (read_stat) */
    pid_t tid;
    int32_t tgid;
    unsigned cpu;
    char comm[16];
    int syscall_read;            /* the writer's /proc/<tid>/syscall */
    long nr;                     /* -1: unreadable */
    unsigned long long args[3];
};

/* Reads a known writer's CPU and comm from /proc/<tgid>/task/<tid>/stat,
 * as _tasks.py reads stat: ``processor`` (field 39) is task_cpu(), the CPU
 * it wrote from while it sleeps in our request; comm is what lies between
 * the first '(' and the last ')'.  The path names the thread group, so a
 * tid that died (and was perhaps reused elsewhere) fails to open and goes
 * back to the engine.  Sets stat_ok if it could be read. */
static void read_stat(struct proc_facts *f)
{
    char path[64], buf[512];
    f->stat_read = 1;
    f->stat_ok = 0;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", f->tgid, f->tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
    if (!open_paren || !close_paren || close_paren < open_paren)
        return;
    /* Fields from 3 (state) on, after ") ". */
    char *p = close_paren + 2;
    for (int field = 3; field < 39 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    if (!p || p >= buf + n)
        return;
    size_t comm_len = (size_t)(close_paren - open_paren - 1);
    memset(f->comm, 0, sizeof(f->comm));
    memcpy(f->comm, open_paren + 1, comm_len < 15 ? comm_len : 15);
    f->cpu = (unsigned)strtoul(p, NULL, 10);
    f->stat_ok = 1;
}

/* Reads /proc/<tid>/syscall: the call a writer sleeps in during our
 * request, and its first arguments (no client memory is read, which this
 * thread must never do).  nr -1 if it cannot be read. */
static void read_syscall(struct proc_facts *f, uint32_t tid)
{
    char path[48], buf[256];
    f->syscall_read = 1;
    f->nr = -1;
    snprintf(path, sizeof(path), "/proc/%u/syscall", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    char *p = buf;
    f->nr = strtol(p, &p, 10);
    for (int i = 0; i < 3; i++)
        f->args[i] = strtoull(p, &p, 16);
}

void fp_set_wake(int wake)
{
    atomic_store_explicit(&fp.wake, wake, memory_order_release);
}

/* --- the perf table (Python thread) ------------------------------------------------ */

void fp_set_session(struct fuse_session *se)
{
    pthread_mutex_lock(&fp.lock);
    fp.se = se;
    pthread_mutex_unlock(&fp.lock);
}

/* A perf table: what fp_set_perf gives and swap_perf takes. */
struct perf_table {
    struct fp_perf_ring *rings;
    struct fp_perf_in *perfs;
    struct fp_announced_in *announced;
    size_t nrings, nperf, nannounced;
};

/* Makes `t` the table (live or not) and leaves the old one in `t`, for
 * freeing outside fp.lock. */
static void swap_perf(struct perf_table *t, int live)
{
    pthread_mutex_lock(&fp.lock);
    struct perf_table old = {fp.rings, fp.perfs, fp.announced, fp.nrings, fp.nperf,
                             fp.nannounced};
    fp.rings = t->rings;
    fp.perfs = t->perfs;
    fp.announced = t->announced;
    fp.nrings = t->nrings;
    fp.nperf = t->nperf;
    fp.nannounced = t->nannounced;
    fp.perf_live = live;
    pthread_mutex_unlock(&fp.lock);
    *t = old;
}

static void free_perf(struct perf_table *t)
{
    free(t->rings);
    free(t->perfs);
    free(t->announced);
}

void fp_revoke_perf(void)
{
    struct perf_table t = {0};
    swap_perf(&t, 0);
    free_perf(&t);
}

/* A copy of n items of `size` bytes (one at least, so that NULL means no
 * memory). */
static void *copy_of(const void *from, size_t n, size_t size)
{
    void *to = malloc(n ? n * size : 1);
    if (to && n)
        memcpy(to, from, n * size);
    return to;
}

int fp_set_perf(const void *rings_in, size_t nrings, const void *perfs_in,
                size_t nperf, const void *announced_in, size_t nannounced,
                const size_t sizes[3])
{
    if (sizes[0] != sizeof(struct fp_perf_ring_in) ||
        sizes[1] != sizeof(struct fp_perf_in) ||
        sizes[2] != sizeof(struct fp_announced_in)) {
        fp_revoke_perf();
        return -EINVAL;  /* the two sides disagree on the layouts */
    }
    struct perf_table t = {calloc(nrings ? nrings : 1, sizeof(*t.rings)),
                           copy_of(perfs_in, nperf, sizeof(*t.perfs)),
                           copy_of(announced_in, nannounced, sizeof(*t.announced)),
                           nrings, nperf, nannounced};
    int rc = t.rings && t.perfs && t.announced ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < nrings; i++) {
        memcpy(&t.rings[i].now, (const char *)rings_in + i * sizeof(t.rings[i].now),
               sizeof(t.rings[i].now));
        uint64_t size = t.rings[i].now.size;
        if (!size || size & (size - 1))
            rc = -EINVAL;
    }
    for (size_t i = 0; rc == 0 && i < nperf; i++)
        if (t.perfs[i].ring != FP_PERF_ENGINE && t.perfs[i].ring >= nrings)
            rc = -EINVAL;
    for (size_t i = 0; rc == 0 && i < nannounced; i++)
        if (t.announced[i].ring >= nrings)
            rc = -EINVAL;
    if (rc) {
        free_perf(&t);
        fp_revoke_perf();
        return rc;
    }
    swap_perf(&t, 1);
    free_perf(&t);
    return 0;
}

/* --- the staging ring ---------------------------------------------------------- */

void fp_staged(const unsigned char **data, size_t *len)
{
    uint64_t tail = atomic_load_explicit(&fp.tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&fp.head, memory_order_acquire);
    *data = NULL;
    *len = 0;
    if (!fp.ring || head == tail)
        return;
    size_t off = tail % fp.ring_size;
    size_t until_end = fp.ring_size - off;
    *data = fp.ring + off;
    *len = head - tail < until_end ? head - tail : until_end;
}

void fp_consumed(size_t len)
{
    atomic_fetch_add_explicit(&fp.tail, len, memory_order_release);
}

int fp_pending(void)
{
    return atomic_load_explicit(&fp.head, memory_order_acquire) !=
           atomic_load_explicit(&fp.tail, memory_order_relaxed);
}

/* Caller holds fp.lock (the only producer).  `need` bytes, 8-aligned,
 * contiguous; NULL if the ring has no room. */
static struct staged_record *reserve(size_t need, uint64_t *head)
{
    uint64_t tail = atomic_load_explicit(&fp.tail, memory_order_acquire);
    size_t off = *head % fp.ring_size;
    size_t until_end = fp.ring_size - off;
    size_t hdr = sizeof(struct staged_record);
    size_t pad = 0;
    /* Never leave between 1 and hdr - 1 bytes at the end: a wrap record
     * must fit there. */
    if (need != until_end && need + hdr > until_end)
        pad = until_end;
    if (*head + pad + need - tail > fp.ring_size)
        return NULL;
    if (pad) {
        struct staged_record *wrap = (void *)(fp.ring + off);
        wrap->size = (uint32_t)pad;
        wrap->array = STAGED_WRAP;
        *head += pad;
        off = 0;
    }
    struct staged_record *r = (void *)(fp.ring + off);
    *head += need;
    return r;
}

/* --- perf samples ------------------------------------------------------------------ */

/* One perf event of ours that records the write, and the ring it goes to. */
struct perf_match {
    const struct fp_perf_in *perf;
    struct fp_perf_ring *ring;
    uint32_t len;  /* of the PERF_RECORD_SAMPLE */
};

/* perf_output_sample's size for sample_type (FP_SAMPLE_TYPES only): the
 * header, 8 bytes per fixed field, and a tracepoint's raw data: u32 size,
 * the entry padded to 8 (user_event_perf), then 4 more so that the size and
 * the data end on 8 (perf_sample_save_raw_data). */
static size_t sample_size(uint64_t st, size_t entry_len)
{
    size_t n = 8 + 8 * (size_t)__builtin_popcountll(st & ~(uint64_t)PERF_SAMPLE_RAW);
    if (st & PERF_SAMPLE_RAW)
        n += ((entry_len + 7) & ~(size_t)7) + 8;
    return n;
}

/* Was `tid` announced to ring `ring`'s reader under `comm` (SideBand: then a
 * sample of it owes no COMM)?  Caller holds fp.lock. */
static int announced(uint32_t ring, pid_t tid, const char comm[16])
{
    for (size_t i = 0; i < fp.nannounced; i++) {
        const struct fp_announced_in *a = &fp.announced[i];
        if (a->ring == ring && a->tid == tid)
            return !memcmp(a->comm, comm, 16);
    }
    return 0;
}

/* The perf events recording a write of event `id` by `tid` on t's CPU, as
 * PerfEvent.can_record and Inheritance.follows decide: enabled (or
 * awaiting an exec), on any CPU or this one, CPU-wide or following this
 * thread (with inherit, another thread's write is the engine's: it may be
 * one the event follows).  0, or why the engine must write them (one it
 * cannot write natively matches, or a COMM is owed first).  Caller holds
 * fp.lock. */
static int perf_matches(uint16_t id, pid_t tid, const struct fp_task *t,
                        size_t entry_len, struct perf_match *m, size_t *nm)
{
    if (!fp.perf_live)
        return FP_PERF;
    for (size_t i = 0; i < fp.nperf; i++) {
        const struct fp_perf_in *p = &fp.perfs[i];
        if (p->event != id || !p->enabled ||
            (p->cpu != -1 && (unsigned)p->cpu != t->cpu))
            continue;
        if (p->tid && p->tid != tid) {
            if (p->inherit)
                return FP_PERF;  /* a thread it may follow: the engine knows */
            continue;
        }
        if (p->ring == FP_PERF_ENGINE || *nm == FP_PERF_MAX ||
            (p->sample_type & ~(uint64_t)FP_SAMPLE_TYPES) ||
            (p->comm && !announced(p->ring, tid, t->comm)))
            return FP_PERF;
        size_t len = sample_size(p->sample_type, entry_len);
        if (len > UINT16_MAX)  /* perf_event_header.size */
            return FP_PERF;
        m[(*nm)++] = (struct perf_match){p, &fp.rings[p->ring], (uint32_t)len};
    }
    return 0;
}

/* Claims each match's place in its ring (in `next`, committed only if the
 * write is served), as PerfBuffer.output would, or says why the engine
 * must: a writable ring without room behind the tail last read (it reads
 * the tail again), or a wakeup due (the engine's to give). */
static int perf_claim(struct perf_match *m, size_t nm, uint64_t *starts)
{
    for (size_t k = 0; k < nm; k++)
        m[k].ring->next = m[k].ring->now;
    for (size_t k = 0; k < nm; k++) {
        struct fp_perf_ring_in *r = &m[k].ring->next;
        uint64_t len = m[k].len;
        if (len >= r->size)
            return FP_PERF;
        /* include/linux/circ_buf.h: CIRC_SPACE(head, tail, size) */
        if (r->writable && ((r->tail - r->head - 1) & (r->size - 1)) < len)
            return FP_PERF;
        starts[k] = r->head;
        r->head += len;
        r->written += len;
        if (r->written - r->wakeup_at > r->watermark)
            return FP_PERF;
        if (r->wakeup_events && --r->events_left <= 0)
            return FP_PERF;
    }
    return 0;
}

static unsigned char *put_u64(unsigned char *out, uint64_t v)
{
    memcpy(out, &v, 8);
    return out + 8;
}

static unsigned char *put_u32_pair(unsigned char *out, uint32_t a, uint32_t b)
{
    memcpy(out, &a, 4);
    memcpy(out + 4, &b, 4);
    return out + 8;
}

/* sample_record() (engine/_perf_output.py): PERF_RECORD_SAMPLE of period 1
 * from the kernel (misc KERNEL), IP and ADDR 0; returns where the entry
 * goes (NULL without RAW).  The byte before the entry is the top byte of
 * the raw size, 0: what the engine takes for the byte before perf's
 * buffer when it validates. */
static unsigned char *build_sample(unsigned char *out, const struct perf_match *m,
                                   int32_t tgid, int32_t tid, unsigned cpu,
                                   size_t entry_len)
{
    const struct fp_perf_in *p = m->perf;
    uint64_t st = p->sample_type;
    struct {
        uint32_t type;
        uint16_t misc, size;
    } header = {PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, (uint16_t)m->len};
    memcpy(out, &header, 8);
    unsigned char *at = out + 8;
    if (st & PERF_SAMPLE_IDENTIFIER)
        at = put_u64(at, p->id);
    if (st & PERF_SAMPLE_IP)
        at = put_u64(at, 0);
    if (st & PERF_SAMPLE_TID)
        at = put_u32_pair(at, (uint32_t)tgid, (uint32_t)tid);
    if (st & PERF_SAMPLE_TIME) {
        struct timespec ts;
        clock_gettime((clockid_t)p->clock, &ts);
        at = put_u64(at, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    }
    if (st & PERF_SAMPLE_ADDR)
        at = put_u64(at, 0);
    if (st & PERF_SAMPLE_ID)
        at = put_u64(at, p->id);
    if (st & PERF_SAMPLE_STREAM_ID)
        at = put_u64(at, p->id);
    if (st & PERF_SAMPLE_CPU)
        at = put_u32_pair(at, cpu, 0);
    if (st & PERF_SAMPLE_PERIOD)
        at = put_u64(at, 1);
    if (!(st & PERF_SAMPLE_RAW))
        return NULL;
    size_t data = ((entry_len + 7) & ~(size_t)7) + 4;
    uint32_t raw = (uint32_t)data;
    memcpy(at, &raw, 4);
    memset(at + 4 + entry_len, 0, data - entry_len);
    return at + 4;
}

/* --- one write -------------------------------------------------------------------- */

/* user_event_validate(), as the engine's UserEvent.validate() does it, on
 * the entry as encoded in the staging ring: entry[-1] is the last byte of
 * its event header, which the kernel's `*(char *)(pos - 1)` reads for an
 * empty __data_loc string at offset 0.  0 if valid, -1 if not. */
static int validate(const struct fp_event *ev, const unsigned char *entry,
                    size_t end)
{
    for (size_t i = 0; i < ev->nval; i++) {
        const struct fp_validator *v = &ev->val[i];
        uint32_t loc;
        if ((size_t)v->offset + 4 > end)
            return 1;
        memcpy(&loc, entry + v->offset, 4);
        size_t start = v->rel ? v->offset + 4 + (loc & 0xFFFF) : loc & 0xFFFF;
        size_t stop = start + (loc >> 16);
        if (stop > end)
            return -1;
        if (v->ensure_null && entry[(ptrdiff_t)stop - 1] != 0)
            return -1;
    }
    return 0;
}

static int array_records(const struct fp_array *a, size_t entry_len,
                         unsigned cpu)
{
    return a->tracing_on && entry_len <= a->max_entry &&
           cpu / 8 < a->mask_len && (a->cpumask[cpu / 8] >> (cpu % 8) & 1);
}

static uint64_t read_clock(const struct fp_array *a)
{
    struct timespec ts;
    clock_gettime(a->clock, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) /
           a->divisor;
}

/* Whether a write request of `size` bytes is the whole write(2) it is in,
 * by the writer's system call (read_syscall, the call and its arguments
 * while it sleeps in our request; no client memory is read, which this
 * thread must never do): a write(2) of `size` bytes.  A writev(2) cannot be
 * proven whole from its arguments: FUSE cuts one short at an iovec it cannot
 * pin (fuse_get_user_pages), however few iovecs it has, and only the sum of
 * their lengths, in the writer's memory, tells (issue 19 item 5); the
 * engine reads them.  x86_64 numbers.  Caller holds fp.lock. */
static int whole_request(const struct proc_facts *f, uint32_t size)
{
    if (size >= fp.max_write)
        return 0;
    return f->nr == 1 /* write */ && f->args[2] == size;
}

/* The samples of one write: built into the staging ring (after `*head`,
 * published by the caller), validated, their stores made into a batch with
 * the write's reply (the storer sends it once they are in the rings: the
 * sample is there before the write returns), and each ring's claim
 * committed.  0, or why the engine must write them, with nothing made or
 * committed.  The caller queues the batch after it published the staging
 * ring's head (a read that starts once the write returned must find the
 * write's trace records), still holding fp.lock, so stores leave in claim
 * order and before anything the engine stores after revoking the table. */
static int perf_samples(const struct fuse_in_header *in,
                        const struct fuse_write_in *arg,
                        const unsigned char *data, const struct fp_event *ev,
                        const struct fp_task *t, size_t entry_len,
                        struct perf_match *m, size_t nm, const uint64_t *starts,
                        uint64_t *head, int dev_fd, struct st_batch **batch)
{
    struct st_store stores[3 * FP_PERF_MAX];
    uint64_t heads[FP_PERF_MAX];
    size_t ns = 0;
    if (!fp.se)
        return FP_STORE;
    for (size_t k = 0; k < nm; k++) {
        if (ev->nval && !(m[k].perf->sample_type & PERF_SAMPLE_RAW))
            return FP_PERF;  /* validated where no raw data shows it */
        size_t need = (sizeof(struct staged_perf) + m[k].len + 7) & ~(size_t)7;
        struct staged_perf *r = (void *)reserve(need, head);
        if (!r)
            return FP_FULL;
        unsigned char *entry = build_sample(r->record, &m[k], t->tgid,
                                            (int32_t)in->pid, t->cpu, entry_len);
        if (entry) {
            struct trace_entry e = {.type = m[k].perf->event,
                                    .pid = (int32_t)in->pid};
            memcpy(entry, &e, sizeof(e));
            memcpy(entry + sizeof(e), data + 4, arg->size - 4);
            if (ev->nval && validate(ev, entry, entry_len))
                return FP_INVALID;
        }
        memset(r, 0, sizeof(*r));
        r->size = (uint32_t)need;
        r->array = STAGED_PERF;
        r->source = m[k].perf->id;
        r->sink = m[k].ring->now.sink;
        r->len = m[k].len;
        const struct fp_perf_ring_in *ring = &m[k].ring->now;
        uint64_t off = starts[k] & (ring->size - 1);
        uint64_t first = ring->size - off < m[k].len ? ring->size - off : m[k].len;
        stores[ns++] = (struct st_store){ring->ino, PERF_PAGE + off, r->record, first};
        if (first < m[k].len)
            stores[ns++] = (struct st_store){ring->ino, PERF_PAGE,
                                             r->record + first, m[k].len - first};
        heads[k] = starts[k] + m[k].len;
        stores[ns++] = (struct st_store){ring->ino, PERF_DATA_HEAD, &heads[k], 8};
    }
    *batch = st_batch_raw(fp.se, stores, ns, dev_fd, in->unique, arg->size);
    if (!*batch)
        return FP_STORE;
    for (size_t k = 0; k < nm; k++)
        m[k].ring->now = m[k].ring->next;
    return 0;
}

/* Not a decision: fp_handle() must read what `facts` lacks, then ask again. */
#define FP_READ_PROC (-1)

/* Caller holds fp.lock.  FP_SERVED with the records staged, why not, or
 * FP_READ_PROC with what to read from /proc in `facts` (tid, tgid). */
static int decide(const struct fuse_in_header *in,
                  const struct fuse_write_in *arg,
                  const unsigned char *data, int *wake,
                  struct proc_facts *facts, int dev_fd, int *replied)
{
    if (!atomic_load_explicit(&fp.on, memory_order_relaxed))
        return FP_NO_FILE;  /* switched off since fp_handle looked */
    struct fp_file *f = *file_slot(arg->fh);
    if (!f)
        return FP_NO_FILE;
    if (arg->offset != 0 || arg->size < 4)
        return FP_POSITION;
    /* A write FUSE may have split (fuse_direct_io: at most max_write bytes
     * and max_pages pages per request, a page per iovec at least, so one
     * byte per page at least): only the engine can see the whole of it,
     * unless the writer's system call shows it is all here. */
    if (arg->size >= fp.max_write || arg->size >= fp.max_pages) {
        if (!facts->syscall_read) {
            facts->want = WANT_SYSCALL;
            return FP_READ_PROC;
        }
        if (!whole_request(facts, arg->size))
            return FP_LARGE;
    }
    int32_t index;
    memcpy(&index, data, 4);
    if (index < 0 || (uint32_t)index >= f->nslots || !f->ids[index])
        return FP_INDEX;
    const struct fp_event *ev = fp.events[f->ids[index]];
    if (!ev || !ev->enabled)
        return FP_DISABLED;
    if (arg->size - 4 < ev->min_size)
        return FP_MIN_SIZE;
    struct fp_task *t = NULL;
    for (size_t i = 0; i < TASK_PROBE && !t && in->pid; i++) {
        struct fp_task *c = &fp.tasks[(task_hash(in->pid) + i) % TASK_SLOTS];
        if (c->tid == (pid_t)in->pid)
            t = c;
    }
    if (!t)
        return FP_TASK;
    if (t->expires <= now_ns()) {
        if (!facts->stat_read || facts->tid != t->tid || facts->tgid != t->tgid) {
            facts->stat_read = 0;
            facts->tid = t->tid;
            facts->tgid = t->tgid;
            facts->want = WANT_STAT;
            return FP_READ_PROC;
        }
        if (!facts->stat_ok)
            return FP_TASK;
        memcpy(t->comm, facts->comm, sizeof(t->comm));
        t->cpu = (uint16_t)(facts->cpu % fp.nr_cpus);
        t->expires = now_ns() + fp.task_ttl;
        fp.stats.task_refreshes++;
    }
    size_t entry_len = sizeof(struct trace_entry) + arg->size - 4;
    uint8_t recording = 0;
    for (unsigned a = 0; a < FP_MAX_ARRAYS; a++) {
        if (!(ev->recorders >> a & 1))
            continue;
        if (fp.arrays[a].mask_lost)
            return FP_TABLE;
        if (!array_records(&fp.arrays[a], entry_len, t->cpu))
            continue;
        if (!fp.arrays[a].divisor)
            return FP_CLOCK;
        recording |= (uint8_t)(1u << a);
    }
    struct perf_match m[FP_PERF_MAX];
    uint64_t starts[FP_PERF_MAX];
    size_t nm = 0;
    if (ev->perf) {
        int why = perf_matches(f->ids[index], (pid_t)in->pid, t, entry_len, m, &nm);
        if (!why)
            why = perf_claim(m, nm, starts);
        if (why)
            return why;
    }
    if (!recording && !nm)
        return FP_SERVED;  /* enabled, recorded nowhere: the full count */
    /* The largest encoding: TIME_EXTEND and a long event's two words. */
    size_t need = (sizeof(struct staged_record) + 16 + entry_len + 7) &
                  ~(size_t)7;
    uint64_t head = atomic_load_explicit(&fp.head, memory_order_relaxed);
    for (unsigned a = 0; a < FP_MAX_ARRAYS; a++) {
        if (!(recording >> a & 1))
            continue;
        struct staged_record *r = reserve(need, &head);
        if (!r)
            return FP_FULL;  /* nothing published: head not stored */
        uint64_t ts = read_clock(&fp.arrays[a]);
        uint64_t *last = &fp.last_ts[a][t->cpu];
        uint32_t ext;
        size_t at = encode_event(r->encoded, (uint32_t)entry_len, ts - *last,
                                 &ext);
        unsigned char *entry = r->encoded + at;
        struct trace_entry e = {.type = f->ids[index], .pid = (int32_t)in->pid};
        memcpy(entry, &e, sizeof(e));
        memcpy(entry + sizeof(e), data + 4, arg->size - 4);
        /* Each array's entry, as the kernel validates each file's
         * reservation (their headers differ). */
        if (ev->nval && validate(ev, entry, entry_len))
            return FP_INVALID;  /* the engine answers */
        r->size = (uint32_t)need;
        r->cpu = t->cpu;
        r->array = (uint8_t)a;
        r->pad = 0;
        r->ts = ts;
        r->previous = *last;
        r->pid = (int32_t)in->pid;
        r->tgid = t->tgid;
        r->len = (uint32_t)entry_len;
        r->copy_len = (uint32_t)(at + entry_len);
        r->event_len = ext + event_length((uint32_t)entry_len);
        r->pad2 = 0;
        memcpy(r->comm, t->comm, sizeof(r->comm));
        *last = ts;
    }
    struct st_batch *batch = NULL;
    if (nm) {
        int why = perf_samples(in, arg, data, ev, t, entry_len, m, nm, starts,
                               &head, dev_fd, &batch);
        if (why)
            return why;
    }
    atomic_store_explicit(&fp.head, head, memory_order_release);
    /* Only a storer that cannot start fails: the write is recorded (the
     * engine takes the samples in, and a fill reads them), so it is still
     * answered, by fp_handle, without the stores. */
    *replied = batch && st_queue(batch) > 0;
    fp.stats.staged++;
    *wake = atomic_load_explicit(&fp.wake, memory_order_acquire) ||
            head - atomic_load_explicit(&fp.tail, memory_order_relaxed) >
                fp.ring_size / 2;
    return FP_SERVED;
}

int fp_handle(const unsigned char *req, size_t len, int dev_fd)
{
    const struct fuse_in_header *in = (const void *)req;
    if (in->opcode != FUSE_WRITE ||
        !atomic_load_explicit(&fp.on, memory_order_acquire))
        return 0;
    const struct fuse_write_in *arg = (const void *)(in + 1);
    const unsigned char *data = (const void *)(arg + 1);
    if (len < sizeof(*in) + sizeof(*arg) ||
        len - sizeof(*in) - sizeof(*arg) != arg->size)
        return 0;
    int wake = 0, why, replied = 0;
    struct proc_facts facts = {0};
    /* Each round adds a fact (the system call, then the stat), so three
     * rounds do unless the table changed the writer meanwhile: then the
     * engine decides.  The last look at the table decides. */
    for (int round = 0;; round++) {
        pthread_mutex_lock(&fp.lock);
        why = decide(in, arg, data, &wake, &facts, dev_fd, &replied);
        if (why == FP_READ_PROC && round == 3)
            why = FP_TASK;
        if (why == FP_SERVED)
            fp.stats.served++;
        else if (why != FP_READ_PROC)
            fp.stats.declined[why]++;
        pthread_mutex_unlock(&fp.lock);
        if (why != FP_READ_PROC)
            break;
        if (facts.want == WANT_SYSCALL)
            read_syscall(&facts, in->pid);
        else
            read_stat(&facts);
    }
    if (why == FP_NO_FILE)
        return 0;  /* not user_events_data: nothing to say */
    if (atomic_load_explicit(&fp.debug, memory_order_relaxed))
        fuse_log(FUSE_LOG_DEBUG,
                 "tracefs fast path: unique: %llu, user_events write of %u "
                 "bytes by %u: %s\n", (unsigned long long)in->unique,
                 arg->size, in->pid,
                 why == FP_SERVED ? "served natively"
                                  : reasons[why]);
    if (why != FP_SERVED)
        return 0;
    if (replied)
        goto woken;  /* the storer replies once the samples are stored */
    struct fuse_out_header out = {.len = sizeof(out) +
                                         sizeof(struct fuse_write_out),
                                  .unique = in->unique};
    struct fuse_write_out wout = {.size = arg->size};
    struct iovec iov[2] = {{&out, sizeof(out)}, {&wout, sizeof(wout)}};
    (void)!writev(dev_fd, iov, 2);  /* ENOENT: the writer is gone */
woken:
    if (wake)
        rx_push_drain();
    return 1;
}

void fp_get_stats(struct fp_stats *out)
{
    pthread_mutex_lock(&fp.lock);
    *out = fp.stats;
    pthread_mutex_unlock(&fp.lock);
}
