// cflags: -I/usr/include/fuse3 -DFUSE_USE_VERSION=314
// link: -lfuse3
/*
 * The fast path (tracefs_fuse/fuse/_native/fastpath.c) compiled into this
 * test with its allocations and its open() calls interposed: an allocation
 * can be made to fail, and an open() while fp.lock is held is a failure
 * (the lock is never held across anything that waits, /proc reads
 * included).  Out of memory, a write must go to the engine (fp_handle
 * returns 0) or be served with its record staged: never acknowledged and
 * recorded nowhere.  Prints "ok <check>" per check, exits 1 on any failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail_all;        /* every allocation fails */
static int fail_nth;        /* the nth allocation from now fails (1-based) */
static int opens, opens_under_lock;

static int should_fail(void)
{
    return fail_all || (fail_nth && --fail_nth == 0);
}

static void *fault_malloc(size_t n) { return should_fail() ? NULL : malloc(n); }
static void *fault_calloc(size_t n, size_t m) { return should_fail() ? NULL : calloc(n, m); }
static void *fault_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n); }
static int checked_open(const char *path, int flags, ...);

#define malloc(n) fault_malloc(n)
#define calloc(n, m) fault_calloc(n, m)
#define realloc(p, n) fault_realloc(p, n)
#define open checked_open
#undef _GNU_SOURCE  /* defined again there */
#include "../../tracefs_fuse/fuse/_native/fastpath.c"
#undef open

/* The receiver's side, which fastpath.c calls to wake the engine. */
void rx_push_drain(void) {}

/* The storer's side: a batch is its stores counted; making one can fail. */
struct st_batch {
    size_t n;
};
static int batch_fails;
static size_t stores_queued, batches_queued;

struct st_batch *st_batch_raw(struct fuse_session *se, const struct st_store *stores,
                              size_t n, int fd, uint64_t unique, uint32_t size)
{
    (void)se, (void)stores, (void)fd, (void)unique, (void)size;
    struct st_batch *b = batch_fails ? NULL : malloc(sizeof(*b));
    if (b)
        b->n = n;
    return b;
}

long long st_queue(struct st_batch *b)
{
    stores_queued += b->n;
    free(b);
    return (long long)++batches_queued;
}

static int checked_open(const char *path, int flags, ...)
{
    opens++;
    /* The lock is a default mutex: trylock by its holder fails (EBUSY). */
    if (pthread_mutex_trylock(&fp.lock) == 0)
        pthread_mutex_unlock(&fp.lock);
    else
        opens_under_lock++;
    return open(path, flags);
}

static int failures;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

#define FH 7
#define EVENT 5

static struct {
    struct fuse_in_header in;
    struct fuse_write_in arg;
    int32_t index;
    uint32_t payload;
} __attribute__((packed)) req;

static int dev_fd;

/* One write of event EVENT through fp_handle: 1 if served natively. */
static int write_event(void)
{
    req.in.len = sizeof(req);
    req.in.opcode = FUSE_WRITE;
    req.in.unique++;
    req.in.pid = (uint32_t)syscall(SYS_gettid);
    req.arg.fh = FH;
    req.arg.offset = 0;
    req.arg.size = sizeof(req.index) + sizeof(req.payload);
    req.index = 0;
    req.payload = 0x12345678;
    return fp_handle((const unsigned char *)&req, sizeof(req), dev_fd);
}

static void set_array(void)
{
    uint8_t mask = 0xff;
    fp_set_array(0, 1, 4096, &mask, 1, CLOCK_MONOTONIC, 1);
}

static int set_event(int enabled)
{
    return fp_set_event(EVENT, enabled, 0, 1, 4, NULL, 0);
}

/* Served with a record staged, then taken in (the engine's intake). */
static int served_and_staged(void)
{
    int served = write_event(), pending = fp_pending();
    const unsigned char *data;
    size_t len;
    for (fp_staged(&data, &len); len; fp_staged(&data, &len))
        fp_consumed(len);
    return served && pending;
}

int main(void)
{
    dev_fd = open("/dev/null", O_WRONLY);
    if (dev_fd < 0)
        return 2;

    /* fp_configure: all or nothing, every allocation in turn failing. */
    int all_refused = 1;
    for (int n = 1; n <= 1 + FP_MAX_ARRAYS; n++) {
        fail_nth = n;
        int rc = fp_configure(2, 1 << 16, 0);
        fail_nth = 0;
        if (rc != -ENOMEM || atomic_load(&fp.on)) {
            printf("allocation %d failed: fp_configure returned %d, on %d\n", n, rc,
                   atomic_load(&fp.on));
            all_refused = 0;
        }
    }
    check(all_refused, "fp_configure refuses (-ENOMEM, off) when any allocation fails");
    check(fp_configure(2, 1 << 16, 0) == 0 && atomic_load(&fp.on), "fp_configure then succeeds");

    uint16_t ids[1] = {EVENT};
    fp_set_limits(1 << 20, 256);
    fp_set_slots(FH, 0, ids, 1);
    set_event(1);
    set_array();
    /* ttl 0: every write re-reads the writer's stat from /proc. */
    fp_set_task((pid_t)syscall(SYS_gettid), getpid(), 0, "t", 1, 0);
    check(served_and_staged(), "an enabled, recorded event's write is served and staged");
    check(opens > 0 && opens_under_lock == 0, "/proc is read without fp.lock held");

    /* tracing_cpumask's copy cannot be allocated. */
    fail_all = 1;
    set_array();
    fail_all = 0;
    unsigned long long before = fp.stats.declined[FP_TABLE];
    int served = write_event();
    check(!served && !fp_pending() && fp.stats.declined[FP_TABLE] == before + 1,
          "without the cpumask the write goes to the engine");
    set_array();
    check(served_and_staged(), "with the cpumask back the write is served again");

    /* A disable whose publication cannot be allocated. */
    fail_all = 1;
    int rc = set_event(0);
    fail_all = 0;
    check(rc == -ENOMEM && !write_event(),
          "an event update that cannot be allocated leaves its writes to the engine");
    set_event(1);
    check(served_and_staged(), "the event published again is served again");

    /* A perf event of this thread on EVENT (TID and RAW samples), its ring
     * read-only and one page. */
    struct fp_perf_ring_in ring = {.sink = 1, .ino = 9, .size = 4096, .watermark = 2048};
    struct fp_perf_in perf = {.id = 1, .sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_RAW,
                              .event = EVENT, .cpu = -1, .tid = (int32_t)syscall(SYS_gettid),
                              .clock = CLOCK_MONOTONIC, .ring = 0, .enabled = 1};
    fp_set_session((struct fuse_session *)&ring);  /* any session: the storer is faked */
    fp_set_event(EVENT, 1, 1, 1, 4, NULL, 0);
    const size_t sizes[3] = {sizeof(ring), sizeof(perf), sizeof(struct fp_announced_in)};
    fp_set_perf(&ring, 1, &perf, 1, NULL, 0, sizes);
    check(served_and_staged() && batches_queued == 1 && stores_queued == 2 &&
              fp.rings[0].now.head == 8 + 8 + 8 + 4 + 4 + 8,
          "a perf sample is written natively: its stores queued with the reply");

    fail_all = 1;
    rc = fp_set_perf(&ring, 1, &perf, 1, NULL, 0, sizes);
    fail_all = 0;
    before = fp.stats.declined[FP_PERF];
    check(rc == -ENOMEM && !write_event() && fp.stats.declined[FP_PERF] == before + 1,
          "a perf table that cannot be allocated leaves the samples to the engine");

    fp_set_perf(&ring, 1, &perf, 1, NULL, 0, sizes);
    batch_fails = 1;
    served = write_event();
    batch_fails = 0;
    check(!served && !fp_pending() && fp.stats.declined[FP_STORE] == 1 &&
              fp.rings[0].now.head == 0 && served_and_staged() && fp.rings[0].now.head == 40,
          "a batch that cannot be made: the engine's write, and the ring's place not taken");

    fp_revoke_perf();
    check(!write_event() && fp.stats.declined[FP_PERF] == before + 2,
          "revoked, the perf table leaves the samples to the engine");
    check(opens_under_lock == 0, "no open() under fp.lock at all");

    return failures ? 1 : 0;
}
