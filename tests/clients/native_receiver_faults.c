// cflags: -I/usr/include/fuse3
/*
 * The receiver (tracefs_fuse/fuse/_native/receiver.c) compiled into this
 * test with its small allocations failing: a drain asked for and the end of
 * the device must still reach the session loop (rx_take), or the engine
 * never takes staged records in and the daemon never learns that its mount
 * is gone.  The "device" is a pipe: closing its write end ends it.  Prints
 * "ok <check>" per check, exits 1 on any failure.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Allocations under this many bytes fail (the receiver's own read buffer is
 * larger, so it starts). */
static size_t fail_below;

static void *fault_malloc(size_t n) { return n < fail_below ? NULL : malloc(n); }

#define malloc(n) fault_malloc(n)
#undef _GNU_SOURCE  /* defined again there */
#include "../../tracefs_fuse/fuse/_native/receiver.c"

static int failures;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

/* The next item, waiting (as pyfuse3 does) for the eventfd. */
static enum rx_item_kind next_item(int event_fd, size_t *n)
{
    unsigned char buf[64];
    struct pollfd p = {.fd = event_fd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1)
        return RX_EMPTY;
    return rx_take(buf, sizeof(buf), n);
}

int main(void)
{
    int dev[2];
    int event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pipe(dev) || event_fd < 0)
        return 2;
    fail_below = 1024;
    if (rx_start(dev[0], event_fd, 4096, NULL))
        return 2;
    size_t n;

    rx_push_drain();
    check(next_item(event_fd, &n) == RX_DRAIN, "a drain is queued without memory");
    rx_push_drain();
    check(next_item(event_fd, &n) == RX_DRAIN, "and again once taken");

    close(dev[1]);  /* the receiver's read returns 0: a short read, EIO */
    check(next_item(event_fd, &n) == RX_END && n == EIO, "the device's end is queued without memory");
    check(rx_take(NULL, 0, &n) == RX_END, "and stays queued");
    check(rx_stop() == dev[0], "the receiver stops");
    return failures ? 1 : 0;
}
