/*
 * The native fast path: enabled-event writes to user_events_data answered on
 * the receiver thread, their records staged for the engine.  See fastpath.c.
 */
#ifndef TRACEFS_FASTPATH_H
#define TRACEFS_FASTPATH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define FP_MAX_ARRAYS 8

/* Why a write was left to the engine (counted; logged with --debug). */
enum fp_decline {
    FP_SERVED = 0,
    FP_NO_FILE,    /* not a user_events_data file the table knows */
    FP_POSITION,   /* not at position 0, or under 4 bytes: the engine's EFAULT */
    FP_INDEX,      /* negative or unknown write index */
    FP_DISABLED,   /* the event is disabled (EBADF, or 5.18's silent no-op) */
    FP_MIN_SIZE,   /* shorter than the event's fields (EINVAL) */
    FP_TASK,       /* the writer's CPU and comm are not known fresh enough */
    FP_CLOCK,      /* a recording array's clock is not a host clock */
    FP_INVALID,    /* a dynamic field fails validation (EFAULT) */
    FP_FULL,       /* no room in the staging ring */
    FP_LARGE,      /* may be the first part of a write FUSE split */
    FP_TABLE,      /* a recording array's cpumask was lost (out of memory) */
    FP_PERF,       /* a perf event of ours records it and its sample is the engine's */
    FP_STORE,      /* the storer could not queue the samples' stores */
    FP_NR_REASONS
};

struct fp_stats {
    unsigned long long served, staged, declined[FP_NR_REASONS], task_refreshes;
};

/* Sets up (or, with staging_bytes 0, switches off) the fast path. */
int fp_configure(unsigned nr_cpus, size_t staging_bytes, int debug);

/* What FUSE_INIT settled: the largest request and pages per request. */
void fp_set_limits(uint32_t max_write, uint32_t max_pages);

/* The receiver's handler (rx_handler): 1 if the write was answered. */
int fp_handle(const unsigned char *req, size_t len, int dev_fd);

/* Table updates, from the Python thread. */
void fp_set_array(unsigned index, int tracing_on, uint32_t max_entry,
                  const uint8_t *cpumask, size_t mask_len, clockid_t clock,
                  uint64_t divisor);
int fp_set_event(uint16_t id, int enabled, int perf, uint8_t recorders,
                 uint32_t min_size, const uint8_t *validators, size_t nval);
int fp_set_slots(uint64_t fh, uint32_t start, const uint16_t *ids, size_t n);
void fp_drop_file(uint64_t fh);
void fp_set_task(pid_t tid, int32_t tgid, unsigned cpu, const char *comm,
                 size_t comm_len, uint64_t ttl_ns);
void fp_set_wake(int wake);

/* The perf events recording our events, their rings, and the threads each
 * ring's reader was told about: the whole table, replacing the last (live
 * until fp_revoke_perf: while revoked the engine writes every perf sample).
 * The blobs are arrays of struct fp_perf_ring_in, fp_perf_in and
 * fp_announced_in (fastpath.c), whose sizes the caller gives in `sizes`.
 * -ENOMEM or -EINVAL (a bad blob) leaves the table revoked. */
int fp_set_perf(const void *rings, size_t nrings, const void *perfs,
                size_t nperf, const void *announced, size_t nannounced,
                const size_t sizes[3]);
void fp_revoke_perf(void);

/* The session the samples' page stores go to (the storer's). */
struct fuse_session;
void fp_set_session(struct fuse_session *se);

/* The staging ring, from the Python thread: the readable whole records
 * from the oldest on (NULL, 0 if none), then how many of them were taken. */
void fp_staged(const unsigned char **data, size_t *len);
void fp_consumed(size_t len);
int fp_pending(void);

void fp_get_stats(struct fp_stats *out);
const char *fp_reason(int why);

#endif
