/*
 * The receiver: a native thread that always reads /dev/fuse.
 *
 * Why: the daemon reads and writes client memory (names, structs, enable
 * bits) from its Python thread.  If that memory is a not-yet-touched page of
 * a mapping of one of our own files, the access faults, and the fault becomes
 * a FUSE_READ (a page-cache fill) sent to this very daemon, whose only reader
 * of /dev/fuse used to be the thread now blocked in the access: every client
 * hung until the daemon was killed (issue 11, item 1).  A check of
 * /proc/<pid>/maps before the access cannot close it (another client thread
 * can remap between check and access).  So a second thread always reads:
 *
 *   - a page-cache fill (FUSE_READ without FUSE_READ_LOCKOWNER) whose
 *     fuse_in_header.pid is one of the daemon's own threads is answered EIO at
 *     once: the fault fails, the access returns EFAULT, the engine answers
 *     EFAULT.  Nothing here waits for the Python thread, the GIL or any lock
 *     the Python thread may hold;
 *   - a request the fast path (the rx_handler) answers natively is answered;
 *   - everything else is queued for libfuse's session loop (pyfuse3, in the
 *     trio thread), which takes it through the custom io's read (rx_take).
 *
 * libfuse's session fd is an eventfd that is readable while items are
 * queued, so pyfuse3's wait_readable() and the whole of libfuse keep working
 * unchanged; replies still go out through the custom io's writev.
 *
 * Stopping: the thread is cancelled (pthread_cancel) and joined.  It enables
 * cancellation only around its read(2) of /dev/fuse, a cancellation point,
 * and holds nothing there; glibc (2.34+) acts on a cancel either before the
 * read starts or while it blocks, never after it returned a request.
 *
 * A fill someone else caused can be waited for too: if a client thread
 * faults on a page of our file (the page stays locked while its read is
 * queued for Python) and the Python thread's access to client memory reaches
 * that same page, the access waits for the page lock, the lock for the read,
 * the read for Python.  Every thread says when it is inside an access
 * (rx_access_begin/end); a watchdog thread, awake only while fills are
 * queued, answers every queued fill EIO once the Python thread's access has
 * lasted RX_ACCESS_STUCK_NS.  The faulting client gets SIGBUS (or EFAULT), the page
 * is unlocked, the access's retried fault is the daemon's own (EIO above),
 * and the access fails: the engine answers EFAULT.  An access that is not
 * stuck lasts microseconds, so no fill is refused unless one is.
 *
 * An access can also wait on another FUSE filesystem: a client that mounts
 * one of its own (fusermount3 lets any user) and points us at a mapping of
 * a file there whose reads are never answered.  Nothing in this process can
 * end that wait, short of dying.  Once one access has lasted
 * RX_FOREIGN_STUCK_NS, a short-lived thread looks the address up in the
 * target's /proc/<pid>/maps (not in the watchdog: that read takes the
 * target's mmap lock, which a writer may be queued on) and aborts the first
 * FUSE connection other than ours mapped in the range that has requests
 * unanswered, and no other (one that answers is never aborted), through
 * fusectl (/sys/fs/fuse/connections/<dev>/abort; root, or the mount's
 * owner): the access fails, the engine answers EFAULT, and that filesystem
 * is gone, as `fusermount3 -u -z` plus a dead daemon would leave it.
 *
 * Several threads access client memory: the Python thread, and the workers
 * of the clients' lanes (process/_lanes.py: where only the caller waits).
 * Each access takes one of RX_SLOTS slots for its duration (an access that
 * finds none is not watched).  Every slot's access is watched for the 1 s
 * rule; only the Python thread's for the 100 ms rule: a fill that a
 * worker's access waits for is served by the Python thread, which that
 * access does not hold up.
 *
 * Threads share the queue under rx.lock; what they share outside it is a
 * C11 atomic.  A slot's current access (pid, addr, size, since) is a
 * seqlock: `since` is 0 while the other three change, and a reader that
 * copied them checks, after an acquire fence, that `since` did not move.
 *
 * The two items that must never be lost, the drain and the device's end,
 * are not allocated: each has its own static item (at most one of each is
 * ever queued), so running out of memory cannot hide the end of the device
 * from the session loop or a drain from a blocked reader.
 *
 * Kernel: fs/fuse/dev.c (fuse_dev_do_read: one whole request per read, or
 * ENODEV once the connection is gone), fs/fuse/file.c (fuse_send_read: page
 * cache fills carry no lock owner).
 */
#define _GNU_SOURCE
#include "receiver.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

struct item {
    struct item *next;
    enum rx_item_kind kind;
    int fill;    /* a page-cache fill (see is_fill) */
    size_t len;  /* RX_REQUEST: bytes of data; RX_END: the errno */
    unsigned char data[];
};

/* How often the watchdog looks while fills are queued, and otherwise. */
#define WATCH_PERIOD_NS (RX_ACCESS_STUCK_NS / 4)
#define IDLE_PERIOD_NS (RX_FOREIGN_STUCK_NS / 4)

#define FUSECTL "/sys/fs/fuse/connections"

static struct {
    int dev_fd, event_fd;
    pid_t tgid;
    size_t bufsize;
    rx_handler handler;
    pthread_t thread;
    int started;           /* thread created, not yet joined */
    pthread_mutex_t lock;  /* guards everything below */
    struct item *head, **tailp;
    size_t depth;
    int signalled;         /* event_fd holds a count */
    int drain_queued;
    int running;
    size_t fills;          /* queued page-cache fills */
    pthread_t watchdog;
    int watching;          /* watchdog created, not yet joined */
    int stopping;          /* the watchdog must end */
    int unsticking;        /* an unstick() thread runs */
    pthread_cond_t fill_queued;  /* initialised by rx_start (monotonic) */
    struct rx_stats stats;
} rx = {.dev_fd = -1, .event_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The items that are never allocated (see the top of this file). */
static struct item drain_item = {.kind = RX_DRAIN}, end_item = {.kind = RX_END};

/* One thread's current access to client memory: CLOCK_MONOTONIC (ns) at
 * which it began (0 outside one), whose memory and where; `since` of the
 * last access of the slot whose wait a connection abort ended; whether a
 * thread holds the slot, and whether that is the Python thread. */
struct slot {
    _Atomic uint64_t since;
    _Atomic pid_t pid;
    _Atomic uint64_t addr, size;
    _Atomic uint64_t aborted_since;
    atomic_int taken;
    atomic_int python;
};
#define RX_SLOTS 64
static struct slot slots[RX_SLOTS];
/* The calling thread's slot during an access (-1: none). */
static __thread int my_slot = -1;
/* The Python thread (rx_start's caller), whose accesses fills wait for. */
static _Atomic pid_t python_tid;

/* The counters of rx_stats that threads bump without rx.lock. */
static atomic_ullong received, served_natively, own_fills_refused,
    stuck_fills_refused, foreign_aborted;

/* Our own mount's device, as /proc/<pid>/maps writes it; never aborted. */
static unsigned own_major, own_minor;
static atomic_int own_known;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The seqlock's writer (the slot's thread only): `since` 0, then the
 * release fence orders that before the new pid, addr and size, so a reader
 * that saw any of them sees `since` changed when it checks again. */
void rx_access_begin(pid_t pid, uint64_t addr, uint64_t size)
{
    if (my_slot < 0) {
        for (int i = 0; i < RX_SLOTS; i++) {
            int free_ = 0;
            if (atomic_compare_exchange_strong(&slots[i].taken, &free_, 1)) {
                my_slot = i;
                break;
            }
        }
        if (my_slot < 0)
            return;  /* every slot taken: this access is not watched */
        atomic_store(&slots[my_slot].python,
                     (pid_t)syscall(SYS_gettid) == atomic_load(&python_tid));
    }
    struct slot *sl = &slots[my_slot];
    atomic_store_explicit(&sl->since, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&sl->pid, pid, memory_order_relaxed);
    atomic_store_explicit(&sl->addr, addr, memory_order_relaxed);
    atomic_store_explicit(&sl->size, size, memory_order_relaxed);
    atomic_store_explicit(&sl->since, now_ns(), memory_order_release);
}

void rx_set_own_device(unsigned major, unsigned minor)
{
    own_major = major;
    own_minor = minor;
    atomic_store_explicit(&own_known, 1, memory_order_release);
}

int rx_access_end(void)
{
    if (my_slot < 0)
        return 0;
    struct slot *sl = &slots[my_slot];
    uint64_t since = atomic_exchange_explicit(&sl->since, 0, memory_order_acq_rel);
    int aborted = since != 0 &&
                  since == atomic_load_explicit(&sl->aborted_since, memory_order_acquire);
    atomic_store(&sl->taken, 0);
    my_slot = -1;
    return aborted;
}

/* Caller holds rx.lock. */
static void signal_python(void)
{
    if (!rx.signalled) {
        uint64_t one = 1;
        /* Cannot fail short of a bug: the counter stays far from its max. */
        if (write(rx.event_fd, &one, sizeof(one)) == sizeof(one))
            rx.signalled = 1;
    }
}

/* Caller holds rx.lock. */
static void enqueue(struct item *it)
{
    it->next = NULL;
    *rx.tailp = it;
    rx.tailp = &it->next;
    rx.depth++;
    if (rx.depth > rx.stats.queue_peak)
        rx.stats.queue_peak = rx.depth;
    if (it->fill && rx.fills++ == 0)
        pthread_cond_signal(&rx.fill_queued);
    signal_python();
}

static void push_request(const void *data, size_t len, int fill)
{
    struct item *it = malloc(sizeof(*it) + len);
    if (!it) {
        /* Out of memory: the request cannot be kept; the kernel's caller
         * gets ENOMEM rather than a wait for ever. */
        rx_reply_err(rx.dev_fd, ((const struct fuse_in_header *)data)->unique,
                     ENOMEM);
        return;
    }
    it->kind = RX_REQUEST;
    it->fill = fill;
    it->len = len;
    memcpy(it->data, data, len);
    pthread_mutex_lock(&rx.lock);
    rx.stats.queued++;
    enqueue(it);
    pthread_mutex_unlock(&rx.lock);
}

/* The device ended with `err`: the last item, queued once. */
static void push_end(int err)
{
    pthread_mutex_lock(&rx.lock);
    end_item.len = (size_t)err;
    enqueue(&end_item);
    pthread_mutex_unlock(&rx.lock);
}

/* Frees an item taken off the queue (the static ones stay). */
static void release(struct item *it)
{
    if (it != &drain_item && it != &end_item)
        free(it);
}

void rx_push_drain(void)
{
    pthread_mutex_lock(&rx.lock);
    if (!rx.drain_queued) {
        rx.drain_queued = 1;
        rx.stats.drains_queued++;
        enqueue(&drain_item);
    }
    pthread_mutex_unlock(&rx.lock);
}

void rx_reply_err(int dev_fd, uint64_t unique, int err)
{
    struct fuse_out_header out = {
        .len = sizeof(out), .error = -err, .unique = unique};
    /* ENOENT: the request was interrupted and is gone; nothing to do. */
    (void)!write(dev_fd, &out, sizeof(out));
}

/* A page-cache fill: a FUSE_READ without a lock owner (read(2) has one). */
static int is_fill(const unsigned char *req, size_t len)
{
    const struct fuse_in_header *in = (const void *)req;
    const struct fuse_read_in *arg = (const void *)(in + 1);
    return in->opcode == FUSE_READ && len >= sizeof(*in) + sizeof(*arg) &&
           !(arg->read_flags & FUSE_READ_LOCKOWNER);
}

/* Writeback of a writable shared mapping (a perf ring's reader page):
 * FUSE_WRITE_CACHE, "delayed write from page cache". */
static int is_writeback(const unsigned char *req, size_t len)
{
    const struct fuse_in_header *in = (const void *)req;
    const struct fuse_write_in *arg = (const void *)(in + 1);
    return in->opcode == FUSE_WRITE && len >= sizeof(*in) + sizeof(*arg) &&
           (arg->write_flags & FUSE_WRITE_CACHE);
}

static void reply_written(int dev_fd, const unsigned char *req)
{
    const struct fuse_in_header *in = (const void *)req;
    const struct fuse_write_in *arg = (const void *)(in + 1);
    struct {
        struct fuse_out_header out;
        struct fuse_write_out write;
    } reply = {{.len = sizeof(reply), .error = 0, .unique = in->unique},
               {.size = arg->size, .padding = 0}};
    (void)!write(dev_fd, &reply, sizeof(reply));
}

/* A fill caused by one of the daemon's own threads: its access to a client's
 * memory faulted on a page of our own file. */
static int own_fill(const unsigned char *req)
{
    const struct fuse_in_header *in = (const void *)req;
    /* tgkill(tgid, tid, 0) succeeds only for a thread of our group. */
    return in->pid != 0 && syscall(SYS_tgkill, rx.tgid, (pid_t)in->pid, 0) == 0;
}

/* Caller holds rx.lock.  Unlinks every queued fill into *out. */
static void take_fills(struct item **out)
{
    for (struct item **pp = &rx.head; *pp;) {
        struct item *it = *pp;
        if (!it->fill) {
            pp = &it->next;
            continue;
        }
        *pp = it->next;
        if (rx.tailp == &it->next)
            rx.tailp = pp;
        rx.depth--;
        rx.fills--;
        it->next = *out;
        *out = it;
    }
}

struct stuck {
    int slot;
    pid_t pid;
    uint64_t addr, size, since;
};

/* fusectl, mounted if it is not (needs privilege). */
static void mount_fusectl(void)
{
    struct stat st, parent;
    if (stat(FUSECTL, &st) == 0 && stat(FUSECTL "/..", &parent) == 0 &&
        st.st_dev == parent.st_dev)
        /* Not a mount point: fusectl is not mounted (systemd mounts it at
         * boot; a container may not).  Without privilege this fails. */
        mount("fusectl", FUSECTL, "fusectl", 0, NULL);
}

/* Aborts FUSE connection `minor` (MKDEV(0, minor): a connection's directory
 * is named by its superblock's dev_t) through fusectl. */
static void abort_connection(unsigned minor, struct slot *sl, uint64_t since)
{
    char path[64];
    snprintf(path, sizeof(path), FUSECTL "/%u/abort", minor);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;  /* not a FUSE connection (another anonymous device) */
    /* Marked first: the access it ends looks when it returns. */
    atomic_store_explicit(&sl->aborted_since, since, memory_order_release);
    if (write(fd, "1", 1) == 1)
        atomic_fetch_add_explicit(&foreign_aborted, 1, memory_order_relaxed);
    else
        atomic_store_explicit(&sl->aborted_since, 0, memory_order_release);
    close(fd);
}

/* Whether FUSE connection `minor` has requests unanswered (fusectl's
 * "waiting": sent or queued, no reply yet).  A connection that answers has
 * none once our access's fill was served. */
static int connection_waits(unsigned minor)
{
    char path[64], buf[32];
    snprintf(path, sizeof(path), FUSECTL "/%u/waiting", minor);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    return atoi(buf) > 0;
}

/* Aborts the FUSE connection (not ours) an access that waited too long is
 * stuck on: /proc/<pid>/maps lines are "start-end perms offset MAJ:MIN inode
 * path", in hex; FUSE's devices are anonymous (major 0).  An access goes
 * through its range in address order and waits at its first page not yet
 * there, so of the FUSE files mapped in the range only the first whose
 * connection has requests unanswered can hold it, and only that one is
 * aborted: one that answers (an innocent mount someone pointed us at,
 * issue 19 item 4) is never. */
static void *unstick(void *arg)
{
    struct stuck job = *(struct stuck *)arg;
    free(arg);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)job.pid);
    /* Until our own device is known, nothing can be told apart from it. */
    FILE *maps = atomic_load_explicit(&own_known, memory_order_acquire) ? fopen(path, "re")
                                                                        : NULL;
    if (maps)
        mount_fusectl();
    char *line = NULL;
    size_t cap = 0;
    while (maps && getline(&line, &cap, maps) > 0) {
        unsigned long long start, end;
        unsigned major, minor;
        if (sscanf(line, "%llx-%llx %*s %*s %x:%x", &start, &end, &major,
                   &minor) != 4 || end <= job.addr)
            continue;
        if (start >= job.addr + job.size)
            break;  /* the lines are in address order */
        /* 00:00 is no device (anonymous memory); anonymous devices start at 1. */
        if (major == 0 && minor != 0 && !(major == own_major && minor == own_minor) &&
            connection_waits(minor)) {
            struct slot *sl = &slots[job.slot];
            if (atomic_load_explicit(&sl->since, memory_order_acquire) == job.since)
                abort_connection(minor, sl, job.since);
            break;
        }
    }
    free(line);
    if (maps)
        fclose(maps);
    pthread_mutex_lock(&rx.lock);
    rx.unsticking = 0;
    pthread_mutex_unlock(&rx.lock);
    return NULL;
}

/* Caller holds rx.lock. */
static void start_unstick(int slot, uint64_t since)
{
    struct stuck *job = malloc(sizeof(*job));
    if (!job)
        return;
    struct slot *sl = &slots[slot];
    /* The seqlock's reader: `since` was loaded (acquire) by the caller. */
    job->slot = slot;
    job->pid = atomic_load_explicit(&sl->pid, memory_order_relaxed);
    job->addr = atomic_load_explicit(&sl->addr, memory_order_relaxed);
    job->size = atomic_load_explicit(&sl->size, memory_order_relaxed);
    job->since = since;
    /* Orders the three loads above before the re-check below. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&sl->since, memory_order_relaxed) != since) {
        free(job);  /* a new access began meanwhile: pid/addr may be its */
        return;
    }
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, unstick, job) == 0)
        rx.unsticking = 1;
    else
        free(job);
    pthread_attr_destroy(&attr);
}

/* Answers the queued fills EIO once the Python thread's access to client
 * memory has been stuck for RX_ACCESS_STUCK_NS, and hands an access (of any
 * slot) stuck for RX_FOREIGN_STUCK_NS to unstick(), one at a time (see the
 * top of this file). */
static void *watch(void *unused)
{
    (void)unused;
    static uint64_t handed[RX_SLOTS];  /* the stuck access unstick() was given */
    pthread_mutex_lock(&rx.lock);
    while (!rx.stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += rx.fills ? WATCH_PERIOD_NS : IDLE_PERIOD_NS;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&rx.fill_queued, &rx.lock, &until);
        if (rx.stopping)
            continue;
        uint64_t now = now_ns(), python_stuck = 0;
        for (int i = 0; i < RX_SLOTS; i++) {
            uint64_t since = atomic_load_explicit(&slots[i].since, memory_order_acquire);
            if (since == 0 || since > now)
                continue;
            uint64_t stuck = now - since;
            if (atomic_load(&slots[i].python))
                python_stuck = stuck;
            if (stuck >= RX_FOREIGN_STUCK_NS && since != handed[i] && !rx.unsticking) {
                handed[i] = since;
                start_unstick(i, since);
            }
        }
        if (rx.fills == 0 || python_stuck < RX_ACCESS_STUCK_NS)
            continue;
        struct item *refused = NULL;
        take_fills(&refused);
        if (!rx.head && rx.signalled) {
            uint64_t count;
            (void)!read(rx.event_fd, &count, sizeof(count));
            rx.signalled = 0;
        }
        pthread_mutex_unlock(&rx.lock);
        while (refused) {
            struct item *next = refused->next;
            rx_reply_err(rx.dev_fd,
                         ((const struct fuse_in_header *)refused->data)->unique,
                         EIO);
            atomic_fetch_add_explicit(&stuck_fills_refused, 1,
                                      memory_order_relaxed);
            release(refused);
            refused = next;
        }
        pthread_mutex_lock(&rx.lock);
    }
    pthread_mutex_unlock(&rx.lock);
    return NULL;
}

static void *receive(void *unused)
{
    (void)unused;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    unsigned char *buf = malloc(rx.bufsize);
    int err = ENOMEM;
    while (buf) {
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
        ssize_t n = read(rx.dev_fd, buf, rx.bufsize);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
        if (n < 0) {
            /* ENOENT: the request was interrupted before we read it. */
            if (errno == EINTR || errno == ENOENT)
                continue;
            err = errno;  /* ENODEV: unmounted or aborted */
            break;
        }
        if ((size_t)n < sizeof(struct fuse_in_header)) {
            err = EIO;  /* libfuse: "short read on fuse device" */
            break;
        }
        atomic_fetch_add_explicit(&received, 1, memory_order_relaxed);
        int fill = is_fill(buf, (size_t)n);
        if (fill && own_fill(buf)) {
            atomic_fetch_add_explicit(&own_fills_refused, 1,
                                      memory_order_relaxed);
            rx_reply_err(rx.dev_fd,
                         ((const struct fuse_in_header *)buf)->unique, EIO);
            continue;
        }
        if (is_writeback(buf, (size_t)n)) {
            /* The daemon's pages are the truth: the stores are dropped.
             * Answered here, never queued for the trio thread: the task
             * waiting for it (munmap or exit of a writable shared mapping,
             * fuse_vma_close's synchronous writeback, in the task's own
             * context) may hold what that thread's next look at the task
             * waits for. */
            reply_written(rx.dev_fd, buf);
            continue;
        }
        if (rx.handler && rx.handler(buf, (size_t)n, rx.dev_fd)) {
            atomic_fetch_add_explicit(&served_natively, 1, memory_order_relaxed);
            continue;
        }
        push_request(buf, (size_t)n, fill);
    }
    free(buf);
    pthread_mutex_lock(&rx.lock);
    rx.running = 0;
    pthread_mutex_unlock(&rx.lock);
    push_end(err);
    return NULL;
}

static void stop_watchdog(void)
{
    if (!rx.watching)
        return;
    pthread_mutex_lock(&rx.lock);
    rx.stopping = 1;
    pthread_cond_signal(&rx.fill_queued);
    pthread_mutex_unlock(&rx.lock);
    pthread_join(rx.watchdog, NULL);
    rx.watching = 0;
}

int rx_start(int dev_fd, int event_fd, size_t bufsize, rx_handler handler)
{
    if (rx.started)
        return -EBUSY;
    rx.dev_fd = dev_fd;
    rx.event_fd = event_fd;
    rx.bufsize = bufsize;
    rx.handler = handler;
    rx.tgid = getpid();
    atomic_store(&python_tid, (pid_t)syscall(SYS_gettid));
    rx.head = NULL;
    rx.tailp = &rx.head;
    rx.depth = 0;
    rx.signalled = rx.drain_queued = 0;
    rx.fills = 0;
    rx.stopping = 0;
    memset(&rx.stats, 0, sizeof(rx.stats));
    atomic_store(&received, 0);
    atomic_store(&served_natively, 0);
    atomic_store(&own_fills_refused, 0);
    atomic_store(&stuck_fills_refused, 0);
    atomic_store(&foreign_aborted, 0);
    /* The watchdog's deadlines are CLOCK_MONOTONIC, like access_since (a
     * condition variable's clock is CLOCK_REALTIME unless told). */
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&rx.fill_queued, &cattr);
    pthread_condattr_destroy(&cattr);
    int rc = pthread_create(&rx.watchdog, NULL, watch, NULL);
    if (rc) {
        rx.dev_fd = rx.event_fd = -1;  /* still the caller's */
        return -rc;
    }
    pthread_setname_np(rx.watchdog, RX_WATCHDOG_NAME);
    rx.watching = 1;
    rx.running = 1;
    rc = pthread_create(&rx.thread, NULL, receive, NULL);
    if (rc) {
        rx.running = 0;
        stop_watchdog();
        rx.dev_fd = rx.event_fd = -1;  /* still the caller's */
        return -rc;
    }
    /* Named, so that tools (and bench/) can tell it from the trio thread. */
    pthread_setname_np(rx.thread, RX_THREAD_NAME);
    rx.started = 1;
    return 0;
}

int rx_stop(void)
{
    if (rx.started) {
        pthread_cancel(rx.thread);  /* ESRCH if it ended: harmless */
        pthread_join(rx.thread, NULL);
        rx.started = 0;
    }
    stop_watchdog();
    pthread_mutex_lock(&rx.lock);
    for (struct item *it = rx.head, *next; it; it = next) {
        next = it->next;
        release(it);
    }
    rx.head = NULL;
    rx.tailp = &rx.head;
    rx.depth = 0;
    rx.fills = 0;
    rx.running = 0;
    pthread_mutex_unlock(&rx.lock);
    int fd = rx.dev_fd;
    rx.dev_fd = -1;
    return fd;
}

int rx_running(void)
{
    pthread_mutex_lock(&rx.lock);
    int running = rx.running;
    pthread_mutex_unlock(&rx.lock);
    return running;
}

enum rx_item_kind rx_take(void *buf, size_t len, size_t *n)
{
    pthread_mutex_lock(&rx.lock);
    struct item *it = rx.head;
    if (it && it->kind == RX_END) {
        /* Sticky: every later take sees the end too. */
        *n = it->len;
        pthread_mutex_unlock(&rx.lock);
        return RX_END;
    }
    if (it) {
        rx.head = it->next;
        if (!rx.head)
            rx.tailp = &rx.head;
        rx.depth--;
        if (it->fill)
            rx.fills--;
        if (it->kind == RX_DRAIN)
            rx.drain_queued = 0;
    }
    if (!rx.head && rx.signalled) {
        uint64_t count;
        /* Non-blocking; resets the counter to 0 (not a semaphore). */
        (void)!read(rx.event_fd, &count, sizeof(count));
        rx.signalled = 0;
    }
    pthread_mutex_unlock(&rx.lock);
    if (!it)
        return RX_EMPTY;
    enum rx_item_kind kind = it->kind;
    if (kind == RX_REQUEST) {
        /* The buffer is libfuse's se->bufsize, which bounds our reads too. */
        *n = it->len < len ? it->len : len;
        memcpy(buf, it->data, *n);
    }
    release(it);
    return kind;
}

void rx_get_stats(struct rx_stats *out)
{
    pthread_mutex_lock(&rx.lock);
    *out = rx.stats;
    pthread_mutex_unlock(&rx.lock);
    out->received = atomic_load_explicit(&received, memory_order_relaxed);
    out->native = atomic_load_explicit(&served_natively, memory_order_relaxed);
    out->own_fills_refused =
        atomic_load_explicit(&own_fills_refused, memory_order_relaxed);
    out->stuck_fills_refused =
        atomic_load_explicit(&stuck_fills_refused, memory_order_relaxed);
    out->foreign_aborted =
        atomic_load_explicit(&foreign_aborted, memory_order_relaxed);
}
