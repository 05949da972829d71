/*
 * The storer: a native thread that pushes pages into clients' mappings
 * (fuse_lowlevel_notify_store) and then sends the reply that waited for them.
 *
 * Why a thread: FUSE_NOTIFY_STORE makes the kernel lock the page-cache folios
 * it fills (fuse_notify_store: filemap_grab_folio).  A client faulting on one
 * of those pages holds that lock while it waits for our answer to its read;
 * stored from the thread that answers reads (Python's), the two would wait
 * for each other for ever.  This thread answers nothing but the replies
 * queued behind its stores.
 *
 * Why native: a reply that must wait for its stores (an event write with a
 * perf consumer: the sample is in the ring before the write returns) used to
 * go from the trio thread to a worker thread and back before it was sent;
 * those handoffs were most of a perf write's cost (docs/perf.md, "Cost").
 * Here the Python thread queues the batch with its reply and goes on; the
 * reply leaves from this thread right after the last store.
 *
 * Rules:
 *   - Batches are stored one at a time, in the order they were queued, so an
 *     older image of a page never lands after a newer one.
 *   - A batch's reply is sent after all its stores, never before.
 *   - A store that fails is only counted: ENOENT means the kernel has
 *     forgotten the inode (so nothing maps it), ENODEV that the mount is gone.
 *   - A batch queued with `signal` writes the eventfd once stored, for a
 *     Python caller that must not go on before (trio waits on it).
 *
 * Reference: libfuse 3.14.0 lib/fuse_lowlevel.c (fuse_lowlevel_notify_store:
 * copies the data out of the bufvec before returning), Linux fs/fuse/dev.c
 * (fuse_notify_store).
 */
#define _GNU_SOURCE
#include "storer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

struct st_batch {
    struct st_batch *next;
    struct fuse_session *se;
    fuse_req_t req;
    enum st_reply reply;
    int64_t value;
    int signal;
    int dev_fd;         /* ST_REPLY_RAW_WRITE: the device and request */
    uint64_t unique;
    uint64_t seq;
    size_t n;
    struct st_store stores[];  /* data points into the tail of this block */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int running, stopping;
    struct st_batch *head, *tail;
    size_t queued;
    uint64_t pushed;
    int event_fd;
    struct st_stats stats;
} st = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .event_fd = -1,
};

static _Atomic uint64_t stored_seq;

static void send_reply(const struct st_batch *b)
{
    switch (b->reply) {
    case ST_REPLY_WRITE:
        fuse_reply_write(b->req, (size_t)b->value);
        break;
    case ST_REPLY_ERR:
        fuse_reply_err(b->req, (int)b->value);
        break;
    case ST_REPLY_IOCTL:
        /* size 0: the kernel copies nothing back to the caller */
        fuse_reply_ioctl(b->req, (int)b->value, NULL, 0);
        break;
    case ST_REPLY_RAW_WRITE: {
        struct fuse_out_header out = {
            .len = sizeof(out) + sizeof(struct fuse_write_out),
            .unique = b->unique};
        struct fuse_write_out wout = {.size = (uint32_t)b->value};
        struct iovec iov[2] = {{&out, sizeof(out)}, {&wout, sizeof(wout)}};
        (void)!writev(b->dev_fd, iov, 2);  /* ENOENT: the writer is gone */
        break;
    }
    case ST_REPLY_NONE:
        return;
    }
}

static void store_batch(struct st_batch *b)
{
    unsigned long long errors = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct st_store *s = &b->stores[i];
        struct fuse_bufvec bufv = FUSE_BUFVEC_INIT(s->len);
        bufv.buf[0].mem = (void *)s->data;
        if (fuse_lowlevel_notify_store(b->se, s->ino, (off_t)s->offset, &bufv,
                                       0) != 0)
            errors++;
    }
    send_reply(b);
    atomic_store_explicit(&stored_seq, b->seq, memory_order_release);
    if (b->signal && st.event_fd >= 0) {
        uint64_t one = 1;
        (void)!write(st.event_fd, &one, sizeof(one));
    }
    pthread_mutex_lock(&st.lock);
    st.stats.batches++;
    st.stats.stores += b->n;
    st.stats.store_errors += errors;
    st.stats.replies += b->reply != ST_REPLY_NONE;
    pthread_mutex_unlock(&st.lock);
}

static void *storer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), ST_THREAD_NAME);
    pthread_mutex_lock(&st.lock);
    for (;;) {
        while (!st.head && !st.stopping)
            pthread_cond_wait(&st.cond, &st.lock);
        struct st_batch *b = st.head;
        if (!b)
            break;  /* stopping, and everything queued is stored */
        st.head = b->next;
        if (!st.head)
            st.tail = NULL;
        st.queued--;
        pthread_mutex_unlock(&st.lock);
        store_batch(b);
        free(b);
        pthread_mutex_lock(&st.lock);
    }
    pthread_mutex_unlock(&st.lock);
    return NULL;
}

int st_event_fd(void)
{
    pthread_mutex_lock(&st.lock);
    if (st.event_fd < 0)
        st.event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int fd = st.event_fd < 0 ? -errno : st.event_fd;
    pthread_mutex_unlock(&st.lock);
    return fd;
}

/* A batch with the stores copied in, its reply not yet said; NULL if out
 * of memory. */
static struct st_batch *batch_new(struct fuse_session *se,
                               const struct st_store *stores, size_t n)
{
    size_t bytes = sizeof(struct st_batch) + n * sizeof(struct st_store);
    for (size_t i = 0; i < n; i++)
        bytes += stores[i].len;
    struct st_batch *b = calloc(1, bytes);
    if (!b)
        return NULL;
    unsigned char *tail = (unsigned char *)&b->stores[n];
    for (size_t i = 0; i < n; i++) {
        b->stores[i] = stores[i];
        memcpy(tail, stores[i].data, stores[i].len);
        b->stores[i].data = tail;
        tail += stores[i].len;
    }
    b->se = se;
    b->n = n;
    return b;
}

long long st_queue(struct st_batch *b)
{
    pthread_mutex_lock(&st.lock);
    if (!st.running) {
        st.stopping = 0;
        int rc = pthread_create(&st.thread, NULL, storer_main, NULL);
        if (rc) {
            pthread_mutex_unlock(&st.lock);
            free(b);
            return -rc;
        }
        st.running = 1;
    }
    /* Read under the lock: once it is released the storer may have stored
     * and freed the batch (a use after free that crashed the daemon). */
    uint64_t seq = b->seq = ++st.pushed;
    if (st.tail)
        st.tail->next = b;
    else
        st.head = b;
    st.tail = b;
    if (++st.queued > st.stats.queue_peak)
        st.stats.queue_peak = st.queued;
    pthread_cond_signal(&st.cond);
    pthread_mutex_unlock(&st.lock);
    return (long long)seq;
}

long long st_push(struct fuse_session *se, const struct st_store *stores,
                  size_t n, fuse_req_t req, enum st_reply reply,
                  int64_t value, int signal)
{
    struct st_batch *b = batch_new(se, stores, n);
    if (!b)
        return -ENOMEM;
    b->req = req;
    b->reply = reply;
    b->value = value;
    b->signal = signal;
    return st_queue(b);
}

struct st_batch *st_batch_raw(struct fuse_session *se,
                              const struct st_store *stores, size_t n,
                              int dev_fd, uint64_t unique, uint32_t size)
{
    struct st_batch *b = batch_new(se, stores, n);
    if (b) {
        b->reply = ST_REPLY_RAW_WRITE;
        b->value = size;
        b->dev_fd = dev_fd;
        b->unique = unique;
    }
    return b;
}

uint64_t st_stored(void)
{
    return atomic_load_explicit(&stored_seq, memory_order_acquire);
}

void st_stop(void)
{
    pthread_mutex_lock(&st.lock);
    if (!st.running) {
        pthread_mutex_unlock(&st.lock);
        return;
    }
    st.stopping = 1;
    pthread_cond_signal(&st.cond);
    pthread_t thread = st.thread;
    pthread_mutex_unlock(&st.lock);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&st.lock);
    st.running = 0;
    pthread_mutex_unlock(&st.lock);
}

void st_get_stats(struct st_stats *out)
{
    pthread_mutex_lock(&st.lock);
    *out = st.stats;
    pthread_mutex_unlock(&st.lock);
}
