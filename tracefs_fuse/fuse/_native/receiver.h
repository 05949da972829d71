/*
 * The receiver: the one thread that reads /dev/fuse, so that a request can be
 * answered while the Python thread is blocked.  See receiver.c.
 */
#ifndef TRACEFS_RECEIVER_H
#define TRACEFS_RECEIVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The receiver thread's comm, and its watchdog's. */
#define RX_THREAD_NAME "tracefs-rx"
#define RX_WATCHDOG_NAME "tracefs-watch"

/* What rx_take() hands libfuse's session loop. */
enum rx_item_kind {
    RX_REQUEST = 1, /* a FUSE request, copied into the caller's buffer */
    RX_DRAIN,       /* staged records must be taken in (no request) */
    RX_END,         /* /dev/fuse failed (ENODEV: unmounted); *err says how */
    RX_EMPTY,       /* nothing queued (a wakeup raced with a take) */
};

/* A request the receiver is offered before it queues it for Python: return
 * 1 if it was answered, 0 to queue it.  Runs on the receiver thread: it must
 * never wait for the Python thread, the GIL, or client memory. */
typedef int (*rx_handler)(const unsigned char *req, size_t len, int dev_fd);

struct rx_stats {
    unsigned long long received, queued, own_fills_refused,
        stuck_fills_refused, foreign_aborted, drains_queued, native,
        queue_peak;
};

/* How long one access to client memory may wait before the queued
 * page-cache fills are refused (EIO) so that it ends: 100 ms; and before
 * another FUSE connection it waits on is aborted: 1 s. */
#define RX_ACCESS_STUCK_NS 100000000ull
#define RX_FOREIGN_STUCK_NS 1000000000ull

/* The calling thread (the Python thread, or a lane's worker) is about to
 * access client memory (`size` bytes of `pid`'s at `addr`) / is done with
 * it.  Lock-free; one access at a time per thread. */
void rx_access_begin(pid_t pid, uint64_t addr, uint64_t size);
/* ... and whether aborting a connection is what ended that access's wait. */
int rx_access_end(void);

/* Our own mount's device (never aborted). */
void rx_set_own_device(unsigned major, unsigned minor);

/* Starts the thread on `dev_fd` (/dev/fuse, mounted); `event_fd` (an
 * eventfd) is readable while items are queued.  `bufsize` bytes hold the
 * largest request (libfuse's se->bufsize).  0 or -errno. */
int rx_start(int dev_fd, int event_fd, size_t bufsize, rx_handler handler);

/* Stops the thread (cancelling a blocked read) and frees what is queued.
 * Idempotent.  Returns the /dev/fuse fd, now owned by the caller, or -1. */
int rx_stop(void);

/* Whether the thread runs (0 once it has seen the device end). */
int rx_running(void);

/* Pops the oldest item.  RX_REQUEST copies it to buf (at most len bytes)
 * and stores its length in *n; RX_END stores the errno in *n. */
enum rx_item_kind rx_take(void *buf, size_t len, size_t *n);

/* Queues a drain (once until taken), from the receiver thread. */
void rx_push_drain(void);

/* Writes one reply (header + payload iovecs) to /dev/fuse. */
void rx_reply_err(int dev_fd, uint64_t unique, int err);

void rx_get_stats(struct rx_stats *out);

#endif
