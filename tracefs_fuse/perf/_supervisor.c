/*
 * perf_event_open for our events, inside `tracefs-fuse run`: the seccomp
 * user-notification filter CMD runs under, and the supervisor thread that
 * answers it.
 *
 * Rules:
 *  - CMD is started here (spawn(): vfork, its set-up in C, exec), so that the
 *    filter is installed in CMD's child before exec without Python running in
 *    the child.
 *  - The filter sends perf_event_open
 *    and every ioctl of type '$' (the perf ioctls), on x86_64 and i386, to
 *    the supervisor; everything else is allowed without a round trip.
 *  - The supervisor is a plain thread of ours, never the trio thread: what it
 *    does (opening our perf files) causes FUSE requests the trio thread serves.
 *    It asks Python only about the perf_event_open calls that may be ours
 *    (must_ask) and about ioctls on our own files; everything else continues
 *    to the kernel at once (SECCOMP_USER_NOTIF_FLAG_CONTINUE), untouched: a
 *    program's own hardware and software counters cost the notification's
 *    round trip only.
 *  - Caller memory is read with process_vm_readv and the notification is
 *    checked again (SECCOMP_IOCTL_NOTIF_ID_VALID) before its contents decide
 *    anything: the caller may have been killed and its tid reused.
 *  - SET_OUTPUT of a real perf fd into one of ours (perf record -a's
 *    side-band dummy) is asked about too: the kernel cannot find our fd's
 *    event and would say EBADF.
 *  - One of ours is a file of our mount, opened here and installed in the
 *    caller with SECCOMP_IOCTL_NOTIF_ADDFD + SEND (5.14+), close-on-exec as
 *    PERF_FLAG_FD_CLOEXEC asks.
 *
 * Kernel: include/uapi/linux/seccomp.h, kernel/seccomp.c, Documentation/
 * userspace-api/seccomp_filter.rst.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR_PERF_EVENT_OPEN_X86_64 298
#define NR_IOCTL_X86_64 16
#define NR_PERF_EVENT_OPEN_I386 336
#define NR_IOCTL_I386 54
#define PERF_IOC_TYPE 0x2400u /* '$' << 8 */
#define PERF_INODE "anon_inode:[perf_event]"
#define ATTR_MAX 4096

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif

/* The filter: one block per ABI, "catch perf_event_open, catch '$' ioctls". */
#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
static struct sock_filter filter_code[] = {
	LOAD(arch),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 8),
	LOAD(nr),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_PERF_EVENT_OPEN_X86_64, 14, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_IOCTL_X86_64, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	/* args[1] is the cmd: its low 32 bits (little endian) */
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
	BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff00),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PERF_IOC_TYPE, 9, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, 0, 6),
	LOAD(nr),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_PERF_EVENT_OPEN_I386, 5, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NR_IOCTL_I386, 0, 3),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
	BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff00),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PERF_IOC_TYPE, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
};

/* The filter on this task; its listener fd, or -1 with errno set. */
static long install_filter(void)
{
	struct sock_fprog prog = {
		.len = sizeof(filter_code) / sizeof(filter_code[0]),
		.filter = filter_code,
	};
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			  SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
			  &prog);
	if (fd < 0 && errno == EINVAL) /* before 5.19 */
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			     SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	return fd;
}

/*
 * spawn(): CMD started the way subprocess.Popen(argv, close_fds=False) with
 * run's preexec_fn started it, without running Python in the child.
 *
 * Why: a preexec_fn makes Popen fork() the whole interpreter (page tables,
 * then a copy-on-write fault for every page the child's Python touches) and
 * wait for its exec: 5 ms of a fixture test. Here the child is a vfork()
 * (CLONE_VM | CLONE_VFORK, as _posixsubprocess uses without a preexec_fn)
 * that runs only the C below, on memory prepared before it, and execs.
 *
 * The child, in order (what run's _child_setup and Interception.in_child did):
 *  - every signal we catch back to SIG_DFL (a handler of ours must not run in
 *    it before exec: it shares our memory), and SIGINT, SIGPIPE and SIGXFSZ
 *    to SIG_DFL (Popen's restore_signals, plus SIGINT, which run ignores);
 *    signals the caller ignored stay ignored;
 *  - our signal mask, less SIGINT (run blocks it; the command gets it as usual);
 *  - PR_SET_PDEATHSIG = SIGKILL (the forking thread is run's main thread);
 *  - RLIMIT_NOFILE's soft limit back to the one run was started with;
 *  - the perf filter: its listener sent to us over `report` with SCM_RIGHTS
 *    (data "0"), or the errno as text when it cannot be installed, CMD then
 *    running unfiltered;
 *  - execv of each candidate path in turn (Popen's PATH search, made in
 *    Python): the first errno other than ENOENT and ENOTDIR is the one
 *    reported (as Popen reports it), else the last.
 * All signals are blocked in the caller around vfork(), so none is taken in
 * the child before its handlers are reset. The GIL stays held: no thread of
 * ours runs Python while the child borrows our memory.
 */
struct spawn_plan {
	char *const *paths;
	char *const *argv;
	rlim_t fd_limit;
	int report;
	sigset_t mask;
	volatile int exec_errno;
};

static void report_filter(int report)
{
	long fd = install_filter();
	if (fd < 0) {
		char text[16];
		int len = snprintf(text, sizeof(text), "%d", errno);
		ssize_t ignored = send(report, text, (size_t)len, 0);
		(void)ignored;
		return;
	}
	char zero = '0';
	struct iovec iov = {.iov_base = &zero, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	memset(&control, 0, sizeof(control));
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	int listener = (int)fd;
	memcpy(CMSG_DATA(cmsg), &listener, sizeof(int));
	ssize_t ignored = sendmsg(report, &msg, 0);
	(void)ignored;
	close(listener);
}

static void __attribute__((noreturn)) spawn_child(struct spawn_plan *plan)
{
	/* Failures of the set-up calls are ignored, as run's preexec_fn ignored
	 * prctl's: none can fail for these arguments. */
	for (int signum = 1; signum < NSIG; signum++) {
		struct sigaction old;
		if (sigaction(signum, NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
		    old.sa_handler != SIG_DFL)
			signal(signum, SIG_DFL);
	}
	signal(SIGINT, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	struct rlimit limit;
	if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
		limit.rlim_cur = plan->fd_limit < limit.rlim_max ? plan->fd_limit : limit.rlim_max;
		setrlimit(RLIMIT_NOFILE, &limit);
	}
	report_filter(plan->report);
	sigprocmask(SIG_SETMASK, &plan->mask, NULL);
	int saved = 0;
	for (char *const *path = plan->paths; *path; path++) {
		execv(*path, plan->argv);
		if (errno != ENOENT && errno != ENOTDIR && !saved)
			saved = errno;
	}
	plan->exec_errno = saved ? saved : errno;
	_exit(127);
}

/* A list of bytes as a NULL-terminated array of C strings (into `out`). */
static char **c_strings(PyObject *list, const char *what)
{
	if (!PyList_Check(list) || PyList_GET_SIZE(list) == 0) {
		PyErr_Format(PyExc_ValueError, "%s: a non-empty list of bytes", what);
		return NULL;
	}
	Py_ssize_t n = PyList_GET_SIZE(list);
	char **out = PyMem_Calloc((size_t)n + 1, sizeof(char *));
	if (!out)
		return (char **)PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < n; i++) {
		char *text;
		Py_ssize_t size;
		if (PyBytes_AsStringAndSize(PyList_GET_ITEM(list, i), &text, &size) < 0) {
			PyMem_Free(out);
			return NULL;
		}
		if ((size_t)size != strlen(text)) {
			PyErr_SetString(PyExc_ValueError, "embedded null byte");
			PyMem_Free(out);
			return NULL;
		}
		out[i] = text;
	}
	return out;
}

/* spawn(paths, argv, fd_limit, report) -> pid; OSError(errno) if no exec succeeded. */
static PyObject *spawn(PyObject *self, PyObject *args)
{
	(void)self;
	PyObject *paths_list, *argv_list;
	unsigned long long fd_limit;
	int report;
	if (!PyArg_ParseTuple(args, "O!O!Ki", &PyList_Type, &paths_list, &PyList_Type, &argv_list,
			      &fd_limit, &report))
		return NULL;
	struct spawn_plan plan = {.fd_limit = (rlim_t)fd_limit, .report = report, .exec_errno = 0};
	char **paths = c_strings(paths_list, "paths");
	if (!paths)
		return NULL;
	char **argv = c_strings(argv_list, "argv");
	if (!argv) {
		PyMem_Free(paths);
		return NULL;
	}
	plan.paths = paths;
	plan.argv = argv;
	/* The command's mask: the calling thread's, less SIGINT. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	plan.mask = old;
	sigdelset(&plan.mask, SIGINT);
	pid_t pid = vfork();
	if (pid == 0)
		spawn_child(&plan);
	int vfork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	PyMem_Free(paths);
	PyMem_Free(argv);
	if (pid < 0) {
		errno = vfork_errno;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	if (plan.exec_errno) {
		/* Reaped here, as Popen reaps a child whose exec failed. */
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		errno = plan.exec_errno;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	return PyLong_FromLong(pid);
}

typedef struct {
	PyObject_HEAD
	int listener;
	int stop; /* eventfd */
	pthread_t thread;
	int running;
	PyObject *on_open;  /* (tid, attr bytes, pid, cpu, group_fd, flags) -> None|int|str */
	PyObject *on_ioctl; /* (tid, path, cmd, arg) -> (int, bytes|None) */
	PyObject *on_redirect; /* (tid, path of ours) -> 0 or -errno; NULL: never asked */
	uint64_t side_band; /* the attr flags that ask for side-band records */
	char prefix[512];   /* our perf files' directory, as /proc/<tid>/fd shows it */
	size_t prefix_len;
} Supervisor;

static void respond(Supervisor *s, const struct seccomp_notif *req, long long val, int error,
		    int cont)
{
	struct seccomp_notif_resp resp = {
		.id = req->id, .val = val, .error = error,
		.flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0,
	};
	/* ENOENT: the caller went away (killed); nothing to answer. */
	(void)ioctl(s->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

static int still_valid(Supervisor *s, const struct seccomp_notif *req)
{
	__u64 id = req->id;
	return ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/*
 * Whether a perf_event_open with this attr (got bytes of it) may be ours, or
 * must be seen by Python although the kernel answers it: a tracepoint (ours
 * if its id is), a PERF_COUNT_SW_DUMMY (a leader one_collect pairs with ours,
 * or perf's side-band dummy standing in rootless), and any event asking for
 * side-band records (remembered for a later SET_OUTPUT into ours). What it
 * cannot read is asked about too: Python gives the kernel's answer.
 *
 * struct perf_event_attr { __u32 type; __u32 size; __u64 config; ...
 *                          __u64 flags bit fields at offset 40; ... }
 */
static int must_ask(const unsigned char *attr, size_t got, uint64_t side_band)
{
	__u32 type;
	__u64 config, flags;
	if (got < 48)
		return 1;
	memcpy(&type, attr, sizeof(type));
	memcpy(&config, attr + 8, sizeof(config));
	memcpy(&flags, attr + 40, sizeof(flags));
	return type == PERF_TYPE_TRACEPOINT
	       || (type == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_DUMMY)
	       || (flags & side_band) != 0;
}

static ssize_t read_caller(pid_t tid, uint64_t addr, void *buf, size_t size)
{
	struct iovec local = {buf, size}, remote = {(void *)(uintptr_t)addr, size};
	return process_vm_readv(tid, &local, 1, &remote, 1, 0);
}

static int write_caller(pid_t tid, uint64_t addr, const void *buf, size_t size)
{
	struct iovec local = {(void *)buf, size}, remote = {(void *)(uintptr_t)addr, size};
	return process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)size ? 0 : -1;
}

/* Install our file `path` in the caller as the syscall's result. */
static void answer_with_file(Supervisor *s, const struct seccomp_notif *req, const char *path,
			     int cloexec)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		respond(s, req, -1, -errno, 0);
		return;
	}
	struct seccomp_notif_addfd addfd = {
		.id = req->id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (__u32)fd,
		.newfd = 0, .newfd_flags = cloexec ? O_CLOEXEC : 0,
	};
	if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) < 0 && errno != ENOENT)
		respond(s, req, -1, -errno, 0);
	close(fd);
}

/* Python's answer, with the GIL held: None continue, int -errno, str a file. */
static void apply_open_answer(Supervisor *s, const struct seccomp_notif *req, PyObject *answer,
			      uint64_t attr_addr)
{
	if (answer == NULL) {
		PyErr_WriteUnraisable(s->on_open);
		respond(s, req, -1, -EIO, 0);
	} else if (answer == Py_None) {
		respond(s, req, 0, 0, 1);
	} else if (PyLong_Check(answer)) {
		long error = PyLong_AsLong(answer);
		if (error == -E2BIG) { /* perf_copy_attr writes its size back */
			__u32 size = 136;
			(void)write_caller(req->pid, attr_addr + 4, &size, sizeof(size));
		}
		respond(s, req, -1, (int)error, 0);
	} else if (PyUnicode_Check(answer)) {
		const char *path = PyUnicode_AsUTF8(answer);
		char copy[1024];
		snprintf(copy, sizeof(copy), "%s", path ? path : "");
		int cloexec = (req->data.args[4] & PERF_FLAG_FD_CLOEXEC) != 0;
		Py_BEGIN_ALLOW_THREADS
		answer_with_file(s, req, copy, cloexec);
		Py_END_ALLOW_THREADS
	} else {
		respond(s, req, -1, -EIO, 0);
	}
}

static void handle_open(Supervisor *s, const struct seccomp_notif *req)
{
	uint64_t addr = req->data.args[0];
	unsigned char attr[ATTR_MAX];
	ssize_t got = read_caller(req->pid, addr, attr, 8);
	if (got == 8) {
		__u32 size;
		memcpy(&size, attr + 4, sizeof(size));
		if (size == 0)
			size = 64;
		if (size <= ATTR_MAX) {
			ssize_t more = read_caller(req->pid, addr, attr, size);
			got = more < 0 ? 0 : more;
		}
	} else if (got < 0) {
		got = 0;
	}
	if (!still_valid(s, req))
		return;
	if (!must_ask(attr, (size_t)got, s->side_band)) {
		respond(s, req, 0, 0, 1);
		return;
	}
	PyGILState_STATE gil = PyGILState_Ensure();
	PyObject *answer = PyObject_CallFunction(
		s->on_open, "iy#iiiK", (int)req->pid, (const char *)attr, (Py_ssize_t)got,
		(int)req->data.args[1], (int)req->data.args[2], (int)req->data.args[3],
		(unsigned long long)req->data.args[4]);
	apply_open_answer(s, req, answer, addr);
	Py_XDECREF(answer);
	PyGILState_Release(gil);
}

/* The name of tid's fd under our perf directory, or NULL (not ours). */
static const char *our_name(Supervisor *s, pid_t tid, unsigned int fd, char *path, size_t size)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/fd/%u", (int)tid, fd);
	ssize_t n = readlink(link, path, size - 1);
	if (n < 0)
		n = 0; /* no such fd: "" is nobody's name */
	path[n] = '\0';
	if ((size_t)n <= s->prefix_len || memcmp(path, s->prefix, s->prefix_len) != 0)
		return NULL;
	return path + s->prefix_len;
}

/* SET_OUTPUT(real perf fd -> ours): 1 if answered, 0 to let the kernel answer. */
static int handle_redirect(Supervisor *s, const struct seccomp_notif *req, const char *real)
{
	char path[1024];
	const char *name;
	if (s->on_redirect == NULL || (unsigned int)req->data.args[1] != PERF_EVENT_IOC_SET_OUTPUT
	    || strcmp(real, PERF_INODE) != 0
	    || (name = our_name(s, req->pid, (unsigned int)req->data.args[2], path,
				sizeof(path))) == NULL)
		return 0;
	if (!still_valid(s, req))
		return 1;
	PyGILState_STATE gil = PyGILState_Ensure();
	PyObject *answer = PyObject_CallFunction(s->on_redirect, "is", (int)req->pid, name);
	long value = answer && PyLong_Check(answer) ? PyLong_AsLong(answer) : -EIO;
	if (PyErr_Occurred())
		PyErr_WriteUnraisable(s->on_redirect);
	Py_XDECREF(answer);
	PyGILState_Release(gil);
	respond(s, req, value < 0 ? -1 : 0, value < 0 ? (int)value : 0, 0);
	return 1;
}

static void handle_ioctl(Supervisor *s, const struct seccomp_notif *req)
{
	char path[1024];
	const char *name = our_name(s, req->pid, (unsigned int)req->data.args[0], path,
				    sizeof(path));
	if (name == NULL) {
		/* a real perf fd, or no perf fd at all */
		if (!handle_redirect(s, req, path))
			respond(s, req, 0, 0, 1);
		return;
	}
	if (!still_valid(s, req))
		return;
	PyGILState_STATE gil = PyGILState_Ensure();
	PyObject *answer = PyObject_CallFunction(
		s->on_ioctl, "isIK", (int)req->pid, name,
		(unsigned int)req->data.args[1], (unsigned long long)req->data.args[2]);
	long value = -EIO;
	const char *out = NULL;
	Py_ssize_t out_len = 0;
	PyObject *data = NULL;
	if (answer && PyArg_ParseTuple(answer, "lO", &value, &data) && data != Py_None
	    && PyBytes_AsStringAndSize(data, (char **)&out, &out_len) < 0)
		value = -EIO;
	if (PyErr_Occurred())
		PyErr_WriteUnraisable(s->on_ioctl);
	if (value >= 0 && out && write_caller(req->pid, req->data.args[2], out, out_len) < 0)
		value = -EFAULT;
	Py_XDECREF(answer);
	PyGILState_Release(gil);
	if (value < 0)
		respond(s, req, -1, (int)value, 0);
	else
		respond(s, req, value, 0, 0);
}

static int is_perf_event_open(const struct seccomp_notif *req)
{
	return req->data.arch == AUDIT_ARCH_X86_64 ? req->data.nr == NR_PERF_EVENT_OPEN_X86_64
						   : req->data.nr == NR_PERF_EVENT_OPEN_I386;
}

static void *supervise(void *arg)
{
	Supervisor *s = arg;
	struct seccomp_notif req;
	for (;;) {
		struct pollfd fds[2] = {{s->listener, POLLIN, 0}, {s->stop, POLLIN, 0}};
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[1].revents)
			break;
		if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))
			break; /* every filtered task is gone */
		memset(&req, 0, sizeof(req));
		if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
			continue; /* ENOENT: the caller was killed meanwhile */
		if (is_perf_event_open(&req))
			handle_open(s, &req);
		else
			handle_ioctl(s, &req);
	}
	return NULL;
}

static int Supervisor_init(Supervisor *s, PyObject *args, PyObject *kwds)
{
	static char *kw[] = {"listener", "prefix", "on_open", "on_ioctl", "side_band",
			     "on_redirect", NULL};
	const char *prefix;
	PyObject *on_open, *on_ioctl, *on_redirect = NULL;
	unsigned long long side_band;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "isOOK|O", kw, &s->listener, &prefix,
					 &on_open, &on_ioctl, &side_band, &on_redirect))
		return -1;
	if (strlen(prefix) >= sizeof(s->prefix)) {
		PyErr_SetString(PyExc_ValueError, "prefix too long");
		return -1;
	}
	strcpy(s->prefix, prefix);
	s->prefix_len = strlen(prefix);
	s->side_band = side_band;
	Py_INCREF(on_open);
	Py_INCREF(on_ioctl);
	s->on_open = on_open;
	s->on_ioctl = on_ioctl;
	Py_XINCREF(on_redirect);
	s->on_redirect = on_redirect;
	s->stop = eventfd(0, EFD_CLOEXEC);
	if (s->stop < 0) {
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	return 0;
}

static PyObject *Supervisor_start(Supervisor *s, PyObject *unused)
{
	(void)unused;
	if (!s->running) {
		int err = pthread_create(&s->thread, NULL, supervise, s);
		if (err) {
			errno = err;
			return PyErr_SetFromErrno(PyExc_OSError);
		}
		s->running = 1;
	}
	Py_RETURN_NONE;
}

/* Stops the thread (it may be inside a Python callback: the GIL is released
 * while we wait) and closes the listener: filtered calls then fail ENOSYS. */
static PyObject *Supervisor_stop(Supervisor *s, PyObject *unused)
{
	(void)unused;
	if (s->running) {
		uint64_t one = 1;
		ssize_t ignored = write(s->stop, &one, sizeof(one));
		(void)ignored;
		Py_BEGIN_ALLOW_THREADS
		pthread_join(s->thread, NULL);
		Py_END_ALLOW_THREADS
		s->running = 0;
	}
	if (s->listener >= 0) {
		close(s->listener);
		s->listener = -1;
	}
	Py_RETURN_NONE;
}

static void Supervisor_dealloc(Supervisor *s)
{
	Py_XDECREF(Supervisor_stop(s, NULL));
	if (s->stop >= 0)
		close(s->stop);
	Py_XDECREF(s->on_open);
	Py_XDECREF(s->on_ioctl);
	Py_XDECREF(s->on_redirect);
	Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef Supervisor_methods[] = {
	{"start", (PyCFunction)Supervisor_start, METH_NOARGS, "Start answering."},
	{"stop", (PyCFunction)Supervisor_stop, METH_NOARGS, "Stop and close the listener."},
	{NULL, NULL, 0, NULL},
};

static PyTypeObject SupervisorType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tracefs_fuse.perf._supervisor.Supervisor",
	.tp_basicsize = sizeof(Supervisor),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Supervisor_init,
	.tp_dealloc = (destructor)Supervisor_dealloc,
	.tp_methods = Supervisor_methods,
};

/* must_ask(attr, side_band) -> bool, for the tests: the rule the thread uses. */
static PyObject *py_must_ask(PyObject *self, PyObject *args)
{
	(void)self;
	Py_buffer attr;
	unsigned long long side_band;
	if (!PyArg_ParseTuple(args, "y*K", &attr, &side_band))
		return NULL;
	int ask = must_ask(attr.buf, (size_t)attr.len, side_band);
	PyBuffer_Release(&attr);
	return PyBool_FromLong(ask);
}

static PyMethodDef module_methods[] = {
	{"must_ask", py_must_ask, METH_VARARGS,
	 "Whether the supervisor asks Python about a perf_event_open with this attr."},
	{"spawn", spawn, METH_VARARGS,
	 "Start CMD under the perf filter (vfork + exec); returns its pid."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_supervisor", NULL, -1, module_methods,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__supervisor(void)
{
	if (PyType_Ready(&SupervisorType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	Py_INCREF(&SupervisorType);
	if (PyModule_AddObject(m, "Supervisor", (PyObject *)&SupervisorType) < 0)
		return NULL;
	return m;
}
