/*
 * The storer: one native thread that pushes pages into clients' mappings
 * (FUSE_NOTIFY_STORE) and then sends the reply that waited for them.  See
 * storer.c.
 */
#ifndef TRACEFS_STORER_H
#define TRACEFS_STORER_H

#include <stddef.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

/* The storer thread's comm. */
#define ST_THREAD_NAME "tracefs-store"

/* One store: `len` bytes at `offset` of inode `ino`'s file. */
struct st_store {
    uint64_t ino;
    uint64_t offset;
    const void *data;
    size_t len;
};

/* The reply a batch sends once stored. */
enum st_reply {
    ST_REPLY_NONE = 0,
    ST_REPLY_WRITE,  /* fuse_reply_write(req, value) */
    ST_REPLY_ERR,    /* fuse_reply_err(req, value) */
    ST_REPLY_IOCTL,  /* fuse_reply_ioctl(req, value, NULL, 0) */
    ST_REPLY_RAW_WRITE,  /* a write reply of value written to the device */
};

/* Queues a batch for session `se`: the stores (copied) in order, then the
 * reply (`req` may be NULL with ST_REPLY_NONE).  With `signal`, the eventfd
 * (st_event_fd) is written once it is stored.  Returns the batch's sequence
 * number (> 0), or -errno (nothing queued, nothing replied). */
long long st_push(struct fuse_session *se, const struct st_store *stores,
                  size_t n, fuse_req_t req, enum st_reply reply,
                  int64_t value, int signal);

/* A batch like st_push's, replied with a raw FUSE write reply of `size` to
 * request `unique` on `dev_fd`, for a request libfuse never saw (the
 * receiver's fast path); made first and queued later (st_queue), so that
 * the caller can make the write visible in between.  NULL: out of memory. */
struct st_batch;
struct st_batch *st_batch_raw(struct fuse_session *se,
                              const struct st_store *stores, size_t n,
                              int dev_fd, uint64_t unique, uint32_t size);

/* Queues a batch (taking it): its sequence number, or -errno when the
 * storer cannot run (the batch is freed, its reply not sent). */
long long st_queue(struct st_batch *b);

/* The sequence number of the last batch stored (batches complete in order). */
uint64_t st_stored(void);

/* An eventfd (non-blocking) that becomes readable when a batch queued with
 * `signal` has been stored; -errno if it cannot be made. */
int st_event_fd(void);

/* Stores what is queued, then stops the thread (joined).  Idempotent; the
 * next st_push starts it again. */
void st_stop(void);

struct st_stats {
    unsigned long long batches, stores, store_errors, replies, queue_peak;
};
void st_get_stats(struct st_stats *out);

#endif
