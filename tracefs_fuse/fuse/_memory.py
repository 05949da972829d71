"""Other processes' memory, reached the way user_events reaches it: by address.

The kernel writes enable bits with ``pin_user_pages_remote(FOLL_WRITE)`` into
the ``mm`` of every registered process (kernel/trace/trace_events_user.c,
``user_event_enabler_write``). From user space the closest equivalent is
``process_vm_readv``/``process_vm_writev`` (mm/process_vm_access.c): they go
through the same GUP path without ``FOLL_FORCE``, so a read-only mapping
refuses the write exactly as the kernel's pin does. ``/proc/<pid>/mem`` is not
an option for writing: it forces writes through read-only mappings.

Rules:
  * Transfers are split at page boundaries, one remote iovec per page, because
    the syscalls only report progress per iovec: the byte count returned then
    says exactly where the first fault is, like a partial ``copy_from_user``.
  * A pid is a number that the kernel hands out again once its process has been
    reaped. Nothing is ever *written* into a thread group that is not tracked
    (:meth:`VmProcessMemory.track`). Tracking pins two identities:
      - a pidfd, which names the ``struct pid`` rather than the number and polls
        readable once the whole thread group has exited;
      - an open ``/proc/<tgid>/mem``, which pins the ``mm`` the process had
        when it was tracked: once the process execs or exits, reading it
        returns end-of-file, because that ``mm`` has no users left.
    Every write checks both before the syscall, and the pidfd again after it.
  * Reads are not checked: reading a stranger's memory cannot hurt anyone, and
    the engine never writes what it read unless a checked write follows.
  * ``process_vm_*`` look up the pid they are given and use *that task's*
    ``mm``. A thread-group leader that has exited before its other threads is a
    zombie without an ``mm``, so the syscalls fail with ESRCH although the
    process lives on; the transfer is then retried through a live thread.

Costs (2-CPU test VM, Python 3.11, best of 9 runs of 2*10^4 calls; quiet
machine, then in brackets with a load average of 7 from other test runs):
read 1 byte 3.5 us [7.0] (bare ctypes syscall 2.9 [5.2]); write 1 byte
6.1 us [11.7], of which pidfd poll 0.4 [0.5] twice and the mm check 1.2
[2.3]; so an enable-bit read-modify-write costs about 10 us [19.5].
``track`` of an already tracked group: 5 us under that load.

Remaining races (none can be closed from user space; the kernel holds the
``mm`` itself and has none of them):
  * **Exec/exit between check and write.** The checks run before the syscall
    resolves the pid (``find_get_task_by_vpid`` then ``mm_access``, inside
    ``process_vm_rw_core``). If the process execs in that window the write
    lands in the new image; if it exits, is reaped by its parent *and* the pid
    allocator wraps around (``/proc/sys/kernel/pid_max`` allocations) so that
    a new process gets the same number, all within that window, the write
    lands in the newcomer. The window is the Python between the checks and
    the syscall, about 2 us. The post-write pidfd check detects the exit case
    after the fact (counted and logged; it cannot be undone).
  * **Leader already exited.** The live thread used instead is picked from
    ``/proc/<tgid>/task`` just before the syscall; if it exits and its number
    is reused in that window, the same applies.
  * **Tracking a forked child.** ``track`` trusts that the number names the
    intended process at the moment it is called. In a FUSE request that holds:
    the calling thread sleeps uninterruptibly until the reply
    (fs/fuse/dev.c ``request_wait_answer``), so neither it nor its thread group
    can be reaped. For a child seen in a fork event it holds unless the child
    was reaped and its number reallocated before ``track`` ran.
  * **Forked child exec'ing while tracked.** ``track(parent=...)`` refuses a
    child whose ``PF_FORKNOEXEC`` is clear, and pins the mm it finds. The
    kernel swaps the mm (``exec_mmap``) slightly before it clears the flag
    (both in ``begin_new_exec``); a ``track`` landing exactly between them pins
    the new mm, which at that point maps little more than the new stack, so a
    write there faults rather than corrupts, except at an address inside that
    stack.

Caveats:
  * The read-modify-write of an enable bit is not atomic against the target
    (the kernel's ``set_bit`` is); see the engine's ``_write_bit``.
  * A process that shares its mm with another process (clone(CLONE_VM)
    without CLONE_THREAD) and registers enablers itself is tracked with that
    shared mm pinned; if it then execs while the other process lives on, only
    its exec event (the daemon untracking it) stops writes into its new image.
  * Not thread-safe: one instance serves one trio thread.
  * Needs ptrace access to the targets (``PTRACE_MODE_ATTACH``): root, or
    CAP_SYS_PTRACE, or same uid without Yama restrictions.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import select
from collections.abc import Callable
from typing import cast

import msgspec

from tracefs_fuse.engine._memory import Tgid

logger = logging.getLogger(__name__)

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
#: UIO_MAXIOV: the most iovecs one process_vm_* call accepts.
_IOV_MAX = 1024
#: kernel/fork.c: set at fork, cleared by begin_new_exec(); /proc/<pid>/stat field 9.
PF_FORKNOEXEC = 0x00000040
#: include/uapi/linux/kcmp.h: enum kcmp_type { KCMP_FILE, KCMP_VM, ... };
KCMP_VM = 1
#: __NR_kcmp: arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h.
_NR_KCMP = {"x86_64": 312, "aarch64": 272, "riscv64": 272}.get(platform.machine())


class _Iovec(ctypes.Structure):
    """``struct iovec { void *iov_base; size_t iov_len; };`` (include/uapi/linux/uio.h)."""

    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
#: process_vm_readv/writev(pid, local_iov, liovcnt, remote_iov, riovcnt, flags)
_VmSyscall = Callable[[int, int, int, int, int, int], int]


def _vm_syscall(name: str) -> _VmSyscall:
    # ssize_t process_vm_readv(pid_t pid, const struct iovec *local_iov, unsigned long liovcnt,
    #                          const struct iovec *remote_iov, unsigned long riovcnt,
    #                          unsigned long flags);   (and process_vm_writev alike)
    # The iovec pointers are passed as plain addresses: converting an int to
    # c_void_p is 0.4 us cheaper per call than byref() into POINTER(_Iovec).
    func = getattr(_libc, name)
    func.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong,
                     ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)
    func.restype = ctypes.c_ssize_t
    return cast(_VmSyscall, func)


_process_vm_readv = _vm_syscall("process_vm_readv")
_process_vm_writev = _vm_syscall("process_vm_writev")

# The errnos that mean "nothing (more) to transfer here" rather than a bug:
# EFAULT: the first remote page is not mapped / not writable;
# EPERM: no ptrace access (mm_access() said EACCES).
# (ESRCH, no such task or a task without mm, is told apart: see _transfer.)
_SHORT_ERRNOS = frozenset({errno.EFAULT, errno.EPERM})
#: Addresses are unsigned longs; /proc/<pid>/mem offsets are signed (loff_t).
_ADDR_LIMIT = 1 << 64
_LOFF_LIMIT = 1 << 63


class MemoryStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of a :class:`VmProcessMemory`."""

    tracked: int
    writes: int
    #: Writes refused before the syscall: untracked, exited or exec'd process.
    writes_refused: int
    #: Writes after which the pidfd showed the process had exited meanwhile.
    writes_raced_exit: int
    #: Transfers retried through a live thread because the leader had exited.
    leader_fallbacks: int


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


class _Tracked:
    """The two identities of one tracked thread group (see module docstring)."""

    __slots__ = ("pidfd", "memfd")

    def __init__(self, pidfd: _Pidfd, memfd: int) -> None:
        self.pidfd = pidfd
        self.memfd = memfd

    def close(self) -> None:
        self.pidfd.close()
        os.close(self.memfd)


def _mm_alive(memfd: int, addr: int) -> bool:
    # fs/proc/base.c mem_rw(): returns 0 when mmget_not_zero() fails, i.e. the
    # mm pinned at open time has no users left (exec'd or exited). Any address
    # will do; an unmapped one fails with EIO while the mm lives, a mapped one
    # (the address about to be written) spares raising that exception.
    try:
        return os.pread(memfd, 1, addr if addr < _LOFF_LIMIT else PAGE_SIZE) != b""
    except OSError as e:
        if e.errno == errno.EIO:
            return True
        raise


def _stat_flags(tgid: int) -> int:
    """Field 9 (``flags``) of ``/proc/<tgid>/stat``; the comm may hold ``)``."""
    with open(f"/proc/{tgid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2:].split(b" ")[6])


def _shares_mm(child: int, parent: int) -> bool:
    """``kcmp(KCMP_VM)``: whether two tasks use one mm (clone(CLONE_VM), vfork).

    A vanished task shares nothing (ESRCH).

    Raises:
        OSError: ENOSYS without CONFIG_KCMP or on an architecture missing
            from ``_NR_KCMP``.
    """
    if _NR_KCMP is None:
        raise OSError(errno.ENOSYS, f"kcmp syscall number unknown on {platform.machine()}")
    # kcmp returns 0 for "equal", 1 or 2 for an ordering of two different mms.
    result: int = _libc.syscall(_NR_KCMP, child, parent, KCMP_VM, 0, 0)
    if result >= 0:
        return result == 0
    err = ctypes.get_errno()
    if err == errno.ESRCH:
        return False
    raise OSError(err, os.strerror(err))


def _live_threads(tgid: int) -> list[int]:
    """Thread ids of ``tgid`` other than the leader's own."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{tgid}/task") if int(t) != tgid]
    except FileNotFoundError:
        return []


class VmProcessMemory:
    """:class:`~tracefs_fuse.engine._memory.ProcessMemory` over ``process_vm_*``.

    Reads work on any thread group; writes only on tracked ones.
    """

    def __init__(self) -> None:
        self._tracked: dict[Tgid, _Tracked] = {}
        self._local = _Iovec()
        # A reusable one-page request covers every transfer that does not
        # cross a page boundary (enable bits, write_index), sparing ctypes
        # allocations on the hot path.
        self._remote1 = _Iovec()
        self._local_addr = ctypes.addressof(self._local)
        self._remote1_addr = ctypes.addressof(self._remote1)
        self._writes = 0
        self._writes_refused = 0
        self._writes_raced_exit = 0
        self._leader_fallbacks = 0

    # -- identity ---------------------------------------------------------------

    def track(self, tgid: Tgid, *, parent: Tgid | None = None) -> bool:
        """Vouch for ``tgid`` from now on, until it exits or execs.

        Call it only where ``tgid`` is known to name the intended process: while
        serving a FUSE request from one of its threads, or on its fork event.
        Cheap when already tracked (two non-blocking checks).

        Args:
            tgid: the thread group id.
            parent: ``tgid`` is a child of ``parent`` just seen in a fork
                event, about to receive copies of its parent's enablers.
                Refused if it has already exec'd (the copies must never be
                written into the new program), and if it shares its parent's
                mm (vfork, posix_spawn, clone(CLONE_VM)): the kernel shares
                the enabler list then, the parent's writes already reach that
                memory, and once the child execs writes through its pid would
                land in the new program while the shared mm lives on in the
                parent, invisible to the exec check.

        Returns:
            True if this is a process image not tracked before under ``tgid``
            (new, or the previous holder of the number exited or exec'd):
            whatever the caller knew about ``tgid`` is stale and must be
            dropped. False if ``tgid`` was tracked and still is the same image.

        Raises:
            ProcessLookupError: (ESRCH) no such process, it exited meanwhile,
                or, with ``parent``, it has exec'd or shares the parent's mm.
            PermissionError: (EPERM/EACCES) no ptrace access to it.
            OSError: (ENOSYS) with ``parent``, on a kernel without kcmp(2).
        """
        old = self._tracked.get(tgid)
        if old is not None:
            if self._current(old):
                return False
            self.untrack(tgid)
        pidfd = _Pidfd(tgid)
        try:
            memfd = self._open_mem(tgid, pidfd)
            try:
                # kcmp before the flag: a CLONE_VM child that execs between
                # the two is caught by the flag.
                if parent is not None and _shares_mm(tgid, parent):
                    raise ProcessLookupError(errno.ESRCH, f"{tgid} shares the mm of {parent}")
                if parent is not None and not _stat_flags(tgid) & PF_FORKNOEXEC:
                    raise ProcessLookupError(errno.ESRCH, f"{tgid} has exec'd since its fork")
                # Everything above looked the number up again; it still named
                # the pidfd's process only if that process is still alive.
                if pidfd.group_exited():
                    raise ProcessLookupError(errno.ESRCH, f"{tgid} exited while being tracked")
            except BaseException:
                os.close(memfd)
                raise
        except BaseException:
            pidfd.close()
            raise
        self._tracked[tgid] = _Tracked(pidfd, memfd)
        return True

    def untrack(self, tgid: Tgid) -> None:
        """Stop vouching for ``tgid`` (after its exit or exec); no-op if unknown."""
        entry = self._tracked.pop(tgid, None)
        if entry is not None:
            entry.close()

    def is_current(self, tgid: Tgid) -> bool:
        """Whether ``tgid`` is tracked and still runs the image it was tracked in.

        The resynchronisation test after lost process events: False means the
        process exited or exec'd and the caller's state for it is stale.
        """
        entry = self._tracked.get(tgid)
        return entry is not None and self._current(entry)

    def pidfd(self, tgid: Tgid) -> int:
        """The pidfd of a tracked group (owned here; dup it to keep it).

        Raises:
            KeyError: ``tgid`` is not tracked.
        """
        return self._tracked[tgid].pidfd.fd

    def tracked(self) -> list[Tgid]:
        """Every tracked thread group."""
        return list(self._tracked)

    def close(self) -> None:
        """Untrack everything, closing all descriptors."""
        for entry in self._tracked.values():
            entry.close()
        self._tracked.clear()

    def statistics(self) -> MemoryStatistics:
        return MemoryStatistics(tracked=len(self._tracked), writes=self._writes,
                                writes_refused=self._writes_refused,
                                writes_raced_exit=self._writes_raced_exit,
                                leader_fallbacks=self._leader_fallbacks)

    # -- ProcessMemory ------------------------------------------------------------

    def read(self, tgid: Tgid, addr: int, size: int) -> bytes:
        """Return the bytes at ``addr`` in ``tgid``, stopping at the first fault.

        Raises:
            OSError: an unexpected errno (ENOMEM, EINVAL): a bug or an
                exhausted kernel, not a property of the target memory.
        """
        if size <= 0:
            return b""
        buf = ctypes.create_string_buffer(size)
        done = self._transfer(_process_vm_readv, tgid, ctypes.addressof(buf), addr, size)
        return buf.raw[:done]

    def write(self, tgid: Tgid, addr: int, data: bytes) -> int:
        """Write ``data`` at ``addr`` in a tracked ``tgid``; bytes written before a fault.

        Returns 0 without writing if ``tgid`` is not tracked, has exited or has
        exec'd since it was tracked. Read-only mappings stop the write (EFAULT),
        as the kernel's non-forced pin does.

        Raises:
            OSError: an unexpected errno (ENOMEM, EINVAL).
        """
        entry = self._tracked.get(tgid)
        if entry is None or not self._current(entry, addr):
            self._writes_refused += 1
            return 0
        if not data:
            return 0
        self._writes += 1
        buf = ctypes.create_string_buffer(data, len(data))
        done = self._transfer(_process_vm_writev, tgid, ctypes.addressof(buf), addr, len(data))
        if entry.pidfd.group_exited():
            # It exited inside the window; if it was also reaped and its pid
            # reused in that microsecond, these bytes went to the newcomer.
            self._writes_raced_exit += 1
            logger.debug("pid %d exited while %d bytes were written at %#x", tgid, done, addr)
        return done

    # -- internals ------------------------------------------------------------------

    def _current(self, entry: _Tracked, addr: int = PAGE_SIZE) -> bool:
        return not entry.pidfd.group_exited() and _mm_alive(entry.memfd, addr)

    def _open_mem(self, tgid: int, pidfd: _Pidfd) -> int:
        """Open ``mem`` of a task of ``tgid`` that has the group's mm."""
        try:
            memfd = os.open(f"/proc/{tgid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except ProcessLookupError:
            # A leader that exited before its threads has no mm to pin.
            if pidfd.group_exited():
                raise
        else:
            if _mm_alive(memfd, PAGE_SIZE) or pidfd.group_exited():
                return memfd
            os.close(memfd)
        for tid in _live_threads(tgid):
            try:
                memfd = os.open(f"/proc/{tgid}/task/{tid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if _mm_alive(memfd, PAGE_SIZE):
                return memfd
            os.close(memfd)
        raise ProcessLookupError(errno.ESRCH, f"no thread of {tgid} has an mm")

    def _transfer(self, syscall: _VmSyscall, tgid: int, local: int,
                  addr: int, size: int) -> int:
        if not 0 <= addr <= _ADDR_LIMIT - size:
            return 0  # not a user address range: faults at its first byte
        done = self._transfer_via(syscall, tgid, local, addr, size)
        if done >= 0:
            return done
        # ESRCH through the leader: retry through a live thread, if any.
        for tid in _live_threads(tgid):
            done = self._transfer_via(syscall, tid, local, addr, size)
            if done >= 0:
                self._leader_fallbacks += 1
                return done
        return 0

    def _transfer_via(self, syscall: _VmSyscall, pid: int, local: int,
                      addr: int, size: int) -> int:
        """Bytes transferred, or -1 if ``pid`` has no mm (ESRCH)."""
        if addr // PAGE_SIZE == (addr + size - 1) // PAGE_SIZE:
            self._local.iov_base = local
            self._local.iov_len = size
            self._remote1.iov_base = addr
            self._remote1.iov_len = size
            return self._call(syscall, pid, self._local_addr, self._remote1_addr, 1)
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
            got = self._call(syscall, pid, self._local_addr, ctypes.addressof(remote), len(pages))
            if got < 0:
                return got if done == 0 else done
            done += got
            if got < want:
                break
        return done

    @staticmethod
    def _call(syscall: _VmSyscall, pid: int, local: int, remote: int, count: int) -> int:
        got: int = syscall(pid, local, 1, remote, count, 0)
        if got >= 0:
            return got
        err = ctypes.get_errno()
        if err == errno.ESRCH:
            return -1
        if err in _SHORT_ERRNOS:
            if err == errno.EPERM:
                logger.warning("no ptrace access to pid %d: reported as a fault", pid)
            return 0
        raise OSError(err, os.strerror(err))
