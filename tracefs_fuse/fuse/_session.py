"""Load the native bridge before pyfuse3, and serve one bridged pyfuse3 mount.

pyfuse3 3.5.0 lacks ioctl, FUSE_INTERRUPT, per-read flags and lock_owner, the
caller pid on read/write, FOPEN_PARALLEL_DIRECT_WRITES and (on libfuse 3.14)
FUSE_DIRECT_IO_ALLOW_MMAP.  :mod:`tracefs_fuse.fuse._bridge` adds them by
interposing libfuse's ``fuse_session_new``/``fuse_session_mount``/
``fuse_session_destroy``; see its docstring for the handler contract.

Rules:

* This is the only module that imports ``pyfuse3`` or ``_bridge``.  Everything
  else takes pyfuse3 from here (``from tracefs_fuse.fuse._session import
  pyfuse3``): if pyfuse3 is imported first, its references bind to libfuse for
  good and the bridge is inert.  :func:`serve` detects that and refuses to run.
* The bridge is dlopened with ``RTLD_GLOBAL``, then the previous dlopen flags
  are restored before pyfuse3 is imported (only the bridge must be global).
* :func:`serve` never returns or raises with the filesystem still mounted.
* Handler callbacks run synchronously in the trio thread; they must not block
  or await.  FUSE_READ/WRITE/IOCTL never reach ``Operations.read``/``write``.

Caveats:

* One bridged session per process (libfuse session hooks are process-global).
* The live check briefly opens the mount root (OPENDIR/RELEASEDIR) and issues
  one ioctl on it before :func:`serve` reports ``started``; that ioctl is
  answered here and never reaches the handler.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import logging
import os
import sys
from collections.abc import Iterable
from typing import Protocol

import msgspec
import trio

_PYFUSE3_IMPORTED_FIRST = "pyfuse3" in sys.modules

_dlopen_flags = sys.getdlopenflags()
sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)
try:
    from . import _bridge
finally:
    sys.setdlopenflags(_dlopen_flags)

import pyfuse3  # noqa: E402  (must come after the bridge; see Rules)

__all__ = [
    "DEFAULT_MAX_TASKS",
    "FOPEN_NOFLUSH",
    "FOPEN_PARALLEL_DIRECT_WRITES",
    "FOPEN_STREAM",
    "FUSE_IOCTL_DIR",
    "BridgeHandler",
    "BridgeInactiveError",
    "BridgeStatus",
    "Request",
    "bridge_status",
    "native",
    "perfmon_capable",
    "pyfuse3",
    "request_limits",
    "serve",
    "set_open_flags",
    "terminate",
]

log = logging.getLogger(__name__)

Request = _bridge.Request
#: The native fast path's table and staging ring (used by fuse/_fast_path.py).
native = _bridge
#: Around every access to client memory (see fuse/_native/receiver.c).
access_begin = _bridge.access_begin
access_end = _bridge.access_end
#: Our mount's device (``major, minor``): never aborted by the watchdog.
set_own_device = _bridge.set_own_device
#: ``perfmon_capable()`` of a thread (capget: one system call).
perfmon_capable = _bridge.perfmon_capable
#: ``request_limits() -> (max_write, max_pages)``: a request's largest size
#: and page count, as FUSE_INIT settled them (the kernel splits larger writes).
request_limits = _bridge.request_limits
set_open_flags = _bridge.set_open_flags
FOPEN_STREAM: int = _bridge.FOPEN_STREAM
FOPEN_NOFLUSH: int = _bridge.FOPEN_NOFLUSH
FOPEN_PARALLEL_DIRECT_WRITES: int = _bridge.FOPEN_PARALLEL_DIRECT_WRITES
FUSE_IOCTL_DIR: int = _bridge.FUSE_IOCTL_DIR

# pyfuse3 worker tasks.  Bridged reads/writes/ioctls never hold one (they
# return at once and reply from the daemon's own tasks), so these serve only
# pyfuse3's handlers (lookup, open, poll, ...), which are quick; 64 leaves
# ample headroom for a burst of opens while other requests keep flowing.
DEFAULT_MAX_TASKS = 64

# _IO('~', 0x7f): an ioctl nobody else uses, sent to the mount root only by
# the live check; answered with PROBE_RESULT without reaching the handler.
PROBE_IOCTL_CMD = (ord("~") << 8) | 0x7F
PROBE_RESULT = 0x7472  # "tr"
PROBE_TIMEOUT_S = 10.0


class BridgeHandler(Protocol):
    """What :func:`serve` routes FUSE_IOCTL/READ/WRITE and interrupts to.

    Every method is called synchronously from libfuse, in the trio thread
    with the GIL held, while pyfuse3 processes the request: it must not block
    or await.  Reply on the spot, or keep ``req`` and reply later from a task
    (``nursery.start_soon``); no pyfuse3 worker waits meanwhile.  Each
    request takes exactly one reply (``reply_err`` always fits; a second
    reply raises ``RuntimeError``).  An exception escaping a method, or a
    ``req`` dropped unanswered, is logged and answered EIO.

    * ``ioctl``: restricted, so ``in_data`` holds the ``_IOC_SIZE(cmd)``
      bytes the kernel copied in (8 for a pointer-typed cmd); the rest lives
      at ``arg`` in thread ``req.pid``.  ``reply_ioctl(result)`` with no data
      copies nothing back, so process_vm_writev results survive; data (at
      most ``out_size`` bytes) is copied over ``arg``.  ``flags`` has
      FUSE_IOCTL_DIR for directories.  Unknown cmds: ``reply_err(ENOTTY)``.
    * ``read``: ``flags`` is the file's f_flags now (O_NONBLOCK set by fcntl
      after open included); ``lock_owner`` is 0 for page-cache fills (mmap
      faults, readahead, splice) and non-zero for read(2).
      ``reply_data(b)``, ``len(b) <= size``.
    * ``write``: ``reply_write(len(data))`` (or fewer bytes).
    * ``interrupted``: a FUSE_INTERRUPT for a request that called
      ``req.watch_interrupts()``; libfuse holds the request's lock, so do
      not reply here (it raises): cancel the waiter and let it reply EINTR.
      ``watch_interrupts()`` returns True instead when the interrupt came
      first.  Without it a signalled reader stays in D state (even on
      SIGKILL) until the reply.
    """

    def ioctl(self, req: Request, ino: int, fh: int, cmd: int, arg: int,
              in_data: bytes, out_size: int, flags: int) -> None: ...

    def read(self, req: Request, ino: int, fh: int, offset: int, size: int,
             flags: int, lock_owner: int) -> None: ...

    def write(self, req: Request, ino: int, fh: int, offset: int, data: bytes,
              flags: int) -> None: ...

    def interrupted(self, req: Request) -> None: ...


class BridgeStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Snapshot of ``_bridge.status()``: hooks, INIT negotiation, counters."""

    installed: bool
    session_hooked: bool
    custom_io: bool
    custom_io_error: int
    #: The receiver thread reads /dev/fuse (until the connection ends).
    receiver: bool
    init_seen: bool
    kernel_major: int
    kernel_minor: int
    kernel_flags: int
    kernel_flags2: int
    allow_mmap_offered: bool
    allow_mmap_granted: bool
    reply_minor: int
    reply_flags: int
    reply_flags2: int
    requests: int
    interrupts_received: int
    open_fixups: int
    ioctls: int
    reads: int
    writes: int
    interrupts: int
    orphaned: int
    handler_errors: int
    dropped_replies: int
    stale_replies: int
    #: Requests the receiver read, queued for pyfuse3, and the most queued.
    received: int
    queued: int
    queue_peak: int
    #: Requests the receiver answered itself (the native fast path).
    served_natively: int
    #: Page-cache fills caused by the daemon's own threads, answered EIO.
    own_fills_refused: int
    #: Page-cache fills answered EIO because an access to client memory
    #: waited on them (their page) too long.
    stuck_fills_refused: int
    #: Other FUSE connections aborted because an access waited on them.
    foreign_aborted: int
    #: What FUSE_INIT settled: bytes and pages per request.
    max_write: int
    max_pages: int
    #: Writes the fast path answered, records it staged, intakes by the
    #: engine, and writes it left to the engine, by reason.
    fast_served: int
    fast_staged: int
    fast_drains: int
    #: Writer CPU/comm re-read natively (every TASK_TTL_NS per thread).
    fast_task_refreshes: int
    #: The storer thread (fuse/_pagepush.py): batches, notify_stores made and
    #: failed (inode or mount gone), replies it sent after them, most queued.
    store_batches: int
    stores: int
    store_errors: int
    stored_replies: int
    store_queue_peak: int
    fast_declined: dict[str, int]


class BridgeInactiveError(RuntimeError):
    """The mount works but the bridge is not in the request path."""


def bridge_status() -> BridgeStatus:
    return BridgeStatus(**_bridge.status())


#: pyfuse3's session is open (from init to close). A connection aborted
#: through /sys/fs/fuse/connections ends :func:`serve` under us; pyfuse3's
#: terminate() after that would touch the freed session (a segfault).
_session_open = False


def serving() -> bool:
    """Whether :func:`serve` still serves: the mount was not ended under us.
    The receiver thread learns of an abort first (its read of /dev/fuse
    fails at once); pyfuse3's loop ends some time later."""
    return _session_open and bool(_bridge.status()["receiver"])


def terminate() -> None:
    """Make :func:`serve` unmount and return, if it still serves; call from
    the trio thread."""
    if _session_open:
        pyfuse3.terminate()


class _ProbeAnswering:
    """The daemon's handler, plus an answer to the live check's probe."""

    def __init__(self, handler: BridgeHandler) -> None:
        self._ioctl = handler.ioctl
        self.read = handler.read
        self.write = handler.write
        self.interrupted = handler.interrupted

    def ioctl(self, req: Request, ino: int, fh: int, cmd: int, arg: int,
              in_data: bytes, out_size: int, flags: int) -> None:
        if (cmd == PROBE_IOCTL_CMD and ino == pyfuse3.ROOT_INODE
                and flags & FUSE_IOCTL_DIR):
            req.reply_ioctl(PROBE_RESULT)
        else:
            self._ioctl(req, ino, fh, cmd, arg, in_data, out_size, flags)


def _check_hooks(status: BridgeStatus) -> None:
    """After pyfuse3.init(): were fuse_session_new/mount ours?"""
    if not status.session_hooked:
        if _PYFUSE3_IMPORTED_FIRST:
            raise BridgeInactiveError(
                "pyfuse3 was imported before tracefs-fuse loaded its FUSE "
                "bridge, so pyfuse3 calls libfuse's fuse_session_new directly; "
                "import tracefs_fuse.serve (from tracefs_fuse import serve) "
                "before anything imports pyfuse3")
        raise BridgeInactiveError(
            "pyfuse3.init() did not create its session through the bridge's "
            "fuse_session_new (pyfuse3 linked against another libfuse?)")
    if not status.custom_io:
        raise BridgeInactiveError(
            "fuse_session_custom_io failed "
            f"({os.strerror(status.custom_io_error)}): FUSE_INIT and OPEN "
            "replies cannot be patched")


def _probe_root(mountpoint: str) -> int:
    """ioctl(PROBE) on the mount root: the result, or -errno."""
    try:
        fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return -(exc.errno or errno.EIO)
    try:
        return fcntl.ioctl(fd, PROBE_IOCTL_CMD)
    except OSError as exc:
        return -(exc.errno or errno.EIO)
    finally:
        os.close(fd)


async def _check_round_trip(mountpoint: str) -> BridgeStatus:
    """With the session loop running: does the bridge see real requests?"""
    ioctls_before = bridge_status().ioctls
    with trio.move_on_after(PROBE_TIMEOUT_S) as timeout:
        result = await trio.to_thread.run_sync(
            _probe_root, mountpoint, abandon_on_cancel=True)
    if timeout.cancelled_caught:
        raise BridgeInactiveError(
            f"probe ioctl on {mountpoint} got no answer in {PROBE_TIMEOUT_S} s")
    status = bridge_status()
    if not status.init_seen:
        raise BridgeInactiveError(
            "FUSE_INIT did not pass through the bridge's custom io")
    if status.allow_mmap_offered and not status.allow_mmap_granted:
        raise BridgeInactiveError(
            "the kernel offered FUSE_DIRECT_IO_ALLOW_MMAP but the INIT reply "
            "did not grant it: MAP_SHARED on direct_io files would fail")
    if result != PROBE_RESULT or status.ioctls == ioctls_before:
        raise BridgeInactiveError(
            f"probe ioctl on {mountpoint} returned {result} (want "
            f"{PROBE_RESULT}); the bridge saw "
            f"{status.ioctls - ioctls_before} ioctls")
    return status


async def serve(operations: pyfuse3.Operations, handler: BridgeHandler,
                mountpoint: str, options: Iterable[str], *,
                max_tasks: int = DEFAULT_MAX_TASKS, device: int | None = None,
                task_status: trio.TaskStatus[BridgeStatus] = trio.TASK_STATUS_IGNORED,
                ) -> None:
    """Mount with the bridge, verify it end to end, serve until unmounted.

    Use as ``status = await nursery.start(serve, ops, handler, mnt, opts)``:
    ``started`` fires once a real ioctl has round-tripped through the bridge,
    with the :class:`BridgeStatus` at that point.  Returns when the
    filesystem is unmounted (``fusermount3 -u``) or :func:`terminate` is
    called; the mount is always gone by then (its connection, for a
    ``device`` mounted before).

    Args:
        operations: pyfuse3 handlers for everything but read/write/ioctl.
        handler: receives bridged requests (see :class:`BridgeHandler`).
        mountpoint: an existing directory.
        options: pyfuse3/libfuse mount options.
        max_tasks: pyfuse3 worker tasks.
        device: the ``/dev/fuse`` descriptor of a mount made already at
            ``mountpoint`` (``host/_fuse_mount.py``; ``options`` are then
            libfuse's own only), ours from here on. Its connection ends
            with :func:`serve`, but libfuse unmounts only what it mounted:
            the dead mount stays until its namespace ends (``run``'s: a
            detached mount would show a command what lies beneath).

    Raises:
        BridgeInactiveError: the bridge is not in the request path (pyfuse3
            imported first, custom io missing, ALLOW_MMAP not granted, probe
            ioctl not seen); the filesystem was unmounted.
    """
    global _session_open
    _bridge.install(_ProbeAnswering(handler))
    pyfuse3.init(operations, mountpoint if device is None else f"/dev/fd/{device}",
                 set(options))
    _session_open = True
    failure: BridgeInactiveError | None = None
    try:
        _check_hooks(bridge_status())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(
                pyfuse3.main, min_tasks=1, max_tasks=max_tasks))
            try:
                status = await _check_round_trip(mountpoint)
            except BridgeInactiveError as exc:
                failure = exc
                pyfuse3.terminate()
            else:
                _bridge.install(handler)
                log.debug("bridge active: kernel %d.%d flags=%#x flags2=%#x, "
                          "reply flags=%#x flags2=%#x", status.kernel_major,
                          status.kernel_minor, status.kernel_flags,
                          status.kernel_flags2, status.reply_flags,
                          status.reply_flags2)
                task_status.started(status)
    finally:
        _session_open = False
        pyfuse3.close(unmount=True)  # closes the device too: the connection ends
    if failure is not None:
        raise failure
