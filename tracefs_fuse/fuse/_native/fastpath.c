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
} fp = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const reasons[FP_NR_REASONS] = {
    "served", "other file", "position", "index", "disabled", "min_size",
    "task", "clock", "invalid", "staging_full", "large", "table"};

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

int fp_set_event(uint16_t id, int enabled, uint8_t recorders,
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

/* Not a decision: fp_handle() must read what `facts` lacks, then ask again. */
#define FP_READ_PROC (-1)

/* Caller holds fp.lock.  FP_SERVED with the records staged, why not, or
 * FP_READ_PROC with what to read from /proc in `facts` (tid, tgid). */
static int decide(const struct fuse_in_header *in,
                  const struct fuse_write_in *arg,
                  const unsigned char *data, int *wake,
                  struct proc_facts *facts)
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
    if (!recording)
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
    atomic_store_explicit(&fp.head, head, memory_order_release);
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
    int wake = 0, why;
    struct proc_facts facts = {0};
    /* Each round adds a fact (the system call, then the stat), so three
     * rounds do unless the table changed the writer meanwhile: then the
     * engine decides.  The last look at the table decides. */
    for (int round = 0;; round++) {
        pthread_mutex_lock(&fp.lock);
        why = decide(in, arg, data, &wake, &facts);
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
    struct fuse_out_header out = {.len = sizeof(out) +
                                         sizeof(struct fuse_write_out),
                                  .unique = in->unique};
    struct fuse_write_out wout = {.size = arg->size};
    struct iovec iov[2] = {{&out, sizeof(out)}, {&wout, sizeof(wout)}};
    (void)!writev(dev_fd, iov, 2);  /* ENOENT: the writer is gone */
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
