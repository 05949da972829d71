/*
 * tracefs_fuse.fuse._bridge: extends pyfuse3's libfuse session with what
 * pyfuse3 3.5.0 cannot do (ioctl, FUSE_INTERRUPT, caller pid and per-read
 * flags/lock_owner on read/write, FOPEN_* bits beyond fuse_file_info, and
 * FUSE_DIRECT_IO_ALLOW_MMAP on libfuse 3.14).
 *
 * How: this module defines fuse_session_new, fuse_session_mount and
 * fuse_session_destroy.  _session.py loads it with RTLD_GLOBAL *before*
 * pyfuse3, so pyfuse3's references (fuse_session_new@FUSE_3.0 etc.) bind
 * here; we forward to libfuse through dlvsym(RTLD_NEXT, ..., "FUSE_3.0").
 *   - fuse_session_new copies pyfuse3's ops and replaces ioctl, read and
 *     write_buf with calls into a Python handler (see the module docstring).
 *   - fuse_session_mount installs a custom io (fuse_session_custom_io) on the
 *     mounted fd: read() and writev() as usual, except that the FUSE_INIT
 *     reply and OPEN replies are patched on the wire.
 *   - fuse_session_destroy invalidates outstanding Request objects, so a reply
 *     after pyfuse3.close() is a no-op instead of a use-after-free.
 *
 * Threads: requests are received and dispatched by pyfuse3 in the trio thread
 * with the GIL held (internal.pxi, _session_loop).  Replies and notifications
 * may also be written from other threads (pyfuse3's notify thread, with the
 * GIL released), so io_writev never touches Python and guards its tables with
 * io_lock.
 *
 * Reference: libfuse 3.14.0 lib/fuse_lowlevel.c (do_init, do_read,
 * do_write_buf, do_ioctl, find_interrupted, fuse_req_interrupt_func,
 * fuse_session_custom_io); Linux include/uapi/linux/fuse.h (7.45).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "_native/fastpath.h"
#include "_native/receiver.h"
#include "_native/storer.h"

/* fs/fuse/fuse_i.h: what a connection gets without FUSE_MAX_PAGES. */
#define FUSE_DEFAULT_MAX_PAGES_PER_REQ 32

#define BRIDGE_EXPORT __attribute__((visibility("default")))

/* --- Wire layout (checked, because we patch raw bytes) --------------------
 *
 * struct fuse_init_in {           struct fuse_init_out {
 *     uint32_t major;      @0         uint32_t major;                @0
 *     uint32_t minor;      @4         uint32_t minor;                @4
 *     uint32_t max_readahead;@8       uint32_t max_readahead;        @8
 *     uint32_t flags;      @12        uint32_t flags;                @12
 *     uint32_t flags2;     @16        uint16_t max_background;       @16
 *     uint32_t unused[11];            uint16_t congestion_threshold; @18
 * };                                  uint32_t max_write;            @20
 *                                     uint32_t time_gran;            @24
 *                                     uint16_t max_pages;            @28
 *                                     uint16_t map_alignment;        @30
 *                                     uint32_t flags2;               @32
 *                                     ... (7.45: max_stack_depth @36,
 *                                     request_timeout @40) -> 64 bytes
 *                                 };
 * flags2 of init_out is at 32, not 36: max_pages and map_alignment are u16.
 */
_Static_assert(sizeof(struct fuse_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct fuse_out_header) == 16, "fuse_out_header");
_Static_assert(offsetof(struct fuse_out_header, unique) == 8, "out.unique");
_Static_assert(offsetof(struct fuse_init_in, flags) == 12, "init_in.flags");
_Static_assert(offsetof(struct fuse_init_in, flags2) == 16, "init_in.flags2");
_Static_assert(offsetof(struct fuse_init_out, flags) == 12, "init_out.flags");
_Static_assert(offsetof(struct fuse_init_out, flags2) == 32, "init_out.flags2");
_Static_assert(sizeof(struct fuse_init_out) == 64, "fuse_init_out");
/* struct fuse_open_out { uint64_t fh; uint32_t open_flags; uint32_t padding; } */
_Static_assert(offsetof(struct fuse_open_out, open_flags) == 8, "open_flags");
_Static_assert(sizeof(struct fuse_open_out) == 16, "fuse_open_out");

/* Protocol 7.39: "#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)", i.e. bit 4
 * of flags2.  Our system header is 7.38, so spell it out. */
#define INIT_FLAGS2_DIRECT_IO_ALLOW_MMAP (1u << (36 - 32))

/* FOPEN_* bits Python may add per file handle.  FOPEN_PASSTHROUGH (1 << 7)
 * is excluded: it needs a backing id that libfuse 3.14 cannot register. */
#define OPEN_FLAGS_ALLOWED                                                    \
    (FOPEN_DIRECT_IO | FOPEN_KEEP_CACHE | FOPEN_NONSEEKABLE |                 \
     FOPEN_CACHE_DIR | FOPEN_STREAM | FOPEN_NOFLUSH |                         \
     FOPEN_PARALLEL_DIRECT_WRITES)

/* --- State ---------------------------------------------------------------- */

enum req_kind { KIND_IOCTL = 1, KIND_READ, KIND_WRITE };
static const char *const kind_names[] = {"?", "ioctl", "read", "write"};

struct fh_flags { uint64_t fh; uint32_t flags; };

/* Per-session state read and written by the custom io; guarded by io_lock
 * because writev runs on any thread. */
static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t init_unique;           /* unique of FUSE_INIT, 0 once replied */
    int init_seen;
    uint32_t kernel_major, kernel_minor, kernel_flags, kernel_flags2;
    uint32_t reply_minor, reply_flags, reply_flags2;
    int allow_mmap_granted;
    uint64_t *open_uniques;         /* FUSE_OPEN requests awaiting a reply */
    size_t n_opens, cap_opens;
    struct fh_flags *fh_flags;      /* set_open_flags() entries, one-shot */
    size_t n_fh, cap_fh;
    unsigned long long requests, interrupts_received, open_fixups;
    /* What INIT settled: bytes and pages (after the kernel's clamp to
     * fs.fuse.max_pages_limit, which set_limits() told us) per request. */
    uint32_t max_write, max_pages, max_pages_limit;
} io;

/* The request being dispatched: io_read records its header, and libfuse
 * calls our op right after on the same buffer (pyfuse3 does receive_buf and
 * process_buf back to back, with no await between).  libfuse has no public
 * accessor for a request's unique. */
static uint64_t cur_unique;
static uint32_t cur_opcode;

/* Touched only with the GIL held. */
static struct fuse_lowlevel_ops bridged_ops;
static struct fuse_session *hooked_se;
static unsigned long generation;   /* bumped by fuse_session_destroy */
static int custom_io_installed, custom_io_error;
/* /dev/fuse, where replies go; libfuse's session fd is the receiver's
 * eventfd until unmount (see fuse_session_mount). */
static atomic_int wire_fd = -1;

/* libfuse 3.14's se->bufsize (FUSE_MAX_MAX_PAGES pages plus
 * FUSE_BUFFER_HEADER_SIZE): the buffer io_read fills, so no request we
 * queue may be larger. */
#define SESSION_BUFSIZE (256 * 4096 + 0x1000)
static PyObject *cb_ioctl, *cb_read, *cb_write, *cb_interrupted;
static PyObject *cb_drain;          /* set_drain(): takes staged records in */
static unsigned long long fast_drains;
static PyObject *log_error_fn;     /* logging.getLogger(...).error */
static struct {
    unsigned long long ioctls, reads, writes, interrupts, orphaned,
        handler_errors, dropped_replies, stale_replies;
} stats;

/* --- Logging ---------------------------------------------------------------
 * Errors go to the Python logger "tracefs_fuse.fuse._bridge"; the daemon's
 * log configuration decides where they end up.  Preserves any pending
 * exception except the one passed as exc_info. */
static void log_error(PyObject *exc, const char *fmt, ...)
{
    PyObject *saved_type, *saved_value, *saved_tb;
    PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
    va_list ap;
    va_start(ap, fmt);
    /* Passed without logging args, so '%' in it is never interpreted. */
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    PyObject *args = msg ? PyTuple_Pack(1, msg) : NULL;
    PyObject *kwargs = exc ? Py_BuildValue("{s:O}", "exc_info", exc) : NULL;
    PyObject *res = NULL;
    if (args && (kwargs || !exc))
        res = PyObject_Call(log_error_fn, args, kwargs);
    if (!res)
        PyErr_WriteUnraisable(log_error_fn);  /* logging itself failed */
    Py_XDECREF(res);
    Py_XDECREF(kwargs);
    Py_XDECREF(args);
    Py_XDECREF(msg);
    PyErr_Restore(saved_type, saved_value, saved_tb);
}

/* Logs the pending exception (with traceback) as an escaped handler error. */
static void log_handler_exception(const char *what, unsigned long long unique)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    log_error(value, "%s handler raised for request %llu", what, unique);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* --- Request ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    fuse_req_t req;               /* NULL once replied */
    unsigned long generation;     /* session this request belongs to */
    unsigned long long unique;
    size_t max_data;              /* read: size; ioctl: out_size */
    long pid, uid, gid;
    unsigned char kind;
    unsigned char interrupted;    /* a FUSE_INTERRUPT arrived for it */
    unsigned char registering;    /* inside fuse_req_interrupt_func() */
    unsigned char in_interrupt;   /* inside handler.interrupted() */
    unsigned char watching;       /* libfuse holds it for on_interrupt */
} Request;

static PyTypeObject RequestType;

static Request *request_new(fuse_req_t req, enum req_kind kind, size_t max_data)
{
    Request *self = PyObject_New(Request, &RequestType);
    if (!self)
        return NULL;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    self->req = req;
    self->generation = generation;
    self->unique = cur_unique;
    self->max_data = max_data;
    /* ctx->pid is the caller's *thread* id (kernel: pid_nr_ns(task_pid(
     * current), fc->pid_ns)); 0 if not visible in our pid namespace. */
    self->pid = ctx->pid;
    self->uid = ctx->uid;
    self->gid = ctx->gid;
    self->kind = kind;
    self->interrupted = self->registering = self->in_interrupt = 0;
    self->watching = 0;
    return self;
}

/* Claims the libfuse request for a reply (kind 0: any kind).  Returns 1 with
 * *out set; 0 if the session is gone, so the reply is a no-op; -1 with an
 * exception, leaving the request open. */
static int request_take(Request *self, enum req_kind kind, fuse_req_t *out)
{
    if (self->in_interrupt) {
        /* libfuse holds the request's lock around the interrupt callback
         * (find_interrupted, fuse_req_interrupt_func); a reply frees it. */
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot reply from inside interrupted(); cancel the "
                        "waiter and reply from it");
        return -1;
    }
    if (!self->req) {
        PyErr_Format(PyExc_RuntimeError, "request %llu was already replied",
                     self->unique);
        return -1;
    }
    if (kind && self->kind != kind) {
        PyErr_Format(PyExc_TypeError, "%s request %llu cannot take a %s reply",
                     kind_names[self->kind], self->unique, kind_names[kind]);
        return -1;
    }
    *out = self->req;
    self->req = NULL;
    if (self->generation != generation) {
        stats.stale_replies++;
        return 0;
    }
    return 1;
}

/* ENOENT: the kernel no longer knows the request (aborted connection);
 * ENODEV: unmounted.  Neither is the handler's fault. */
static PyObject *reply_result(int rc)
{
    if (rc == 0)
        Py_RETURN_NONE;
    if (rc == -ENOENT || rc == -ENODEV) {
        stats.dropped_replies++;
        Py_RETURN_NONE;
    }
    errno = -rc;
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *Request_reply_err(Request *self, PyObject *arg)
{
    long err = PyLong_AsLong(arg);
    if (err == -1 && PyErr_Occurred())
        return NULL;
    if (err <= 0 || err >= 1000) {  /* fuse_send_reply_iov_nofree's range */
        PyErr_Format(PyExc_ValueError, "errno out of range: %ld", err);
        return NULL;
    }
    fuse_req_t req;
    int taken = request_take(self, 0, &req);
    if (taken <= 0)
        return taken < 0 ? NULL : Py_NewRef(Py_None);
    return reply_result(fuse_reply_err(req, (int)err));
}

static PyObject *Request_reply_data(Request *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *res = NULL;
    if ((size_t)view.len > self->max_data && self->kind == KIND_READ) {
        /* The kernel would reject the oversized reply and fail the read. */
        PyErr_Format(PyExc_ValueError, "%zd bytes for a %zu-byte read",
                     view.len, self->max_data);
        goto out;
    }
    fuse_req_t req;
    int taken = request_take(self, KIND_READ, &req);
    if (taken > 0)
        res = reply_result(fuse_reply_buf(req, view.buf, view.len));
    else if (taken == 0)
        res = Py_NewRef(Py_None);
out:
    PyBuffer_Release(&view);
    return res;
}

static PyObject *Request_reply_write(Request *self, PyObject *arg)
{
    size_t count = PyLong_AsSize_t(arg);
    if (count == (size_t)-1 && PyErr_Occurred())
        return NULL;
    fuse_req_t req;
    int taken = request_take(self, KIND_WRITE, &req);
    if (taken <= 0)
        return taken < 0 ? NULL : Py_NewRef(Py_None);
    return reply_result(fuse_reply_write(req, count));
}

static PyObject *Request_reply_ioctl(Request *self, PyObject *args,
                                     PyObject *kwargs)
{
    static char *kwlist[] = {"result", "data", NULL};
    int result;
    Py_buffer view = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|y*:reply_ioctl", kwlist,
                                     &result, &view))
        return NULL;
    PyObject *res = NULL;
    if ((size_t)view.len > self->max_data && self->kind == KIND_IOCTL) {
        /* fuse_ioctl_common: "if (transferred > inarg.out_size) goto out"
         * with -EIO. */
        PyErr_Format(PyExc_ValueError, "%zd bytes exceed out_size %zu",
                     view.len, self->max_data);
        goto out;
    }
    fuse_req_t req;
    int taken = request_take(self, KIND_IOCTL, &req);
    if (taken > 0) /* size 0: the kernel copies nothing back to the caller */
        res = reply_result(fuse_reply_ioctl(req, result,
                                            view.len ? view.buf : NULL,
                                            view.len));
    else if (taken == 0)
        res = Py_NewRef(Py_None);
out:
    if (view.obj)
        PyBuffer_Release(&view);
    return res;
}

static void handler_interrupted(Request *self);

/* libfuse: find_interrupted() -> func(req, data) for a FUSE_INTERRUPT that
 * names this request, or fuse_req_interrupt_func() itself when the interrupt
 * arrived before we registered.  Both run in the trio thread. */
static void on_interrupt(fuse_req_t req, void *data)
{
    (void)req;
    PyGILState_STATE gil = PyGILState_Ensure();
    Request *self = data;
    self->interrupted = 1;
    stats.interrupts++;
    if (!self->registering)
        handler_interrupted(self);
    PyGILState_Release(gil);
}

static PyObject *Request_watch_interrupts(Request *self, PyObject *noargs)
{
    (void)noargs;
    if (self->in_interrupt) {
        /* fuse_req_interrupt_func takes the request lock libfuse holds. */
        PyErr_SetString(PyExc_RuntimeError,
                        "watch_interrupts() inside interrupted()");
        return NULL;
    }
    if (!self->req) {
        PyErr_Format(PyExc_RuntimeError, "request %llu was already replied",
                     self->unique);
        return NULL;
    }
    if (self->generation != generation)
        Py_RETURN_FALSE;
    /* Borrowed pointer: libfuse forgets it when the request is replied
     * (fuse_free_req clears u.ni.func), and request_finalize replies before
     * the object dies, so the callback never sees a freed Request. */
    self->registering = 1;
    fuse_req_interrupt_func(self->req, on_interrupt, self);
    self->registering = 0;
    self->watching = 1;
    return PyBool_FromLong(self->interrupted);
}

static PyObject *Request_repr(Request *self)
{
    return PyUnicode_FromFormat("<Request %s unique=%llu pid=%ld%s>",
                                kind_names[self->kind], self->unique,
                                self->pid, self->req ? "" : " replied");
}

static void request_finalize(PyObject *obj)
{
    Request *self = (Request *)obj;
    fuse_req_t req;
    if (!self->req || request_take(self, 0, &req) <= 0)
        return;  /* replied, or the session is gone: nothing to answer */
    stats.orphaned++;
    fuse_reply_err(req, EIO);
    log_error(NULL, "%s request %llu (pid %ld) dropped without a reply; "
              "replied EIO", kind_names[self->kind], self->unique, self->pid);
}

static void request_dealloc(PyObject *obj)
{
    if (PyObject_CallFinalizerFromDealloc(obj) < 0)
        return;  /* resurrected */
    Py_TYPE(obj)->tp_free(obj);
}

static PyObject *Request_get_replied(Request *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->req == NULL);
}

static PyObject *Request_get_interrupted(Request *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->interrupted);
}

static PyMethodDef Request_methods[] = {
    {"reply_err", (PyCFunction)Request_reply_err, METH_O,
     "reply_err(errno): fail the request with a positive errno."},
    {"reply_data", (PyCFunction)Request_reply_data, METH_O,
     "reply_data(data): answer a read with at most `size` bytes."},
    {"reply_write", (PyCFunction)Request_reply_write, METH_O,
     "reply_write(count): answer a write with the bytes consumed."},
    {"reply_ioctl", (PyCFunction)(void (*)(void))Request_reply_ioctl,
     METH_VARARGS | METH_KEYWORDS,
     "reply_ioctl(result, data=b''): ioctl() returns `result`; the kernel "
     "copies `data` (at most out_size bytes) to the caller, nothing if empty."},
    {"watch_interrupts", (PyCFunction)Request_watch_interrupts, METH_NOARGS,
     "watch_interrupts() -> bool: deliver a FUSE_INTERRUPT for this request "
     "to handler.interrupted(req).  Returns True if it was interrupted "
     "already (then interrupted() is not called)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Request_members[] = {
    {"unique", T_ULONGLONG, offsetof(Request, unique), READONLY,
     "fuse_in_header.unique"},
    {"pid", T_LONG, offsetof(Request, pid), READONLY,
     "caller's thread id (0 if outside our pid namespace)"},
    {"uid", T_LONG, offsetof(Request, uid), READONLY, "caller's fsuid"},
    {"gid", T_LONG, offsetof(Request, gid), READONLY, "caller's fsgid"},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *Request_get_watching(Request *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->watching);
}

static PyGetSetDef Request_getset[] = {
    {"replied", (getter)Request_get_replied, NULL, "a reply was sent", NULL},
    {"interrupted", (getter)Request_get_interrupted, NULL,
     "a FUSE_INTERRUPT arrived (only tracked after watch_interrupts())",
     NULL},
    {"watching", (getter)Request_get_watching, NULL,
     "watch_interrupts() was called: libfuse calls back into this object "
     "until the request is replied, so it must live until then", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RequestType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracefs_fuse.fuse._bridge.Request",
    .tp_basicsize = sizeof(Request),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One FUSE request handed to the Python handler; reply once.",
    .tp_dealloc = request_dealloc,
    .tp_finalize = request_finalize,
    .tp_repr = (reprfunc)Request_repr,
    .tp_methods = Request_methods,
    .tp_members = Request_members,
    .tp_getset = Request_getset,
};

/* --- Calls into the handler ------------------------------------------------ */

/* Calls cb(req, *args); an escaping exception is logged and, if the request
 * is still open, answered with EIO so the client never hangs.  Steals args. */
static void dispatch(PyObject *cb, Request *self, PyObject *args)
{
    PyObject *res = args ? PyObject_Call(cb, args, NULL) : NULL;
    if (!res) {
        stats.handler_errors++;
        log_handler_exception(kind_names[self->kind], self->unique);
        fuse_req_t req;
        if (self->req && request_take(self, 0, &req) > 0)
            fuse_reply_err(req, EIO);
    }
    Py_XDECREF(res);
    Py_XDECREF(args);
}

static void handler_interrupted(Request *self)
{
    /* Keep the object alive across the call; if this is the last reference
     * afterwards, request_finalize replies EIO, which is safe here: libfuse
     * holds a count on the request during find_interrupted. */
    Py_INCREF(self);
    self->in_interrupt = 1;
    PyObject *res = PyObject_CallOneArg(cb_interrupted, (PyObject *)self);
    self->in_interrupt = 0;
    if (!res) {
        stats.handler_errors++;
        log_handler_exception("interrupted", self->unique);
    }
    Py_XDECREF(res);
    Py_DECREF(self);
}

/* The request libfuse is dispatching is the one io_read just received;
 * anything else means pyfuse3's loop changed shape. */
static void check_current(uint32_t opcode)
{
    if (cur_opcode != opcode)
        cur_unique = 0;
}

/* --- fuse_lowlevel_ops replacements ---------------------------------------- */

static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
                     void *arg,
                     struct fuse_file_info *fi, unsigned flags,
                     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    check_current(FUSE_IOCTL);
    stats.ioctls++;
    Request *self = request_new(req, KIND_IOCTL, out_bufsz);
    if (!self) {
        PyErr_Clear();
        fuse_reply_err(req, ENOMEM);
    } else {
        /* Restricted ioctl (all FUSE mounts): in_buf holds _IOC_SIZE(cmd)
         * bytes copied by the kernel, e.g. 8 for a pointer-sized cmd; read
         * anything else from the caller through `arg`. */
        dispatch(cb_ioctl, self,
                 Py_BuildValue("(OKKIKy#nI)", self, (unsigned long long)ino,
                               (unsigned long long)fi->fh, cmd,
                               (unsigned long long)(uintptr_t)arg,
                               in_buf ? in_buf : "", (Py_ssize_t)in_bufsz,
                               (Py_ssize_t)out_bufsz, flags));
        Py_DECREF(self);
    }
    PyGILState_Release(gil);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    check_current(FUSE_READ);
    stats.reads++;
    Request *self = request_new(req, KIND_READ, size);
    if (!self) {
        PyErr_Clear();
        fuse_reply_err(req, ENOMEM);
    } else {
        /* do_read: fi->flags = read_in.flags (the file's f_flags *now*, so
         * O_NONBLOCK set by fcntl shows up); fi->lock_owner is non-zero for
         * read(2) and 0 for page-cache fills (mmap faults, readahead). */
        dispatch(cb_read, self,
                 Py_BuildValue("(OKKLniK)", self, (unsigned long long)ino,
                               (unsigned long long)fi->fh, (long long)off,
                               (Py_ssize_t)size, fi->flags,
                               (unsigned long long)fi->lock_owner));
        Py_DECREF(self);
    }
    PyGILState_Release(gil);
}

static PyObject *bytes_from_bufvec(struct fuse_bufvec *bufv)
{
    size_t len = fuse_buf_size(bufv);
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!data)
        return NULL;
    struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
    dst.buf[0].mem = PyBytes_AS_STRING(data);
    ssize_t got = fuse_buf_copy(&dst, bufv, 0);
    if (got < 0) {
        Py_DECREF(data);
        errno = (int)-got;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if ((size_t)got < len && _PyBytes_Resize(&data, got) < 0)
        return NULL;
    return data;
}

/* write_buf rather than write: libfuse prefers write_buf when set
 * (fuse_session_process_buf_int), and pyfuse3 registers both. */
static void op_write_buf(fuse_req_t req, fuse_ino_t ino,
                         struct fuse_bufvec *bufv, off_t off,
                         struct fuse_file_info *fi)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    check_current(FUSE_WRITE);
    stats.writes++;
    Request *self = request_new(req, KIND_WRITE, 0);
    PyObject *data = self ? bytes_from_bufvec(bufv) : NULL;
    if (!data) {
        PyErr_Clear();
        if (self)
            self->req = NULL;  /* answered here, not by request_finalize */
        fuse_reply_err(req, ENOMEM);
    } else {
        dispatch(cb_write, self,
                 Py_BuildValue("(OKKLNi)", self, (unsigned long long)ino,
                               (unsigned long long)fi->fh, (long long)off,
                               data, fi->flags));
    }
    Py_XDECREF(self);
    PyGILState_Release(gil);
}

/* --- Custom io ---------------------------------------------------------------- */

/* Caller holds io_lock. */
static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *n = realloc(*arr, ncap * elem);
    if (!n)
        return -1;
    *arr = n;
    *cap = ncap;
    return 0;
}

static void note_request(const void *buf, size_t len)
{
    const struct fuse_in_header *in = buf;
    cur_unique = in->unique;
    cur_opcode = in->opcode;
    pthread_mutex_lock(&io_lock);
    io.requests++;
    if (in->opcode == FUSE_INIT &&
        len >= sizeof(*in) + offsetof(struct fuse_init_in, flags2)) {
        const struct fuse_init_in *arg = (const void *)(in + 1);
        io.init_seen = 1;
        io.init_unique = in->unique;
        io.kernel_major = arg->major;
        io.kernel_minor = arg->minor;
        io.kernel_flags = arg->flags;
        /* flags2 exists only if the kernel sets FUSE_INIT_EXT (7.36+). */
        io.kernel_flags2 = (arg->flags & FUSE_INIT_EXT) &&
                                   len >= sizeof(*in) + sizeof(*arg)
                               ? arg->flags2
                               : 0;
    } else if (in->opcode == FUSE_OPEN) {
        if (grow((void **)&io.open_uniques, &io.cap_opens, io.n_opens + 1,
                 sizeof(uint64_t)) == 0)
            io.open_uniques[io.n_opens++] = in->unique;
    } else if (in->opcode == FUSE_INTERRUPT) {
        io.interrupts_received++;
    } else if (in->opcode == FUSE_POLL &&
               len >= sizeof(*in) + sizeof(struct fuse_poll_in) &&
               (((const struct fuse_poll_in *)(in + 1))->flags &
                FUSE_POLL_SCHEDULE_NOTIFY)) {
        /* A poller may arm: staged records must reach the engine (and wake
         * it) as they come, until the next publish says nobody waits. */
        fp_set_wake(1);
    }
    pthread_mutex_unlock(&io_lock);
}

/* Hands the staged records to the Python drain callback (trio thread, GIL
 * held: io_read runs inside pyfuse3's loop).  An exception is a bug: logged,
 * and the records are dropped rather than offered again for ever. */
static void drain(void)
{
    if (!cb_drain) {
        const unsigned char *data;
        size_t len;
        for (fp_staged(&data, &len); len; fp_staged(&data, &len))
            fp_consumed(len);
        return;
    }
    fast_drains++;
    PyObject *res = PyObject_CallNoArgs(cb_drain);
    if (!res) {
        stats.handler_errors++;
        log_handler_exception("drain", 0);
        const unsigned char *data;
        size_t len;
        for (fp_staged(&data, &len); len; fp_staged(&data, &len))
            fp_consumed(len);
    }
    Py_XDECREF(res);
}

/* libfuse's session loop reads here (pyfuse3, trio thread, GIL held): the
 * receiver thread has read the request from /dev/fuse and queued it.  `fd`
 * is the eventfd pyfuse3 waited on.  -1 with EINTR makes pyfuse3 wait again
 * (a drain, or a wakeup that raced with a take); ENODEV ends the session. */
static ssize_t io_read(int fd, void *buf, size_t buf_len, void *userdata)
{
    (void)fd;
    (void)userdata;
    size_t n;
    switch (rx_take(buf, buf_len, &n)) {
    case RX_REQUEST:
        /* Records the fast path staged before this request came are the
         * engine's before the request is. */
        if (fp_pending())
            drain();
        note_request(buf, n);
        return (ssize_t)n;
    case RX_END:
        errno = (int)n;
        return -1;
    case RX_DRAIN:
        drain();
        break;
    case RX_EMPTY:
        break;
    }
    errno = EINTR;
    return -1;
}

/* Caller holds io_lock.  Returns 1 and removes it if `unique` is a pending
 * FUSE_OPEN. */
static int take_open_unique(uint64_t unique)
{
    for (size_t i = 0; i < io.n_opens; i++) {
        if (io.open_uniques[i] == unique) {
            io.open_uniques[i] = io.open_uniques[--io.n_opens];
            return 1;
        }
    }
    return 0;
}

/* Caller holds io_lock.  Pops the set_open_flags() entry for fh. */
static uint32_t take_fh_flags(uint64_t fh)
{
    for (size_t i = 0; i < io.n_fh; i++) {
        if (io.fh_flags[i].fh == fh) {
            uint32_t flags = io.fh_flags[i].flags;
            io.fh_flags[i] = io.fh_flags[--io.n_fh];
            return flags;
        }
    }
    return 0;
}

/* Caller holds io_lock.  `msg` is a whole reply (out header + payload). */
static void patch_reply(unsigned char *msg, size_t len, int is_init)
{
    const struct fuse_out_header *out = (const void *)msg;
    if (out->error != 0)
        return;
    if (is_init) {
        /* libfuse 3.14 replies with 16 + 64 bytes; flags2 needs >= 36. */
        if (len < sizeof(*out) + offsetof(struct fuse_init_out, flags2) + 4)
            return;
        struct fuse_init_out *arg = (void *)(msg + sizeof(*out));
        if ((io.kernel_flags & FUSE_INIT_EXT) &&
            (io.kernel_flags2 & INIT_FLAGS2_DIRECT_IO_ALLOW_MMAP)) {
            /* The kernel reads flags2 only with FUSE_INIT_EXT in flags; it
             * does not gate it on our (older) reply minor. */
            arg->flags |= FUSE_INIT_EXT;
            arg->flags2 |= INIT_FLAGS2_DIRECT_IO_ALLOW_MMAP;
            io.allow_mmap_granted = 1;
        }
        if (arg->flags & FUSE_MAX_PAGES) {
            /* As many pages per request as the kernel allows (it takes the
             * smaller of this and fs.fuse.max_pages_limit), so that a
             * writev of many iovecs stays one request where it can; the
             * bytes stay within max_write, which our buffers hold. */
            arg->max_pages = UINT16_MAX;
        }
        io.reply_minor = arg->minor;
        io.reply_flags = arg->flags;
        io.reply_flags2 = arg->flags2;
        io.max_write = arg->max_write;
        io.max_pages = (arg->flags & FUSE_MAX_PAGES)
                           ? (io.max_pages_limit < arg->max_pages
                                  ? io.max_pages_limit : arg->max_pages)
                           : FUSE_DEFAULT_MAX_PAGES_PER_REQ;
        fp_set_limits(io.max_write, io.max_pages);
    } else if (len >= sizeof(*out) + sizeof(struct fuse_open_out)) {
        struct fuse_open_out *arg = (void *)(msg + sizeof(*out));
        uint32_t extra = take_fh_flags(arg->fh);
        if (extra) {
            arg->open_flags |= extra;
            io.open_fixups++;
        }
    }
}

/* Replies and notifications, from any thread.  `fd` is libfuse's session fd
 * (our eventfd); they go to /dev/fuse. */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    fd = atomic_load_explicit(&wire_fd, memory_order_acquire);
    /* libfuse always puts the out header alone in iov[0] (fuse_send_msg). */
    const struct fuse_out_header *out = iov[0].iov_base;
    if (out->unique == 0)  /* notification: nothing to patch, no lock */
        return writev(fd, iov, count);
    pthread_mutex_lock(&io_lock);
    int is_init = io.init_unique != 0 && out->unique == io.init_unique;
    int patch = is_init || take_open_unique(out->unique);
    if (is_init)
        io.init_unique = 0;
    if (!patch) {
        pthread_mutex_unlock(&io_lock);
        return writev(fd, iov, count);
    }
    /* Flatten (INIT: 80 bytes, OPEN: 32) and write it as one message. */
    unsigned char msg[256];
    size_t len = 0;
    for (int i = 0; i < count; i++) {
        if (len + iov[i].iov_len > sizeof(msg)) {
            pthread_mutex_unlock(&io_lock);
            return writev(fd, iov, count);  /* not a reply we know */
        }
        memcpy(msg + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    patch_reply(msg, len, is_init);
    pthread_mutex_unlock(&io_lock);
    return write(fd, msg, len);
}

static const struct fuse_custom_io bridge_io = {
    .read = io_read,
    .writev = io_writev,
    /* No splice_*: libfuse then disables splice (do_init offers
     * FUSE_CAP_SPLICE_* only if io is NULL or has them), so every request
     * passes through io_read and every buffer is in memory. */
};

/* --- Interposed libfuse entry points --------------------------------------- */

static void *real_symbol(const char *name)
{
    void *sym = dlvsym(RTLD_NEXT, name, "FUSE_3.0");
    if (!sym)
        fuse_log(FUSE_LOG_ERR, "tracefs bridge: dlvsym(%s@FUSE_3.0): %s\n",
                 name, dlerror());
    return sym;
}

static void reset_session_state(void)
{
    pthread_mutex_lock(&io_lock);
    free(io.open_uniques);
    free(io.fh_flags);
    uint32_t limit = io.max_pages_limit;
    memset(&io, 0, sizeof(io));
    io.max_pages_limit = limit;
    pthread_mutex_unlock(&io_lock);
    custom_io_installed = custom_io_error = 0;
    memset(&stats, 0, sizeof(stats));
}

BRIDGE_EXPORT struct fuse_session *
fuse_session_new(struct fuse_args *args, const struct fuse_lowlevel_ops *op,
                 size_t op_size, void *userdata)
{
    static struct fuse_session *(*real)(struct fuse_args *,
                                        const struct fuse_lowlevel_ops *,
                                        size_t, void *);
    if (!real && !(real = real_symbol("fuse_session_new")))
        return NULL;
    if (!cb_ioctl)  /* install() not called: stay out of the way */
        return real(args, op, op_size, userdata);
    memset(&bridged_ops, 0, sizeof(bridged_ops));
    memcpy(&bridged_ops, op,
           op_size < sizeof(bridged_ops) ? op_size : sizeof(bridged_ops));
    bridged_ops.ioctl = op_ioctl;
    bridged_ops.read = op_read;
    bridged_ops.write = NULL;  /* never reachable: write_buf wins */
    bridged_ops.write_buf = op_write_buf;
    struct fuse_session *se = real(args, &bridged_ops, sizeof(bridged_ops),
                                   userdata);
    if (se) {
        reset_session_state();
        hooked_se = se;
    }
    return se;
}

BRIDGE_EXPORT int fuse_session_mount(struct fuse_session *se,
                                     const char *mountpoint)
{
    static int (*real)(struct fuse_session *, const char *);
    if (!real && !(real = real_symbol("fuse_session_mount")))
        return -1;
    int res = real(se, mountpoint);
    if (res != 0 || se != hooked_se)
        return res;
    /* The receiver thread takes /dev/fuse; libfuse (and pyfuse3, which
     * caches fuse_session_fd() after this returns) get an eventfd that is
     * readable while the receiver has queued requests.  A failure leaves the
     * mount served the plain way; _session's check reports it rather than
     * failing the mount here. */
    int dev_fd = fuse_session_fd(se);
    int event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int rc = event_fd < 0 ? -errno
                          : fuse_session_custom_io(se, &bridge_io, event_fd);
    if (rc == 0) {
        atomic_store_explicit(&wire_fd, dev_fd, memory_order_release);
        fp_set_session(se);
        rc = rx_start(dev_fd, event_fd, SESSION_BUFSIZE, fp_handle);
        if (rc < 0 && dup2(dev_fd, event_fd) == event_fd) {
            /* No receiver: the mount must not be served (nobody would answer
             * the daemon's own faults).  libfuse gets the device back under
             * its session fd, so serve()'s check can unmount cleanly. */
            atomic_store_explicit(&wire_fd, event_fd, memory_order_release);
            close(dev_fd);
        }
    } else if (event_fd >= 0) {
        close(event_fd);
    }
    custom_io_installed = rc == 0;
    custom_io_error = rc < 0 ? -rc : 0;
    return 0;
}

/* Stops the receiver and gives libfuse /dev/fuse back under its session fd
 * number (dup2 over the eventfd), so that its unmount and destroy see the
 * device: fuse_kern_unmount polls it for POLLERR (connection already gone:
 * nothing to unmount) and closes it before umount2, which must not wait on
 * a daemon that is not reading. */
static void stop_receiver(struct fuse_session *se)
{
    int dev_fd = rx_stop();
    if (dev_fd < 0)
        return;
    int se_fd = fuse_session_fd(se);
    if (se_fd >= 0 && se_fd != dev_fd && dup2(dev_fd, se_fd) == se_fd) {
        atomic_store_explicit(&wire_fd, se_fd, memory_order_release);
        close(dev_fd);
    }
}

BRIDGE_EXPORT void fuse_session_unmount(struct fuse_session *se)
{
    static void (*real)(struct fuse_session *);
    if (!real && !(real = real_symbol("fuse_session_unmount")))
        return;
    if (se == hooked_se) {
        st_stop();  /* its stores and replies go out through the receiver's fd */
        stop_receiver(se);
    }
    real(se);
}

BRIDGE_EXPORT void fuse_session_destroy(struct fuse_session *se)
{
    static void (*real)(struct fuse_session *);
    if (!real && !(real = real_symbol("fuse_session_destroy")))
        return;
    if (se == hooked_se) {
        st_stop();
        stop_receiver(se);  /* destroy without unmount */
        fp_set_session(NULL);
        /* Outstanding Requests now reply into the void instead of into a
         * freed session. */
        generation++;
        hooked_se = NULL;
        atomic_store_explicit(&wire_fd, -1, memory_order_release);
    }
    real(se);
}

/* --- Module functions ---------------------------------------------------------- */

static PyObject *bridge_install(PyObject *mod, PyObject *handler)
{
    (void)mod;
    PyObject *m[4];
    static const char *const names[] = {"ioctl", "read", "write",
                                        "interrupted"};
    for (int i = 0; i < 4; i++) {
        m[i] = PyObject_GetAttrString(handler, names[i]);
        if (!m[i] || !PyCallable_Check(m[i])) {
            if (m[i])
                PyErr_Format(PyExc_TypeError, "handler.%s is not callable",
                             names[i]);
            for (int j = 0; j <= i; j++)
                Py_XDECREF(m[j]);
            return NULL;
        }
    }
    Py_XSETREF(cb_ioctl, m[0]);
    Py_XSETREF(cb_read, m[1]);
    Py_XSETREF(cb_write, m[2]);
    Py_XSETREF(cb_interrupted, m[3]);
    Py_RETURN_NONE;
}

/* --- The fast path's table (fuse/_fast_path.py) ------------------------------ */

static PyObject *bridge_fast_configure(PyObject *mod, PyObject *args,
                                       PyObject *kwargs)
{
    (void)mod;
    static char *kwlist[] = {"nr_cpus", "staging_bytes", "debug",
                             "max_pages_limit", NULL};
    unsigned int nr_cpus, max_pages_limit;
    Py_ssize_t staging;
    int debug;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$InpI:fast_configure",
                                     kwlist, &nr_cpus, &staging, &debug,
                                     &max_pages_limit))
        return NULL;
    if (staging < 0) {
        PyErr_SetString(PyExc_ValueError, "staging_bytes < 0");
        return NULL;
    }
    pthread_mutex_lock(&io_lock);
    io.max_pages_limit = max_pages_limit;
    pthread_mutex_unlock(&io_lock);
    int rc = fp_configure(nr_cpus, (size_t)staging, debug);
    if (rc < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_array(PyObject *mod, PyObject *args)
{
    (void)mod;
    unsigned int index, max_entry;
    int tracing_on, clock;
    unsigned long long divisor;
    Py_buffer mask;
    if (!PyArg_ParseTuple(args, "IpIy*iK:fast_array", &index, &tracing_on,
                          &max_entry, &mask, &clock, &divisor))
        return NULL;
    if (index >= FP_MAX_ARRAYS) {
        PyBuffer_Release(&mask);
        PyErr_Format(PyExc_ValueError, "array index %u", index);
        return NULL;
    }
    fp_set_array(index, tracing_on, max_entry, mask.buf, (size_t)mask.len,
                 (clockid_t)clock, divisor);
    PyBuffer_Release(&mask);
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_event(PyObject *mod, PyObject *args)
{
    (void)mod;
    unsigned int id, recorders, min_size;
    int enabled, perf;
    Py_buffer val;
    if (!PyArg_ParseTuple(args, "IppIIy*:fast_event", &id, &enabled, &perf,
                          &recorders, &min_size, &val))
        return NULL;
    int rc = -EINVAL;
    if (id <= UINT16_MAX && recorders <= UINT8_MAX && val.len % 8 == 0)
        rc = fp_set_event((uint16_t)id, enabled, perf, (uint8_t)recorders,
                          min_size, val.buf, (size_t)val.len / 8);
    PyBuffer_Release(&val);
    if (rc == -ENOMEM)
        return PyErr_NoMemory();
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "bad fast_event arguments");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_perf(PyObject *mod, PyObject *args)
{
    (void)mod;
    Py_buffer blobs[3];
    unsigned int sizes_in[3];
    if (!PyArg_ParseTuple(args, "y*Iy*Iy*I:fast_perf", &blobs[0], &sizes_in[0],
                          &blobs[1], &sizes_in[1], &blobs[2], &sizes_in[2]))
        return NULL;
    int rc = 0;
    size_t sizes[3], counts[3];
    for (int i = 0; i < 3; i++) {
        sizes[i] = sizes_in[i];
        if (!sizes[i] || blobs[i].len % sizes_in[i])
            rc = -EINVAL;
        else
            counts[i] = (size_t)blobs[i].len / sizes[i];
    }
    if (rc == 0)
        rc = fp_set_perf(blobs[0].buf, counts[0], blobs[1].buf, counts[1],
                         blobs[2].buf, counts[2], sizes);
    else
        fp_revoke_perf();
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&blobs[i]);
    if (rc == -ENOMEM)
        return PyErr_NoMemory();
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "bad fast_perf tables");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_perf_revoke(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    fp_revoke_perf();
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_slots(PyObject *mod, PyObject *args)
{
    (void)mod;
    unsigned long long fh;
    unsigned int start;
    Py_buffer ids;
    if (!PyArg_ParseTuple(args, "KIy*:fast_slots", &fh, &start, &ids))
        return NULL;
    int rc = ids.len % 2 ? -EINVAL
                         : fp_set_slots(fh, start, ids.buf, (size_t)ids.len / 2);
    PyBuffer_Release(&ids);
    if (rc == -ENOMEM)
        return PyErr_NoMemory();
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "ids must be u16s");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_drop_file(PyObject *mod, PyObject *arg)
{
    (void)mod;
    unsigned long long fh = PyLong_AsUnsignedLongLong(arg);
    if (fh == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    fp_drop_file(fh);
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_task(PyObject *mod, PyObject *args)
{
    (void)mod;
    int tid, tgid;
    unsigned int cpu;
    unsigned long long ttl;
    Py_buffer comm;
    if (!PyArg_ParseTuple(args, "iiIy*K:fast_task", &tid, &tgid, &cpu, &comm,
                          &ttl))
        return NULL;
    fp_set_task(tid, tgid, cpu, comm.buf, (size_t)comm.len, ttl);
    PyBuffer_Release(&comm);
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_wake(PyObject *mod, PyObject *arg)
{
    (void)mod;
    int wake = PyObject_IsTrue(arg);
    if (wake < 0)
        return NULL;
    fp_set_wake(wake);
    Py_RETURN_NONE;
}

static PyObject *bridge_fast_staged(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    const unsigned char *data;
    size_t len;
    fp_staged(&data, &len);
    if (!len)
        Py_RETURN_NONE;
    return PyMemoryView_FromMemory((char *)data, (Py_ssize_t)len, PyBUF_READ);
}

static PyObject *bridge_fast_consumed(PyObject *mod, PyObject *arg)
{
    (void)mod;
    size_t len = PyLong_AsSize_t(arg);
    if (len == (size_t)-1 && PyErr_Occurred())
        return NULL;
    fp_consumed(len);
    Py_RETURN_NONE;
}

static PyObject *bridge_set_drain(PyObject *mod, PyObject *cb)
{
    (void)mod;
    if (cb != Py_None && !PyCallable_Check(cb)) {
        PyErr_SetString(PyExc_TypeError, "drain must be callable or None");
        return NULL;
    }
    Py_XSETREF(cb_drain, cb == Py_None ? NULL : Py_NewRef(cb));
    Py_RETURN_NONE;
}

/* --- Page stores (fuse/_pagepush.py; _native/storer.c) ----------------------- */

/* store(stores, req=None, reply=0, value=0, signal=False) -> int: queue
 * [(inode, offset, bytes), ...] for the storer thread, then req's reply of
 * kind `reply` (REPLY_WRITE: count; REPLY_ERR: errno; REPLY_IOCTL: result,
 * no data) once they are stored.  The batch's sequence number (compare
 * stored()); 0 when no session is hooked (nothing to store into). */
static PyObject *bridge_store(PyObject *mod, PyObject *args, PyObject *kwargs)
{
    (void)mod;
    static char *kwlist[] = {"stores", "req", "reply", "value", "signal",
                             NULL};
    PyObject *seq_obj, *req_obj = Py_None;
    int reply = ST_REPLY_NONE, signal = 0;
    long long value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OiLp:store", kwlist,
                                     &seq_obj, &req_obj, &reply, &value,
                                     &signal))
        return NULL;
    Request *self = NULL;
    enum req_kind kind = 0;
    if (req_obj != Py_None) {
        if (!PyObject_TypeCheck(req_obj, &RequestType)) {
            PyErr_SetString(PyExc_TypeError, "req must be a Request or None");
            return NULL;
        }
        self = (Request *)req_obj;
        switch (reply) {
        case ST_REPLY_WRITE:
            kind = KIND_WRITE;
            break;
        case ST_REPLY_IOCTL:
            kind = KIND_IOCTL;
            break;
        case ST_REPLY_ERR:
            if (value <= 0 || value >= 1000) {
                PyErr_Format(PyExc_ValueError, "errno out of range: %lld",
                             value);
                return NULL;
            }
            break;
        default:
            PyErr_Format(PyExc_ValueError, "no such reply: %d", reply);
            return NULL;
        }
    } else if (reply != ST_REPLY_NONE) {
        PyErr_SetString(PyExc_ValueError, "a reply needs a req");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(seq_obj, "stores must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    struct st_store *stores = PyMem_Calloc((size_t)n + 1, sizeof(*stores));
    Py_buffer *views = PyMem_Calloc((size_t)n + 1, sizeof(*views));
    PyObject *res = NULL;
    Py_ssize_t held = 0;
    if (!stores || !views) {
        PyErr_NoMemory();
        goto out;
    }
    for (; held < n; held++) {
        unsigned long long ino, offset;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, held), "KKy*",
                              &ino, &offset, &views[held]))
            goto out;
        stores[held] = (struct st_store){ino, offset, views[held].buf,
                                         (size_t)views[held].len};
    }
    fuse_req_t req = NULL;
    int taken = 0;
    if (self && (taken = request_take(self, kind, &req)) < 0)
        goto out;
    if (!hooked_se) {  /* no session: nothing maps our files */
        res = PyLong_FromLong(0);
        goto out;
    }
    /* A stale request (taken == 0) is not replied; its stores still go. */
    long long pushed = st_push(hooked_se, stores, (size_t)n,
                               taken > 0 ? req : NULL,
                               taken > 0 ? reply : ST_REPLY_NONE,
                               value, signal);
    if (pushed < 0) {
        if (taken > 0)
            self->req = req;  /* still the caller's to answer */
        errno = (int)-pushed;
        PyErr_SetFromErrno(PyExc_OSError);
        goto out;
    }
    res = PyLong_FromLongLong(pushed);
out:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(stores);
    Py_DECREF(seq);
    return res;
}

static PyObject *bridge_stored(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    return PyLong_FromUnsignedLongLong(st_stored());
}

static PyObject *bridge_store_fd(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    int fd = st_event_fd();
    if (fd < 0) {
        errno = -fd;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLong(fd);
}

/* Around every access of the Python thread to client memory: a queued page
 * fill it waits for is refused once it has waited too long (receiver.c). */
static PyObject *bridge_access_begin(PyObject *mod, PyObject *const *args,
                                     Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "access_begin(pid, addr, size)");
        return NULL;
    }
    long pid = PyLong_AsLong(args[0]);
    unsigned long long addr = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long size = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    rx_access_begin((pid_t)pid, addr, size);
    Py_RETURN_NONE;
}

static PyObject *bridge_access_end(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    return PyBool_FromLong(rx_access_end());
}

static PyObject *bridge_set_own_device(PyObject *mod, PyObject *args)
{
    (void)mod;
    unsigned major, minor;
    if (!PyArg_ParseTuple(args, "II", &major, &minor))
        return NULL;
    rx_set_own_device(major, minor);
    Py_RETURN_NONE;
}

/* perfmon_capable() of another thread: CAP_PERFMON or CAP_SYS_ADMIN in its
 * effective set, by capget(2) (one system call; /proc/<tid>/status costs an
 * open, a formatted read and a close).  False if the thread is gone. */
static PyObject *bridge_perfmon_capable(PyObject *mod, PyObject *arg)
{
    (void)mod;
    long tid = PyLong_AsLong(arg);
    if (tid == -1 && PyErr_Occurred())
        return NULL;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3,
                                           .pid = (int)tid};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &hdr, data) != 0)
        Py_RETURN_FALSE;
    uint64_t eff = (uint64_t)data[1].effective << 32 | data[0].effective;
    return PyBool_FromLong((eff >> CAP_PERFMON & 1) || (eff >> CAP_SYS_ADMIN & 1));
}

static PyObject *bridge_request_limits(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    pthread_mutex_lock(&io_lock);
    uint32_t max_write = io.max_write, max_pages = io.max_pages;
    pthread_mutex_unlock(&io_lock);
    return Py_BuildValue("(II)", max_write, max_pages);
}

static PyObject *bridge_set_open_flags(PyObject *mod, PyObject *args)
{
    (void)mod;
    unsigned long long fh;
    unsigned int flags;
    if (!PyArg_ParseTuple(args, "KI:set_open_flags", &fh, &flags))
        return NULL;
    if (flags & ~(unsigned)OPEN_FLAGS_ALLOWED) {
        PyErr_Format(PyExc_ValueError, "unsupported FOPEN_* bits 0x%x",
                     flags & ~(unsigned)OPEN_FLAGS_ALLOWED);
        return NULL;
    }
    pthread_mutex_lock(&io_lock);
    take_fh_flags(fh);
    int ok = 1;
    if (flags) {
        ok = grow((void **)&io.fh_flags, &io.cap_fh, io.n_fh + 1,
                  sizeof(*io.fh_flags)) == 0;
        if (ok)
            io.fh_flags[io.n_fh++] = (struct fh_flags){fh, flags};
    }
    pthread_mutex_unlock(&io_lock);
    if (!ok)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* Sets d[key] = value and drops the reference; 0, or -1 with an exception. */
static int put(PyObject *d, const char *key, PyObject *value)
{
    int rc = value ? PyDict_SetItemString(d, key, value) : -1;
    Py_XDECREF(value);
    return rc;
}

#define PUT_BOOL(d, k, v) put(d, k, PyBool_FromLong(v))
#define PUT_INT(d, k, v) put(d, k, PyLong_FromUnsignedLongLong(v))

static PyObject *bridge_status(PyObject *mod, PyObject *noargs)
{
    (void)mod;
    (void)noargs;
    pthread_mutex_lock(&io_lock);
    __typeof__(io) snap = io;
    pthread_mutex_unlock(&io_lock);
    struct rx_stats rxs;
    rx_get_stats(&rxs);
    struct fp_stats fps;
    fp_get_stats(&fps);
    struct st_stats sts;
    st_get_stats(&sts);
    PyObject *declined = PyDict_New();
    if (!declined)
        return NULL;
    for (int i = 1; i < FP_NR_REASONS; i++)
        if (PUT_INT(declined, fp_reason(i), fps.declined[i])) {
            Py_DECREF(declined);
            return NULL;
        }
    PyObject *d = PyDict_New();
    if (!d) {
        Py_DECREF(declined);
        return NULL;
    }
    if (PUT_BOOL(d, "installed", cb_ioctl != NULL) ||
        PUT_BOOL(d, "session_hooked", hooked_se != NULL) ||
        PUT_BOOL(d, "custom_io", custom_io_installed) ||
        PUT_INT(d, "custom_io_error", custom_io_error) ||
        PUT_BOOL(d, "receiver", rx_running()) ||
        PUT_BOOL(d, "init_seen", snap.init_seen) ||
        PUT_INT(d, "kernel_major", snap.kernel_major) ||
        PUT_INT(d, "kernel_minor", snap.kernel_minor) ||
        PUT_INT(d, "kernel_flags", snap.kernel_flags) ||
        PUT_INT(d, "kernel_flags2", snap.kernel_flags2) ||
        PUT_BOOL(d, "allow_mmap_offered",
                 (snap.kernel_flags & FUSE_INIT_EXT) &&
                     (snap.kernel_flags2 & INIT_FLAGS2_DIRECT_IO_ALLOW_MMAP)) ||
        PUT_BOOL(d, "allow_mmap_granted", snap.allow_mmap_granted) ||
        PUT_INT(d, "reply_minor", snap.reply_minor) ||
        PUT_INT(d, "reply_flags", snap.reply_flags) ||
        PUT_INT(d, "reply_flags2", snap.reply_flags2) ||
        PUT_INT(d, "requests", snap.requests) ||
        PUT_INT(d, "interrupts_received", snap.interrupts_received) ||
        PUT_INT(d, "open_fixups", snap.open_fixups) ||
        PUT_INT(d, "ioctls", stats.ioctls) ||
        PUT_INT(d, "reads", stats.reads) ||
        PUT_INT(d, "writes", stats.writes) ||
        PUT_INT(d, "interrupts", stats.interrupts) ||
        PUT_INT(d, "orphaned", stats.orphaned) ||
        PUT_INT(d, "handler_errors", stats.handler_errors) ||
        PUT_INT(d, "dropped_replies", stats.dropped_replies) ||
        PUT_INT(d, "stale_replies", stats.stale_replies) ||
        PUT_INT(d, "received", rxs.received) ||
        PUT_INT(d, "queued", rxs.queued) ||
        PUT_INT(d, "queue_peak", rxs.queue_peak) ||
        PUT_INT(d, "served_natively", rxs.native) ||
        PUT_INT(d, "own_fills_refused", rxs.own_fills_refused) ||
        PUT_INT(d, "stuck_fills_refused", rxs.stuck_fills_refused) ||
        PUT_INT(d, "foreign_aborted", rxs.foreign_aborted) ||
        PUT_INT(d, "max_write", snap.max_write) ||
        PUT_INT(d, "max_pages", snap.max_pages) ||
        PUT_INT(d, "fast_served", fps.served) ||
        PUT_INT(d, "fast_staged", fps.staged) ||
        PUT_INT(d, "fast_drains", fast_drains) ||
        PUT_INT(d, "fast_task_refreshes", fps.task_refreshes) ||
        PUT_INT(d, "store_batches", sts.batches) ||
        PUT_INT(d, "stores", sts.stores) ||
        PUT_INT(d, "store_errors", sts.store_errors) ||
        PUT_INT(d, "stored_replies", sts.replies) ||
        PUT_INT(d, "store_queue_peak", sts.queue_peak) ||
        put(d, "fast_declined", declined)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyMethodDef bridge_methods[] = {
    {"install", bridge_install, METH_O,
     "install(handler): route ioctl/read/write/interrupts to `handler`; "
     "call before pyfuse3.init()."},
    {"set_open_flags", bridge_set_open_flags, METH_VARARGS,
     "set_open_flags(fh, flags): OR FOPEN_* `flags` into the next OPEN reply "
     "carrying `fh`; 0 cancels."},
    {"fast_configure", (PyCFunction)(void (*)(void))bridge_fast_configure,
     METH_VARARGS | METH_KEYWORDS,
     "fast_configure(*, nr_cpus, staging_bytes, debug, max_pages_limit): "
     "set up the fast path (staging_bytes 0: off)."},
    {"fast_array", bridge_fast_array, METH_VARARGS,
     "fast_array(index, tracing_on, max_entry, cpumask, clockid, divisor)"},
    {"fast_event", bridge_fast_event, METH_VARARGS,
     "fast_event(id, enabled, perf, recorders, min_size, validators)"},
    {"fast_perf", bridge_fast_perf, METH_VARARGS,
     "fast_perf(rings, ring_size, perfs, perf_size, announced, announced_size): "
     "the perf table, live"},
    {"fast_perf_revoke", bridge_fast_perf_revoke, METH_NOARGS,
     "fast_perf_revoke(): the engine writes every perf sample until the next fast_perf"},
    {"fast_slots", bridge_fast_slots, METH_VARARGS,
     "fast_slots(fh, start, ids): event ids (u16) of write indices"},
    {"fast_drop_file", bridge_fast_drop_file, METH_O, "fast_drop_file(fh)"},
    {"fast_task", bridge_fast_task, METH_VARARGS,
     "fast_task(tid, tgid, cpu, comm, ttl_ns)"},
    {"fast_wake", bridge_fast_wake, METH_O,
     "fast_wake(bool): drain after every staged record"},
    {"fast_staged", bridge_fast_staged, METH_NOARGS,
     "fast_staged() -> memoryview | None: the oldest staged records"},
    {"fast_consumed", bridge_fast_consumed, METH_O,
     "fast_consumed(n): n bytes of fast_staged() were taken in"},
    {"set_drain", bridge_set_drain, METH_O,
     "set_drain(callable | None): called (trio thread) to take staged "
     "records in"},
    {"access_begin", (PyCFunction)(void (*)(void))bridge_access_begin,
     METH_FASTCALL,
     "access_begin(pid, addr, size): the calling thread starts an access to "
     "size bytes of pid's memory at addr"},
    {"access_end", bridge_access_end, METH_NOARGS,
     "access_end() -> bool: ... and is done with it; whether the watchdog "
     "aborted a FUSE connection to end its wait"},
    {"set_own_device", bridge_set_own_device, METH_VARARGS,
     "set_own_device(major, minor): our mount's device, never aborted"},
    {"perfmon_capable", bridge_perfmon_capable, METH_O,
     "perfmon_capable(tid) -> bool: CAP_PERFMON or CAP_SYS_ADMIN effective"},
    {"request_limits", bridge_request_limits, METH_NOARGS,
     "request_limits() -> (max_write, max_pages): what FUSE_INIT settled "
     "(0, 0 before it)"},
    {"store", (PyCFunction)(void (*)(void))bridge_store,
     METH_VARARGS | METH_KEYWORDS,
     "store(stores, req=None, reply=0, value=0, signal=False) -> int: queue "
     "[(inode, offset, bytes)] for the storer thread, then req's reply"},
    {"stored", bridge_stored, METH_NOARGS,
     "stored() -> int: the sequence number of the last batch stored"},
    {"store_fd", bridge_store_fd, METH_NOARGS,
     "store_fd() -> int: an eventfd written when a signal batch is stored"},
    {"status", bridge_status, METH_NOARGS,
     "status() -> dict: hooks in place, INIT negotiation, counters."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(bridge_doc,
"Native bridge extending pyfuse3 3.5.0's libfuse session.\n"
"\n"
"Load only through tracefs_fuse.fuse._session, which dlopens this module\n"
"with RTLD_GLOBAL before pyfuse3 so that pyfuse3's fuse_session_new,\n"
"fuse_session_mount and fuse_session_destroy bind here.\n"
"\n"
"install(handler) must precede pyfuse3.init().  From then on FUSE_IOCTL,\n"
"FUSE_READ and FUSE_WRITE bypass pyfuse3's Operations and call, in the trio\n"
"thread with the GIL held, synchronously (never await; start a task to reply\n"
"later):\n"
"\n"
"    handler.ioctl(req, ino, fh, cmd, arg, in_data: bytes, out_size, flags)\n"
"    handler.read(req, ino, fh, offset, size, flags, lock_owner)\n"
"    handler.write(req, ino, fh, offset, data: bytes, flags)\n"
"    handler.interrupted(req)\n"
"\n"
"ioctl: restricted, so in_data is the _IOC_SIZE(cmd) bytes the kernel copied\n"
"(8 for a pointer-typed cmd); `arg` is the caller's address.  read: `flags`\n"
"is the file's current f_flags (fcntl O_NONBLOCK included); lock_owner is 0\n"
"for page-cache fills (mmap faults, readahead) and non-zero for read(2).\n"
"\n"
"Request: unique, pid (caller's thread id), uid, gid, replied, interrupted;\n"
"reply_data(bytes) / reply_write(count) / reply_ioctl(result, data=b'') /\n"
"reply_err(errno), exactly once (a second reply raises RuntimeError; the\n"
"wrong kind raises TypeError).  reply_ioctl with empty data makes the kernel\n"
"copy nothing back, so process_vm_writev results survive.\n"
"watch_interrupts() -> bool registers for FUSE_INTERRUPT: handler.\n"
"interrupted(req) is then called from inside libfuse, where replying is\n"
"forbidden (RuntimeError): cancel the waiter, and let it reply.  It returns\n"
"True, without calling interrupted(), if the interrupt came first.\n"
"\n"
"Safety nets: a Request collected without a reply answers EIO and logs; an\n"
"exception escaping a handler is logged and answered EIO; replies after\n"
"pyfuse3.close() are no-ops.  Reply errors ENOENT/ENODEV (request or mount\n"
"gone) are counted, others raise OSError.\n"
"\n"
"set_open_flags(fh, flags) ORs FOPEN_* bits (e.g. FOPEN_PARALLEL_DIRECT_WRITES)\n"
"into the next OPEN reply for fh; call it in Operations.open just before\n"
"returning FileInfo(fh=fh).  The FUSE_INIT reply gets FUSE_INIT_EXT and\n"
"FUSE_DIRECT_IO_ALLOW_MMAP when the kernel offers it.  status() reports it all.");

static struct PyModuleDef bridge_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tracefs_fuse.fuse._bridge",
    .m_doc = bridge_doc,
    .m_size = -1,  /* process-global by nature: one libfuse session hook */
    .m_methods = bridge_methods,
};

PyMODINIT_FUNC PyInit__bridge(void)
{
    if (PyType_Ready(&RequestType) < 0)
        return NULL;
    PyObject *logging = PyImport_ImportModule("logging");
    if (!logging)
        return NULL;
    PyObject *logger = PyObject_CallMethod(logging, "getLogger", "s",
                                           "tracefs_fuse.fuse._bridge");
    Py_DECREF(logging);
    if (!logger)
        return NULL;
    Py_XSETREF(log_error_fn, PyObject_GetAttrString(logger, "error"));
    Py_DECREF(logger);
    if (!log_error_fn)
        return NULL;
    PyObject *m = PyModule_Create(&bridge_module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Request", (PyObject *)&RequestType) < 0 ||
        PyModule_AddIntConstant(m, "FOPEN_DIRECT_IO", FOPEN_DIRECT_IO) < 0 ||
        PyModule_AddIntConstant(m, "FOPEN_KEEP_CACHE", FOPEN_KEEP_CACHE) < 0 ||
        PyModule_AddIntConstant(m, "FOPEN_NONSEEKABLE", FOPEN_NONSEEKABLE) < 0 ||
        PyModule_AddIntConstant(m, "FOPEN_STREAM", FOPEN_STREAM) < 0 ||
        PyModule_AddIntConstant(m, "FOPEN_NOFLUSH", FOPEN_NOFLUSH) < 0 ||
        PyModule_AddIntConstant(m, "FOPEN_PARALLEL_DIRECT_WRITES",
                                FOPEN_PARALLEL_DIRECT_WRITES) < 0 ||
        PyModule_AddIntConstant(m, "FUSE_IOCTL_COMPAT", FUSE_IOCTL_COMPAT) < 0 ||
        PyModule_AddIntConstant(m, "FUSE_IOCTL_DIR", FUSE_IOCTL_DIR) < 0 ||
        PyModule_AddIntConstant(m, "REPLY_WRITE", ST_REPLY_WRITE) < 0 ||
        PyModule_AddIntConstant(m, "REPLY_ERR", ST_REPLY_ERR) < 0 ||
        PyModule_AddIntConstant(m, "REPLY_IOCTL", ST_REPLY_IOCTL) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
