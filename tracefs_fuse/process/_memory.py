"""Clients' memory, reached the two ways user_events reaches it.

The kernel touches a process's memory in two ways, and so do we:

* ``copy_from_user``/``put_user`` on the *caller's* memory, while its ioctl
  runs (the struct, the name, ``write_index``, the first write of an enable
  bit). Here: ``process_vm_readv``/``process_vm_writev`` on the calling
  thread, while :meth:`ClientMemory.serve` names it; for a user_events ioctl
  only on a worker thread of the caller's lane (:func:`read_in_lane`,
  :func:`write_in_lane`, ``_lanes.py``), the engine running on what was read
  there (:meth:`ClientMemory.deferring`), so that only the caller waits for
  its memory, as in the kernel. Nothing can swap that memory
  for another meanwhile: the caller sleeps uninterruptibly until our reply
  (fs/fuse/dev.c ``request_wait_answer``, once the request is read), and an
  exec by another of its threads first waits for every other thread to die
  (fs/exec.c ``begin_new_exec``: ``de_thread`` before ``exec_mmap``).
  ``process_vm_*`` go through GUP without ``FOLL_FORCE``, so a read-only
  mapping refuses a write exactly as the kernel's pin does.
* ``pin_user_pages_remote`` into a *registered image* (``user_event_mm``),
  at any later time (enable and disable). Here: an fd of ``/proc/<pid>/mem``
  opened while the process was known to run that image (an :class:`Image`),
  written by a worker of the image owner's lane (:meth:`ClientMemory.write_bit`),
  never by the trio thread: the kernel writes with ``FOLL_NOFAULT`` and
  leaves a page that is not there to a work item.
  It pins that ``mm``: once the image is replaced (exec) or gone (exit), the
  fd reads and writes nothing (fs/proc/base.c ``mem_rw``:
  ``mmget_not_zero``), whatever runs under the number now. A write can fail;
  it can never land in another image. No read-modify-write spans two images
  either: both halves go through the same fd.

An image is pinned (:meth:`ClientMemory.pin_caller`) while one of its threads
has a request in flight, so the pin is exact; or, for a forked child found
later (:meth:`ClientMemory.pin_copy`), only after checking that the mm pinned
is a fork copy of a known image: ``PF_FORKNOEXEC`` still set, the same memory
layout (``/proc/<pid>/stat`` fields 26-28 and 45-51, copied by ``dup_mm``, set
afresh and randomised by every exec), and the same 16 ``AT_RANDOM`` bytes at
the same address (written at exec by ``create_elf_tables``, a fresh random
value every exec, ASLR or not; a fork copies them). The layout is read after
the fd is opened, so an exec between the two makes them disagree.

Rules:
  * Nothing is written into a process outside its own request except through
    its pinned image; an untracked process is never written to.
  * Transfers stop at the first fault and report how far they got, like a
    partial ``copy_from_user``: ``process_vm_*`` one iovec per page (they
    report progress per iovec), ``/proc/<pid>/mem`` page by page by itself.
  * Every image also holds a pidfd: it names the ``struct pid`` and polls
    readable once the whole thread group has exited (the exit source).
  * Every access is bracketed by ``access_begin``/:func:`_end`, which the
    daemon points at the FUSE bridge (:func:`watch_accesses`), so that the
    receiver's watchdog (``_native/receiver.c``) can end one that waits: on
    a page of our own files that another process is filling (a read only
    this thread could answer; the fills queued are refused after 100 ms),
    or on a file of another FUSE filesystem that does not answer (that
    connection is aborted after 1 s).

Costs (2-CPU test VM, Python 3.11): read 1 byte through ``process_vm_readv``
3.5 us, through the pinned fd 2.5 us; an enable-bit read-modify-write through
the pinned fd about 5 us; pinning a caller (pidfd, mem fd, auxv, stat, token)
about 60 us, once per image.

Caveats:
  * Writes through ``/proc/<pid>/mem`` use ``FOLL_FORCE`` (on kernels booted
    with the default ``proc_mem.force_override``): a page the process itself
    made read-only *after* registering still takes the bit, where the kernel
    would fault and leave it. Only private (copy-on-write) pages of that same
    image can be written that way (GUP refuses forced writes to shared
    read-only mappings). Registration itself is checked without force.
  * The read-modify-write of an enable bit is not atomic against the target
    (the kernel's ``set_bit`` is): a client changing other bits of the same
    byte at that moment can lose its update.
  * An image without ``AT_RANDOM`` (not an ELF exec) cannot vouch for copies:
    its forks are not followed.
  * Where ``kcmp(2)`` is refused (Docker's and podman's default seccomp
    profiles, without CAP_SYS_PTRACE), a child sharing its parent's mm
    (vfork, posix_spawn, clone(CLONE_VM)) found before its exec cannot be
    told from a fork copy: it is pinned as one (its writes land in that same
    mm, the origin's) and keeps its copies of the enablers until it exits.
  * Needs ptrace access to the targets (``PTRACE_MODE_ATTACH``): root, or
    CAP_SYS_PTRACE, or the same uid (inside ``tracefs-fuse run`` the command
    is our descendant, which Yama's scope 1 also allows).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import platform
import select
import struct
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

import msgspec

from ..engine._memory import Tgid
from ..lib import libc
from ._budget import BudgetExhausted, FdBudget
from ._enable_writes import EnableWrites
from ._stat import field, split_stat

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _unwatched_begin(pid: int, addr: int, size: int) -> None:
    """No watchdog: nothing to tell (a ClientMemory outside a daemon)."""


def _unwatched_end() -> bool:
    return False


#: The watchdog's brackets: ``access_begin(pid, addr, size)`` before an access,
#: ``access_end() -> aborted_another_connection`` after it.
access_begin: Callable[[int, int, int], None] = _unwatched_begin
access_end: Callable[[], bool] = _unwatched_end


def watch_accesses(begin: Callable[[int, int, int], None], end: Callable[[], bool]) -> None:
    """Bracket every access with the native watchdog's ``begin``/``end``.

    The daemon installs the FUSE bridge's here: this layer sits below the
    FUSE protocol and must not import it.
    """
    global access_begin, access_end
    access_begin, access_end = begin, end

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
#: Descriptors a pinned image keeps: its pidfd, ``/proc/<pid>/mem`` and the
#: exit watcher's duplicate of the pidfd (``_proc_events.ExitWatcher``).
IMAGE_FDS = 3
#: UIO_MAXIOV: the most iovecs one process_vm_* call accepts.
_IOV_MAX = 1024
#: include/linux/sched.h: set at fork, cleared by begin_new_exec(); stat field 9.
PF_FORKNOEXEC = 0x00000040
#: include/linux/sched.h: set by do_exit() before the task's children are reparented.
PF_EXITING = 0x00000004
#: include/uapi/linux/kcmp.h: enum kcmp_type { KCMP_FILE, KCMP_VM, ... };
KCMP_VM = 1
#: __NR_kcmp: arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h.
_NR_KCMP = {"x86_64": 312, "aarch64": 272, "riscv64": 272}.get(platform.machine())
#: include/uapi/linux/auxvec.h: "#define AT_RANDOM 25 /* address of 16 random bytes */".
AT_RANDOM = 25
AT_RANDOM_SIZE = 16
#: auxv entries: Elf64_auxv_t { uint64_t a_type; union { uint64_t a_val; } a_un; }.
_AUXV_ENTRY = struct.Struct("=QQ")
#: /proc/<pid>/stat fields (1-based) that describe the memory layout
#: (fs/proc/array.c do_task_stat): startcode, endcode, startstack, start_data,
#: end_data, start_brk, arg_start, arg_end, env_start, env_end. 0 for a reader
#: without ptrace access.
LAYOUT_FIELDS = (26, 27, 28, 45, 46, 47, 48, 49, 50, 51)
#: /proc/<pid>/mem offsets are loff_t: addresses from 2^63 up cannot be reached.
_LOFF_LIMIT = 1 << 63
_ADDR_LIMIT = 1 << 64


class _Iovec(ctypes.Structure):
    """``struct iovec { void *iov_base; size_t iov_len; };`` (include/uapi/linux/uio.h)."""

    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


#: process_vm_readv/writev(pid, local_iov, liovcnt, remote_iov, riovcnt, flags)
_VmSyscall = Callable[[int, int, int, int, int, int], int]


def _vm_syscall(name: str) -> _VmSyscall:
    # ssize_t process_vm_readv(pid_t pid, const struct iovec *local_iov, unsigned long liovcnt,
    #                          const struct iovec *remote_iov, unsigned long riovcnt,
    #                          unsigned long flags);   (and process_vm_writev alike)
    func = getattr(libc, name)
    func.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong,
                     ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)
    func.restype = ctypes.c_ssize_t
    return cast(_VmSyscall, func)


_process_vm_readv = _vm_syscall("process_vm_readv")
_process_vm_writev = _vm_syscall("process_vm_writev")

# The errnos that mean "nothing (more) to transfer here" rather than a bug:
# EFAULT: the first remote page is not mapped / not writable;
# EPERM: no ptrace access (mm_access() said EACCES);
# ESRCH: the thread is gone (it cannot be, during its own request, but a
# request can be answered after a SIGKILL'd caller left).
_SHORT_ERRNOS = frozenset({errno.EFAULT, errno.EPERM, errno.ESRCH})


class BitWrite(msgspec.Struct, frozen=True):
    """The caller's own enable bit (``enable_addr``, ``enable_bit``), to set or clear."""

    addr: int
    bit: int
    value: bool


class PutUser(msgspec.Struct, frozen=True):
    """A ``put_user`` into the caller's memory (``write_index``, a status slot)."""

    addr: int
    data: bytes


#: What a user_events ioctl writes into its caller, in the kernel's order.
CallerWrite = BitWrite | PutUser


class Unfetched(Exception):
    """The engine read caller memory its lane has not read yet
    (:meth:`ClientMemory.deferring`): read it there (:func:`read_in_lane`)
    and run the call again. Not a TracefsError: the engine lets it through,
    and it comes before the call changed anything (every user_events ioctl
    reads all it reads first)."""

    def __init__(self, addr: int, size: int) -> None:
        super().__init__(f"{size} bytes at {addr:#x} not read yet")
        self.addr = addr
        self.size = size


class StatFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What ``/proc/<pid>/stat`` tells about a process (fs/proc/array.c)."""

    pid: int
    ppid: int
    #: task->flags (field 9): PF_FORKNOEXEC and friends.
    flags: int
    #: Field 22: start time in clock ticks after boot.
    starttime: int
    #: The LAYOUT_FIELDS, all 0 without ptrace access or without an mm.
    layout: tuple[int, ...]


def parse_stat(data: bytes) -> StatFacts:
    """Parse one ``stat`` line; the comm (field 2) may hold spaces and ``)``."""
    pid, _, rest = split_stat(data)
    return StatFacts(pid=pid, ppid=int(rest[field(4)]), flags=int(rest[field(9)]),
                     starttime=int(rest[field(22)]),
                     layout=tuple(int(rest[field(i)]) if field(i) < len(rest) else 0
                                  for i in LAYOUT_FIELDS))


def read_stat(pid: int, proc: str = "/proc") -> StatFacts | None:
    """``/proc/<pid>/stat`` parsed, or None if there is no such process."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            return parse_stat(f.read())
    except (FileNotFoundError, ProcessLookupError):
        return None


class Identity(msgspec.Struct, frozen=True):
    """What tells one exec'd image, and its fork copies, from every other."""

    layout: tuple[int, ...]
    #: Where the kernel put the image's AT_RANDOM bytes, and the bytes.
    token_addr: int
    token: bytes


class MemoryStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of a :class:`ClientMemory`."""

    images: int
    writes: int
    #: Writes refused: no pinned image, or the image is gone (exec, exit).
    writes_refused: int
    #: Forked children checked and pinned as copies, and those refused.
    copies_pinned: int
    copies_refused: int
    #: Of those pinned, how many without kcmp(2) to rule out a shared mm.
    vm_unknown: int


class _Pidfd:
    """A pidfd and a poll set holding it (a poll object polls in 0.35 us,
    ``select.select`` in 0.8 us)."""

    __slots__ = ("fd", "_poll")

    def __init__(self, tgid: int) -> None:
        self.fd = os.pidfd_open(tgid)
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLIN)

    def group_exited(self) -> bool:
        # pidfd_poll(): POLLIN once the thread group is empty and its leader
        # exited (POLLHUP is added once it has been reaped).
        return bool(self._poll.poll(0))

    def close(self) -> None:
        os.close(self.fd)


class Image:
    """One process image, pinned: the mm a process ran when it was tracked."""

    __slots__ = ("tgid", "pidfd", "memfd", "identity", "owner")

    def __init__(self, tgid: Tgid, pidfd: _Pidfd, memfd: int, identity: Identity | None,
                 owner: int) -> None:
        self.tgid = tgid
        self.pidfd = pidfd
        self.memfd = memfd
        #: None when the image has no AT_RANDOM bytes to recognise copies by.
        self.identity = identity
        #: The uid whose descriptor budget this pin counts against.
        self.owner = owner

    def alive(self) -> bool:
        """Whether this image still runs: not exited, not replaced by exec
        (and not unpinned: its descriptors' numbers may name others now)."""
        if self.memfd < 0 or self.pidfd.group_exited():
            return False
        try:
            # mem_rw(): 0 bytes once the pinned mm has no users left; an
            # unmapped address fails with EIO while it lives.
            probe = self.identity.token_addr if self.identity is not None else PAGE_SIZE
            access_begin(self.tgid, probe, 1)
            try:
                return os.pread(self.memfd, 1, probe) != b""
            finally:
                _end(self.tgid, probe)
        except OSError as e:
            if e.errno == errno.EIO:
                return True
            raise

    def close(self) -> None:
        if self.memfd >= 0:
            self.pidfd.close()
            os.close(self.memfd)
            self.memfd = -1


def _open_image(tgid: Tgid, mem: str, identify: Callable[[int], Identity | None],
                owner: int) -> Image:
    """Pin ``tgid``'s pidfd and the mm behind ``mem``; ``identify`` (given the
    mem fd) names the image or raises, and nothing stays open then. The pidfd
    is checked last: the number named that process throughout only if it has
    not exited since."""
    pidfd = _Pidfd(tgid)
    try:
        memfd = os.open(mem, os.O_RDWR | os.O_CLOEXEC)
        try:
            identity = identify(memfd)
            if pidfd.group_exited():
                raise ProcessLookupError(errno.ESRCH, f"{tgid} exited while being pinned")
        except BaseException:
            os.close(memfd)
            raise
    except BaseException:
        pidfd.close()
        raise
    return Image(tgid, pidfd, memfd, identity, owner)


#: How long pinning a fork copy may wait for the kernel when a descriptor of
#: ours may be flushed by an exec (:attr:`ClientMemory.careful_pins`). An
#: exec holds the new image's ``exec_update_lock`` while it closes its
#: close-on-exec descriptors, and closing a perf file of ours is a FUSE_FLUSH
#: that waits for the daemon; opening ``/proc/<pid>/mem`` (``mm_access``) waits
#: for that lock. Past this, the child is exec'ing, so it is no fork copy.
PIN_WAIT_S = 0.05


class Execing(ProcessLookupError):
    """(ESRCH) the process did not let its mm be pinned in time: it is exec'ing,
    and reading its ``stat`` now would wait for that exec too."""


def _within(seconds: float, work: Callable[[], T], late: Callable[[T], None] | None = None,
            what: str = "") -> T:
    """``work()`` on a thread of its own, waited for ``seconds``.

    Raises:
        Execing: (ESRCH) not done in time: the process is exec'ing. The thread
            is left to finish; ``late`` gets what it returns then.
    """
    lock = threading.Lock()
    done: list[T | BaseException] = []
    abandoned = False

    def run() -> None:
        try:
            result: T | BaseException = work()
        except BaseException as exc:
            result = exc
        with lock:
            if not abandoned:
                done.append(result)
                return
        if late is not None and not isinstance(result, BaseException):
            late(result)

    thread = threading.Thread(target=run, name="tracefs-pin", daemon=True)
    thread.start()
    thread.join(seconds)
    with lock:
        if not done:
            abandoned = True
            raise Execing(errno.ESRCH, f"{what} not done within {seconds} s: exec'ing")
    result = done[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _read_identity(tid: int, proc_dir: str, memfd: int,
                   layout: tuple[int, ...]) -> Identity | None:
    """The AT_RANDOM address from ``auxv`` and the bytes at it, through ``memfd``."""
    try:
        with open(f"{proc_dir}/auxv", "rb") as f:
            auxv = f.read()
    except OSError:
        return None
    for a_type, a_val in _AUXV_ENTRY.iter_unpack(auxv[:len(auxv) // 16 * 16]):
        if a_type == AT_RANDOM:
            token = _pread(tid, memfd, AT_RANDOM_SIZE, a_val)
            if len(token) == AT_RANDOM_SIZE and any(layout):
                return Identity(layout, a_val, token)
            return None
    return None


def _pread(pid: int, fd: int, size: int, addr: int) -> bytes:
    """Read through ``pid``'s pinned ``mem`` fd; short at the first fault,
    b"" when gone."""
    if not 0 <= addr < _LOFF_LIMIT:
        return b""
    access_begin(pid, addr, size)
    try:
        return os.pread(fd, size, addr)
    except OSError as e:
        if e.errno == errno.EIO:  # nothing mapped at addr
            return b""
        raise
    finally:
        _end(pid, addr)


def _pwrite(pid: int, fd: int, data: bytes, addr: int) -> int:
    """Write through ``pid``'s pinned ``mem`` fd; bytes written before a fault."""
    access_begin(pid, addr, len(data))
    try:
        return os.pwrite(fd, data, addr)
    except OSError as e:
        if e.errno == errno.EIO:  # nothing writable at addr
            return 0
        raise
    finally:
        _end(pid, addr)


def _end(pid: int, addr: int) -> None:
    """The access ended; if it ended because the watchdog aborted another
    FUSE connection it waited on, say so."""
    if access_end():
        logger.warning("pid %d's memory at %#x waited 1 s on another FUSE filesystem: "
                       "that connection was aborted", pid, addr)


def _shares_mm(child: int, parent: int) -> bool | None:
    """``kcmp(KCMP_VM)``: whether two tasks use one mm (clone(CLONE_VM), vfork).

    A vanished task shares nothing (ESRCH). None where kcmp cannot be asked:
    no CONFIG_KCMP or an architecture missing from ``_NR_KCMP`` (ENOSYS), or
    a seccomp filter that refuses it (EPERM: Docker's and podman's default
    profiles allow kcmp only with CAP_SYS_PTRACE).
    """
    if _NR_KCMP is None:
        return None
    # kcmp returns 0 for "equal", 1 or 2 for an ordering of two different mms.
    result: int = libc.syscall(_NR_KCMP, child, parent, KCMP_VM, 0, 0)
    if result >= 0:
        return result == 0
    err = ctypes.get_errno()
    if err == errno.ESRCH:
        return False
    if err in (errno.EPERM, errno.ENOSYS, errno.EACCES):
        return None
    raise OSError(err, os.strerror(err))


_SHARES_MM = "shares the mm"


class SharesMm(ProcessLookupError):
    """Not a fork copy: a child sharing its origin's mm (vfork, posix_spawn,
    clone(CLONE_VM)), which shares the origin's enablers instead."""


class ClientMemory:
    """:class:`~tracefs_fuse.engine._memory.ProcessMemory` for the daemon.

    Reads and writes go to the caller of the request being served (see
    :meth:`serve`) or to a pinned image; nothing else is touched.
    Not thread-safe: one instance serves one trio thread.
    """

    def __init__(self, proc: str = "/proc", budget: FdBudget | None = None) -> None:
        self._proc = proc
        #: Whether an exec may wait for us to answer a FUSE_FLUSH (a perf file
        #: of ours is open somewhere): fork copies are then pinned within
        #: :data:`PIN_WAIT_S` on a thread, never waited out (see there).
        self.careful_pins: Callable[[], bool] = lambda: False
        self._images: dict[Tgid, Image] = {}
        self._budget = budget or FdBudget()
        #: (tgid, tid) of the request being served.
        self._caller: tuple[Tgid, int] | None = None
        #: The caller's writes left for its lane (:meth:`deferring`), or None.
        self._deferred: list[CallerWrite] | None = None
        #: What the caller's lane read, (addr, size) -> bytes (:meth:`deferring`).
        self._fetched: dict[tuple[int, int], bytes] = {}
        #: The enable bits on their way into images, by workers.
        self.enable_writes = EnableWrites[Image](_write_bits, self._close)
        self._local = _Iovec()
        # A reusable one-page request covers every transfer that does not
        # cross a page boundary (enable bits, write_index), sparing ctypes
        # allocations on the hot path.
        self._remote1 = _Iovec()
        self._local_addr = ctypes.addressof(self._local)
        self._remote1_addr = ctypes.addressof(self._remote1)
        self._writes = 0
        self._writes_refused = 0
        self._copies_pinned = 0
        self._copies_refused = 0
        #: Copies pinned without knowing whether they share the origin's mm.
        self._vm_unknown = 0

    # -- the request being served ------------------------------------------------

    def serve(self, tgid: Tgid | None, tid: int = 0) -> None:
        """From now on ``tgid``'s memory is the caller's, reached through
        thread ``tid`` (None: no request is being served)."""
        self._caller = None if tgid is None else (tgid, tid)

    @contextlib.contextmanager
    def serving(self, tgid: Tgid, tid: int) -> Iterator[None]:
        """Within: ``tgid``'s memory is the caller's, reached through thread ``tid``."""
        outer, self._caller = self._caller, (tgid, tid)
        try:
            yield
        finally:
            self._caller = outer

    @contextlib.contextmanager
    def deferring(self, fetched: dict[tuple[int, int], bytes]) -> Iterator[list[CallerWrite]]:
        """Within, the caller's memory is what its lane read and will write:
        a read is answered from ``fetched`` (what :func:`read_in_lane` read
        there, by address and size) or raises :class:`Unfetched`; writes
        (its enable bits, its ``put_user`` writes) are reported done and only
        recorded, in order, for :func:`write_in_lane` to make after the
        engine call. The caller's own memory is then never touched on this
        thread: a page that never faults in holds up only its lane."""
        outer = self._deferred, self._fetched
        self._deferred, self._fetched = [], fetched
        try:
            yield self._deferred
        finally:
            self._deferred, self._fetched = outer

    def lane_writes(self, tgid: Tgid, writes: list[CallerWrite]) -> tuple[threading.Lock,
                                                                          Callable[[], None]]:
        """Before a caller's deferred writes go to its lane: the lock its
        lane holds while it makes them, and what to call on this thread once
        they are made (when the worker is done, not when a wait for it was
        abandoned).

        The kernel sets and clears enable bits atomically; two threads each
        reading and rewriting a byte would lose one of the two updates. So
        the workers that write this process's enable bits later
        (:meth:`write_bit`) hold the same lock.
        """
        lock = self.enable_writes.hold_lock(tgid)
        return lock, functools.partial(self.enable_writes.drop_lock, tgid)

    def stat(self, pid: int) -> StatFacts | None:
        """``/proc/<pid>/stat`` (:func:`read_stat`), for the trio thread.

        The read waits while the process execs (``do_task_stat`` takes
        ``exec_update_lock``), and an exec may wait for us: it closes its
        close-on-exec files holding that lock, and closing a perf file of
        ours is a FUSE_FLUSH this thread answers (:attr:`careful_pins`).
        Then the read runs on a thread of its own, waited
        :data:`PIN_WAIT_S`; a process that holds it up longer is exec'ing:
        None, as for one that is gone (its exec, once seen, tells the rest).
        """
        if not self.careful_pins():
            return read_stat(pid, self._proc)
        try:
            return _within(PIN_WAIT_S, functools.partial(read_stat, pid, self._proc),
                           what=f"reading {pid}'s stat")
        except Execing:
            return None

    # -- images --------------------------------------------------------------------

    def image(self, tgid: Tgid) -> Image | None:
        return self._images.get(tgid)

    def images(self) -> list[Image]:
        return list(self._images.values())

    def pin_caller(self, tgid: Tgid, tid: int, owner: int = 0) -> Image:
        """Pin the image of the process whose thread ``tid`` is waiting for our reply.

        Call only while that request is in flight: then the number names the
        caller and its memory cannot change (module docstring). Replaces a
        pin of ``tgid`` that is no longer alive; the caller of this method
        must have dropped what it knew about that one.

        Raises:
            ProcessLookupError: (ESRCH) the thread is gone (its request was
                abandoned).
            PermissionError: (EPERM/EACCES) no ptrace access to it.
            BudgetExhausted: (ENOMEM) ``owner`` keeps its share of descriptors.
        """
        old = self._images.get(tgid)
        if old is not None:
            if old.alive():
                return old
            self.unpin(tgid)
        proc_dir = f"{self._proc}/{tid}"

        def identify(memfd: int) -> Identity | None:
            stat = read_stat(tid, self._proc)
            if stat is None:
                raise ProcessLookupError(errno.ESRCH, f"thread {tid} is gone")
            return _read_identity(tid, proc_dir, memfd, stat.layout)

        return self._pin(tgid, f"{proc_dir}/mem", identify, owner)

    def pin_copy(self, tgid: Tgid, origin: Image) -> Image:
        """Pin ``tgid`` as a fork copy of ``origin``, if it is one.

        The copy must not share ``origin``'s mm (vfork, posix_spawn,
        clone(CLONE_VM): the kernel shares the enabler list then, and writes
        into the origin reach it already).

        Raises:
            ProcessLookupError: (ESRCH) not a fork copy of ``origin`` (it
                exec'd, or shares the mm, or is another program), or gone.
            PermissionError: (EPERM/EACCES) no ptrace access to it.
            BudgetExhausted: (ENOMEM) the origin's owner keeps its share
                (the kernel's ``user_event_mm_dup`` failing: the child goes
                without enablers).
        """
        if origin.identity is None:
            raise ProcessLookupError(errno.ESRCH, f"{origin.tgid} cannot vouch for copies")
        if tgid in self._images:
            raise ProcessLookupError(errno.ESRCH, f"{tgid} is pinned already")

        def verify(memfd: int) -> Identity | None:
            # Order matters: the fd pinned an mm; the stat read after it
            # describes whatever runs now, so an exec in between makes the two
            # disagree; the token is read through the pinned mm.
            reason = self._not_a_copy(tgid, memfd, origin)
            if reason is not None:
                self._copies_refused += 1
                error = SharesMm if reason == _SHARES_MM else ProcessLookupError
                raise error(errno.ESRCH, f"{tgid} is no copy of {origin.tgid}: {reason}")
            return origin.identity

        image = self._pin(tgid, f"{self._proc}/{tgid}/mem", verify, origin.owner,
                          careful=self.careful_pins())
        self._copies_pinned += 1
        return image

    def _pin(self, tgid: Tgid, mem: str, identify: Callable[[int], Identity | None],
             owner: int, careful: bool = False) -> Image:
        self._budget.take(owner, IMAGE_FDS)
        try:
            if careful:
                image = _within(PIN_WAIT_S, functools.partial(_open_image, tgid, mem, identify,
                                                              owner),
                                late=Image.close, what=f"pinning {tgid}")
            else:
                image = _open_image(tgid, mem, identify, owner)
        except BaseException:
            self._budget.give(owner, IMAGE_FDS)
            raise
        self._images[tgid] = image
        return image

    def _not_a_copy(self, tgid: Tgid, memfd: int, origin: Image) -> str | None:
        identity = origin.identity
        assert identity is not None
        stat = read_stat(tgid, self._proc)
        if stat is None:
            return "gone"
        if not stat.flags & PF_FORKNOEXEC:
            return "exec'd"
        if stat.layout != identity.layout:
            return "another memory layout"
        if _pread(tgid, memfd, AT_RANDOM_SIZE, identity.token_addr) != identity.token:
            return "other AT_RANDOM bytes"
        if not origin.pidfd.group_exited():
            shares = _shares_mm(tgid, origin.tgid)
            if shares:
                return _SHARES_MM
            if shares is None:
                # A copy by every other sign. Were it a CLONE_VM child after all,
                # its pinned mm is the origin's own: writes land there, never in
                # the image it may exec, and its copies of the enablers live on
                # until it exits (the kernel shares the origin's list instead).
                self._vm_unknown += 1
                if self._vm_unknown == 1:
                    logger.info("kcmp(2) is refused here (a seccomp filter?): a child that "
                                "shares its parent's mm (vfork, posix_spawn) is taken for "
                                "a fork copy")
        return None

    def unpin(self, tgid: Tgid) -> None:
        """Forget ``tgid``'s image (after its exit or exec); no-op if unknown.
        Bits not yet written into it never will be (its enablers are gone)."""
        image = self._images.pop(tgid, None)
        if image is None:
            return
        if self.enable_writes.forget(image):
            self._close(image)

    def _close(self, image: Image) -> None:
        image.close()
        self._budget.give(image.owner, IMAGE_FDS)

    def close(self) -> None:
        for tgid in list(self._images):
            self.unpin(tgid)

    def statistics(self) -> MemoryStatistics:
        return MemoryStatistics(images=len(self._images),
                                writes=self._writes + self.enable_writes.writes,
                                writes_refused=self._writes_refused + self.enable_writes.refused,
                                copies_pinned=self._copies_pinned,
                                copies_refused=self._copies_refused,
                                vm_unknown=self._vm_unknown)

    # -- ProcessMemory ------------------------------------------------------------

    def read(self, tgid: Tgid, addr: int, size: int) -> bytes:
        """Return the bytes at ``addr`` in ``tgid``, stopping at the first fault.

        The caller's memory while served (:meth:`serve`), else a pinned image's;
        b"" for anything else.

        Raises:
            OSError: an unexpected errno (ENOMEM, EINVAL): a bug or an
                exhausted kernel, not a property of the target memory.
        """
        if size <= 0 or not 0 <= addr <= _ADDR_LIMIT - size:
            return b""
        tid = self._caller_tid(tgid)
        if tid is not None and self._deferred is not None:
            data = self._fetched.get((addr, size))
            if data is None:
                raise Unfetched(addr, size)
            return data
        if tid is not None:
            buf = ctypes.create_string_buffer(size)
            done = self._transfer(_process_vm_readv, tid, ctypes.addressof(buf), addr, size)
            return buf.raw[:done]
        image = self._images.get(tgid)
        if image is None:
            return b""
        out = b""
        while len(out) < size:  # mem_rw stops early only at a fault
            got = _pread(tgid, image.memfd, size - len(out), addr + len(out))
            if not got:
                break
            out += got
        return out

    def image_copy(self, tgid: Tgid, owner: int) -> int | None:
        """A duplicate of ``tgid``'s pinned ``mem`` descriptor, held against
        ``owner``'s budget until :meth:`drop_copy`, for a read on another
        thread (:func:`read_through`): the image may be unpinned meanwhile,
        and its own number then name another file. None when it is not
        pinned or the budget is spent."""
        image = self._images.get(tgid)
        if image is None:
            return None
        try:
            self._budget.take(owner, 1)
        except BudgetExhausted:
            return None
        return os.dup(image.memfd)

    def drop_copy(self, fd: int, owner: int) -> None:
        """Close an :meth:`image_copy`, once its read is done."""
        os.close(fd)
        self._budget.give(owner, 1)

    def write(self, tgid: Tgid, addr: int, data: bytes) -> int:
        """Write ``data`` at ``addr`` in ``tgid``; bytes written before a fault.

        The caller's memory while served (:meth:`serve`) (read-only mappings refuse,
        as the kernel's non-forced pin does), else a pinned image's (0 once
        that image is gone); 0 for anything else.

        Raises:
            OSError: an unexpected errno (ENOMEM, EINVAL).
        """
        if not data or not 0 <= addr <= _ADDR_LIMIT - len(data):
            return 0
        tid = self._caller_tid(tgid)
        if tid is not None and self._deferred is not None:
            self._deferred.append(PutUser(addr, data))
            return len(data)
        if tid is not None:
            self._writes += 1
            buf = ctypes.create_string_buffer(data, len(data))
            return self._transfer(_process_vm_writev, tid, ctypes.addressof(buf), addr, len(data))
        image = self._images.get(tgid)
        if image is None or addr + len(data) > _LOFF_LIMIT:
            self._writes_refused += 1
            return 0
        self._writes += 1
        done = _pwrite(tgid, image.memfd, data, addr)
        if done == 0:
            self._writes_refused += 1
        return done

    def write_bit(self, tgid: Tgid, addr: int, bit: int, value: bool) -> bool:
        """:class:`~tracefs_fuse.engine._memory.EnableBits`: while the caller
        is :meth:`deferring`, its own bit is recorded for its lane; any other
        is queued for a worker to write through the pinned image
        (``_enable_writes.py``: never on this thread), True; False for an
        untracked process (never written)."""
        if self._deferred is not None and self._caller_tid(tgid) is not None:
            self._deferred.append(BitWrite(addr, bit, value))
            return True
        image = self._images.get(tgid)
        if image is None:
            self._writes_refused += 1
            return False
        self.enable_writes.write(image, addr, bit, value)
        return True

    # -- internals ------------------------------------------------------------------

    def _caller_tid(self, tgid: Tgid) -> int | None:
        caller = self._caller
        return caller[1] if caller is not None and caller[0] == tgid else None

    def _transfer(self, syscall: _VmSyscall, pid: int, local: int, addr: int, size: int) -> int:
        if addr // PAGE_SIZE == (addr + size - 1) // PAGE_SIZE:
            self._local.iov_base = local
            self._local.iov_len = size
            self._remote1.iov_base = addr
            self._remote1.iov_len = size
            return self._call(syscall, pid, self._local_addr, self._remote1_addr, 1,
                              addr, size)
        done = 0
        while done < size:
            pages: list[_Iovec] = []
            at = addr + done
            end = addr + size
            while at < end and len(pages) < _IOV_MAX:
                stop = min(end, (at // PAGE_SIZE + 1) * PAGE_SIZE)
                pages.append(_Iovec(at, stop - at))
                at = stop
            remote = (_Iovec * len(pages))(*pages)
            want = at - (addr + done)
            self._local.iov_base = local + done
            self._local.iov_len = want
            got = self._call(syscall, pid, self._local_addr, ctypes.addressof(remote), len(pages),
                             addr + done, want)
            done += got
            if got < want:
                break
        return done

    @staticmethod
    def _call(syscall: _VmSyscall, pid: int, local: int, remote: int, count: int,
              addr: int, size: int) -> int:
        """One ``process_vm_*`` of ``size`` bytes at ``addr`` in ``pid``."""
        access_begin(pid, addr, size)
        try:
            got: int = syscall(pid, local, 1, remote, count, 0)
        finally:
            _end(pid, addr)
        if got >= 0:
            return got
        err = ctypes.get_errno()
        if err in _SHORT_ERRNOS:
            if err == errno.EPERM:
                logger.warning("no ptrace access to pid %d: reported as a fault", pid)
            return 0
        raise OSError(err, os.strerror(err))


def _write_bits(image: Image, bits: list[tuple[tuple[int, int], bool]]) -> tuple[int, int]:
    """Set or clear enable bits through a pinned image, each a read-modify-write
    of its byte (on a worker; nothing here touches a :class:`ClientMemory`):
    how many were written, how many faulted."""
    written = 0
    for (addr, bit), value in bits:
        byte = addr + bit // 8
        old = _pread(image.tgid, image.memfd, 1, byte)
        if len(old) == 1:
            mask = 1 << (bit % 8)
            new = old[0] | mask if value else old[0] & ~mask
            written += _pwrite(image.tgid, image.memfd, bytes((new,)), byte)
    return written, len(bits) - written


def write_in_lane(tid: int, writes: list[CallerWrite]) -> BitWrite | None:
    """Make a caller's deferred writes, in order, through its thread ``tid``
    (waiting for its request's reply), on a worker thread of its lane.

    Returns the first enable bit that could not be written (nothing after it
    is written: the kernel returns before its ``put_user``), or None. A failed
    ``put_user`` is ignored, as by the kernel.

    A page that never faults in (a userfaultfd nobody resolves) holds this
    worker and this caller, nobody else; a file of another FUSE filesystem
    that never answers is aborted by the watchdog after 1 s, as for the trio
    thread; a fault on a page of our own files is answered EIO by the
    receiver at once (the fill is the daemon's own).
    """
    for write in writes:
        if isinstance(write, PutUser):
            _lane_transfer(_process_vm_writev, tid, write.data, write.addr)
            continue
        byte = write.addr + write.bit // 8
        old = ctypes.create_string_buffer(1)
        if _lane_transfer(_process_vm_readv, tid, old, byte) != 1:
            return write
        mask = 1 << (write.bit % 8)
        new = old.raw[0] | mask if write.value else old.raw[0] & ~mask
        if _lane_transfer(_process_vm_writev, tid, bytes((new,)), byte) != 1:
            return write
    return None


def read_through(pid: int, fd: int, addr: int, size: int) -> bytes:
    """Read ``size`` bytes at ``addr`` within one page through a pinned
    image's ``mem`` descriptor (:meth:`ClientMemory.image_copy`) of process
    ``pid``, on a worker thread, bracketed for the watchdog; short at a fault."""
    return _pread(pid, fd, size, addr)


def read_in_lane(tid: int, addr: int, size: int) -> bytes:
    """Read a caller's memory through its thread ``tid`` (waiting for its
    request's reply), on a worker thread of its lane: the bytes at ``addr``,
    stopping at the first fault (:func:`write_in_lane` says who waits)."""
    buf = ctypes.create_string_buffer(size)
    done = _lane_transfer(_process_vm_readv, tid, buf, addr)
    return buf.raw[:done]


def _lane_transfer(syscall: _VmSyscall, tid: int, data: bytes | ctypes.Array[ctypes.c_char],
                   addr: int) -> int:
    """One ``process_vm_*`` of up to a page or so (one iovec per page, on
    iovecs of its own: any thread may call it), bracketed for the watchdog;
    bytes moved before a fault."""
    buf = data if isinstance(data, ctypes.Array) else ctypes.create_string_buffer(data, len(data))
    size = len(data)
    if size <= 0 or not 0 <= addr <= _ADDR_LIMIT - size:
        return 0
    pages = []
    at = addr
    while at < addr + size:
        stop = min(addr + size, (at // PAGE_SIZE + 1) * PAGE_SIZE)
        pages.append(_Iovec(at, stop - at))
        at = stop
    assert len(pages) <= _IOV_MAX, f"{size} bytes: too many for one call"
    local = _Iovec(ctypes.addressof(buf), size)
    remote = (_Iovec * len(pages))(*pages)
    access_begin(tid, addr, size)
    try:
        got: int = syscall(tid, ctypes.addressof(local), 1, ctypes.addressof(remote),
                           len(pages), 0)
    finally:
        _end(tid, addr)
    if got >= 0:
        return got
    err = ctypes.get_errno()
    if err in _SHORT_ERRNOS:
        return 0
    raise OSError(err, os.strerror(err))
