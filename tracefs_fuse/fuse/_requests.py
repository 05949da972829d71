"""Reads, writes and ioctls, as the bridge delivers them.

Rules:
  * Handlers run synchronously in the trio thread (the bridge calls them from
    pyfuse3's dispatch); a request that cannot be answered now (a read on an
    empty pipe) is handed to a task of our own and answered later, so it never
    holds one of pyfuse3's workers.
  * A blocked read ends when data arrives, when the file is woken by
    ``ioctl(fd, 0)``, or when the kernel interrupts it (the client got a
    signal or died): then it answers EINTR at once and the client is free.
  * A page-cache fill (lock owner 0) of ``trace_pipe_raw`` from a process
    that does not map the file is a ``splice()``: one page of whole
    sub-buffers, never held, never short (:func:`_splice_fill`,
    docs/readers.md).
  * 32-bit callers (``FUSE_IOCTL_COMPAT``) get ENOTTY: user_events_data has no
    ``compat_ioctl``.
  * A user_events_data ioctl touches its caller's memory only in the
    caller's lane (a worker thread, ``process/_lanes.py``): the engine runs
    on what the lane read, again after each read it still needed, and the
    lane makes what the call wrote; only the caller waits for its memory,
    and a FUSE INTERRUPT ends that wait (EINTR).
  * ``GET_READER`` on a descriptor opened without ``O_NONBLOCK`` waits as a
    blocked read does, for ``buffer_percent`` (``tracing_buffers_ioctl``);
    ``ioctl(fd, 0)`` ends the wait and the reader is taken anyway.
  * After anything that may have produced data or changed state that clients
    map, :meth:`RequestHandler.changed` runs the daemon's publication hook; a
    reply that waits for page stores is sent by the storer thread after them.

Caveat: a read blocked when ``ioctl(fd, 0)`` wakes its file returns EAGAIN
instead of blocking again. The kernel's reader re-checks ``O_NONBLOCK`` (which
libtracefs sets right after the ioctl), but FUSE does not show us an
``fcntl()`` made while a read is in flight.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import threading
from typing import Any, Callable, ContextManager, Iterator, NamedTuple, TypeVar

import trio

from ..engine._buffer_files import RawPipeFile
from ..engine._errors import TracefsError, WouldBlock
from ..engine._memory import Tgid
from ..engine._task import Task
from ..engine._tree import FileKind, OpenFile
from ..engine._uapi import DIAG_IOCSREG
from ..engine._user_events_files import UserEventsDataFile
from ..process._enable_writes import EnableWrites
from ..process._lanes import Lanes
from ..process._memory import (
    BitWrite,
    CallerWrite,
    Unfetched,
    read_in_lane,
    write_in_lane,
)
from ..process._perf_tails import PerfTails
from ._errno import errno_of, request_name
from ._fast_path import NativeWrites
from ._inodes import Path
from ._mmap import MappingTracker
from ._operations import TracefsOperations
from ._pagepush import REPLY_ERR, REPLY_IOCTL, REPLY_WRITE, PagePusher, Store
from ._prefetch import fetch_registration
from ._session import Request, request_limits
from ._whole_write import NotLookedAt, whole_write

log = logging.getLogger(__name__)
T = TypeVar("T")
#: fuse_ioctl_in.flags: FUSE_IOCTL_COMPAT (a 32-bit caller on a 64-bit kernel).
FUSE_IOCTL_COMPAT = 1 << 0
_MAPPABLE = (FileKind.MAPPABLE_PIPE, FileKind.MAPPABLE_TEXT)
#: A page-cache fill of one page: the only size a splice() fill is served at.
_PAGE_SIZE = 4096
#: Writes to these resize buffers, which the kernel refuses while mapped.
_RESIZERS = ("buffer_size_kb", "buffer_subbuf_size_kb")


class RequestHandler:
    """The bridge's handler for one mount."""

    def __init__(self, ops: TracefsOperations, nursery: trio.Nursery, mappings: MappingTracker,
                 *, writer_task: Callable[[int], Task], control_task: Callable[[int], Task],
                 caller: Callable[[int, int, bool, dict[tuple[int, int], bytes]],
                                  ContextManager[tuple[Task, list[CallerWrite]]]],
                 changed: Callable[[], list[Store]], pages: PagePusher,
                 native: NativeWrites,
                 lane_writes: Callable[[Tgid, list[CallerWrite]],
                                       tuple[threading.Lock, Callable[[], None]]],
                 enable_writes: EnableWrites[Any], perf_tails: PerfTails) -> None:
        self.ops = ops
        self.nursery = nursery
        self.mappings = mappings
        #: Task facts for a data write (pid, tgid, cpu, comm): the hot path.
        self.writer_task = writer_task
        #: ... for control-file writes (adds capabilities).
        self.control_task = control_task
        #: ... around user_events_data ioctls: ``caller(tid, uid, registering,
        #: fetched)`` (the caller is followed; its memory is what its lane
        #: read, and what the engine writes there is recorded for its lane).
        self.caller = caller
        #: Where a caller's own writes wait (only it waits for them).
        self.lanes = Lanes()
        #: Before a caller's writes go to its lane: their lock, and what to
        #: call once made (``ClientMemory.lane_writes``).
        self.lane_writes = lane_writes
        #: The enable bits a request changed, written by workers before its
        #: reply (``process/_enable_writes.py``).
        self.enable_writes = enable_writes
        #: The perf rings' tails a request's records wait for, read by
        #: workers before its reply (``process/_perf_tails.py``).
        self.perf_tails = perf_tails
        #: Wakes readers and returns the page stores a request's reply waits for.
        self.changed = changed
        self.pages = pages
        #: The native fast path: its table is republished before each reply.
        self.native = native
        #: (writer's tid, fh) -> (offset, bytes) FUSE will send of a write
        #: already answered whole.
        self._rest: dict[tuple[int, int], tuple[int, int]] = {}
        self._waiters: set[_Waiter] = set()
        self._scopes: dict[int, trio.CancelScope] = {}  # unique -> blocked read
        self._interrupted_early: set[int] = set()

    # -- wakeups ---------------------------------------------------------------

    def data_arrived(self) -> None:
        """Let every blocked reader try again."""
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            waiter.event.set()

    def wake_file(self, fh: int) -> None:
        """``ioctl(fd, 0)``: wake the readers blocked on one open file."""
        for waiter in [w for w in self._waiters if w.fh == fh]:
            self._waiters.discard(waiter)
            waiter.by_ioctl = True
            waiter.event.set()

    # -- bridge callbacks ---------------------------------------------------------

    def read(self, req: Request, ino: int, fh: int, offset: int, size: int,
             flags: int, lock_owner: int) -> None:
        try:
            file = self.ops.files.get(fh)
            if lock_owner == 0 and file.kind in _MAPPABLE:
                # A page-cache fill: an mmap() fault, or a splice() (FUSE
                # splices through the page cache); never a read(), which is
                # direct I/O and carries the file's lock owner.
                if isinstance(file, RawPipeFile) and not self.mappings.maps(req.pid, ino):
                    data = _splice_fill(file, offset, size, flags)
                else:
                    data = self.mappings.fault(req.pid, self.ops.files.path(fh), offset, size)
            else:
                data = file.read(offset, size)
        except WouldBlock:
            if flags & os.O_NONBLOCK:
                req.reply_err(errno.EAGAIN)
                return
            if req.watch_interrupts():
                # Interrupted before we could watch: interrupted() won't come.
                req.reply_err(errno.EINTR)
                return
            self.native.publish(wake=True)  # staged records must reach us now
            self.nursery.start_soon(self._blocked_read, req, fh, file, offset, size)
            return
        except Exception as exc:
            req.reply_err(self._refused(exc, "read", req, fh))
            return
        req.reply_data(data)

    @contextlib.contextmanager
    def _waiting(self, req: Request, fh: int) -> Iterator[tuple[trio.CancelScope, _Waiter]]:
        """A cancel scope that the request's FUSE_INTERRUPT cancels, and a
        waiter that data or ``ioctl(fd, 0)`` on ``fh`` wakes."""
        with trio.CancelScope() as scope:
            self._scopes[req.unique] = scope
            if req.unique in self._interrupted_early:
                self._interrupted_early.discard(req.unique)
                scope.cancel()
            waiter = _Waiter(fh)
            try:
                yield scope, waiter
            finally:
                self._waiters.discard(waiter)
                del self._scopes[req.unique]

    async def _blocked_read(self, req: Request, fh: int, file: OpenFile,
                            offset: int, size: int) -> None:
        with self._waiting(req, fh) as (_, waiter):
            while True:
                self._waiters.add(waiter)
                await waiter.event.wait()
                try:
                    data = file.read(offset, size)
                except WouldBlock:
                    if waiter.by_ioctl:
                        req.reply_err(errno.EAGAIN)
                        return
                    waiter.event = trio.Event()
                    continue
                except Exception as exc:
                    req.reply_err(self._refused(exc, "read", req, fh))
                    return
                req.reply_data(data)
                return
        req.reply_err(errno.EINTR)

    def interrupted(self, req: Request) -> None:
        # Called with libfuse's request lock held: only cancel here, the
        # blocked read replies once it unwinds.
        scope = self._scopes.get(req.unique)
        if scope is not None:
            scope.cancel()
        else:
            self._interrupted_early.add(req.unique)

    def write(self, req: Request, ino: int, fh: int, offset: int, data: bytes,
              flags: int) -> None:
        try:
            file = self.ops.files.get(fh)
            if req.pid == 0 and file.kind in _MAPPABLE:
                # Writeback of a writable shared mapping (the kernel's own
                # request: no caller). The page the daemon holds is the truth,
                # so the stores are dropped; refusing them would make the
                # kernel report EIO on the client's next read().
                req.reply_write(len(data))
                return
            if self.ops.files.path(fh)[-1] in _RESIZERS:
                self.mappings.sweep()  # a resize is EBUSY only while really mapped
            if isinstance(file, UserEventsDataFile):
                count = self._write_event(req, fh, file, data, offset)
            else:
                count = file.write(data, offset, self.control_task(req.pid))
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "write", req, fh))
        else:
            if count is not None:  # None: answered from the writer's lane
                self._reply_after_publish(req, REPLY_WRITE, count)

    def _write_event(self, req: Request, fh: int, file: UserEventsDataFile, data: bytes,
                     offset: int) -> int | None:
        """A write to ``user_events_data``, taken whole when FUSE split or cut
        it; None when it is looked at whole in the writer's lane (then
        :meth:`_write_whole` replies)."""
        key = (req.pid, fh)
        rest = self._rest.pop(key, None)
        if rest is not None and rest[0] == offset:
            # A further part of a write answered whole: its size, nothing more.
            if rest[1] > len(data):
                self._rest[key] = (offset + len(data), rest[1] - len(data))
            return len(data)
        task = self.writer_task(req.pid)
        # What the fast path declined comes here; what we read about the
        # writer serves its next writes there.
        self.native.remember(task)
        self.native.file_used(fh, file)
        log.debug("write fh %d: %d bytes by %d at %d: engine", fh, len(data), req.pid, offset)
        if offset == 0 and len(data) >= min(request_limits()):
            self.nursery.start_soon(self._write_whole, req, fh, file, data, task, None)
            return None
        try:
            return file.write(data, offset, task)
        except TracefsError as refused:
            # A fault in an iovec leaves the request short, which the engine
            # may refuse (too short for the fields) where the kernel says
            # EFAULT: look at the whole write (the failed call changed nothing).
            if offset != 0:
                raise
            self.nursery.start_soon(self._write_whole, req, fh, file, data, task, refused)
            return None

    async def _write_whole(self, req: Request, fh: int, file: UserEventsDataFile, data: bytes,
                           task: Task, refused: TracefsError | None) -> None:
        """The writer's whole write, looked at in its lane (its system call,
        its iovecs, its first MiB; the rest only if the engine asks, for an
        enabled event), then taken by the engine on the trio thread: memory
        that never faults in holds up only this writer. Without a whole write
        to see, the request itself is the write (or ``refused`` stands)."""
        read = functools.partial(read_in_lane, req.pid)
        interrupted, whole = await self._in_lane(req, fh, whole_write, read, req.pid, len(data))
        try:
            while not interrupted:
                try:
                    if whole is None:
                        if refused is not None:
                            raise refused
                        count = file.write(data, 0, task)
                    else:
                        file.write_whole(whole.data, whole.count, whole.known_faulted, task)
                        log.debug("write fh %d: %d of a %d-byte write, taken whole", fh,
                                  len(data), whole.count)
                        self._rest[req.pid, fh] = (len(data), whole.count - len(data))
                        count = len(data)
                    break
                except NotLookedAt:
                    assert whole is not None
                    interrupted, _ = await self._in_lane(req, fh, whole.faulted)
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "write", req, fh))
            return
        if interrupted:
            req.reply_err(errno.EINTR)
            return
        self._reply_after_publish(req, REPLY_WRITE, count)

    def ioctl(self, req: Request, ino: int, fh: int, cmd: int, arg: int,
              in_data: bytes, out_size: int, flags: int) -> None:
        if flags & FUSE_IOCTL_COMPAT:
            req.reply_err(errno.ENOTTY)
            return
        try:
            file = self.ops.files.get(fh)
            if file.kind is FileKind.MAPPABLE_PIPE:
                # GET_READER needs the buffer mapped, by anyone: are the
                # mappings we know of still there, has the caller a new one?
                # Its maps are looked up in its own lane (only it waits).
                path = self.ops.files.path(fh)
                if not self.mappings.confirmed(req.pid, path):
                    self.nursery.start_soon(self._ioctl_after_look_up, req, fh, path, cmd, arg)
                    return
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "ioctl", req, fh, cmd))
            return
        self._ioctl(req, fh, cmd, arg)

    async def _ioctl_after_look_up(self, req: Request, fh: int, path: Path, cmd: int,
                                   arg: int) -> None:
        try:
            await self.mappings.refresh_in_lane(req.pid, path)
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "ioctl", req, fh, cmd))
            return
        self._ioctl(req, fh, cmd, arg)

    def _ioctl(self, req: Request, fh: int, cmd: int, arg: int) -> None:
        """The ioctl, once a mappable file's mappings are known."""
        try:
            file = self.ops.files.get(fh)
            # Only user_events_data ioctls touch the caller's memory: only
            # they follow it (an open() of any file sends TCGETS here too).
            if isinstance(file, UserEventsDataFile):
                self.native.file_used(fh, file)  # a registration adds indices
                if cmd == DIAG_IOCSREG:
                    # Its first read is always the size at arg (user_reg_get),
                    # before any other check: go there at once.
                    self.nursery.start_soon(self._lane_steps, req, fh, file, cmd, arg, {},
                                            Unfetched(arg, 4))
                else:
                    self._caller_ioctl(req, fh, file, cmd, arg, {})
                return
            result = file.ioctl(cmd, arg, self.control_task(req.pid))
        except WouldBlock:
            # A blocking GET_READER waits for buffer_percent (ring_buffer_wait).
            assert isinstance(file, RawPipeFile)
            if req.watch_interrupts():
                req.reply_err(errno.EINTR)
                return
            self.native.publish(wake=True)  # staged records must reach us now
            self.nursery.start_soon(self._blocked_get_reader, req, fh, file)
            return
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "ioctl", req, fh, cmd))
            return
        if cmd == 0 and file.kind in (FileKind.PIPE, FileKind.MAPPABLE_PIPE):
            self.wake_file(fh)  # ioctl(fd, 0): "wake up waiters"
        # No output data: the kernel copies nothing back over what the engine
        # wrote into the caller's memory.
        self._reply_after_publish(req, REPLY_IOCTL, result)

    def _caller_ioctl(self, req: Request, fh: int, file: UserEventsDataFile, cmd: int, arg: int,
                      fetched: dict[tuple[int, int], bytes]) -> None:
        """A user_events_data ioctl, run by the engine on what the caller's
        lane read (``fetched``); what it has not read yet is read there and
        the call run again, what the call writes is written there
        (:meth:`_lane_steps`). The caller's memory is touched only in its
        lane, where only the caller waits, as in the kernel."""
        step = self._engine_ioctl(req, fh, file, cmd, arg, fetched)
        if step is not None:
            self.nursery.start_soon(self._lane_steps, req, fh, file, cmd, arg, fetched, step)

    def _engine_ioctl(self, req: Request, fh: int, file: UserEventsDataFile, cmd: int, arg: int,
                      fetched: dict[tuple[int, int], bytes]) -> _LaneStep | None:
        """The engine's call on what the lane read: what the lane must do next
        (a read, or the call's writes), or None once the request is answered."""
        try:
            with self.caller(req.pid, req.uid, cmd == DIAG_IOCSREG, fetched) as (task, writes):
                result = file.ioctl(cmd, arg, task)
        except Unfetched as need:
            return need
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "ioctl", req, fh, cmd))
            return None
        if writes:
            return _Writes(task, writes, result)
        self._reply_after_publish(req, REPLY_IOCTL, result)
        return None

    async def _lane_steps(self, req: Request, fh: int, file: UserEventsDataFile, cmd: int,
                          arg: int, fetched: dict[tuple[int, int], bytes],
                          step: _LaneStep) -> None:
        """The request's steps in its caller's lane, in one task: each read
        the engine still needs (then the call runs again), then the call's
        writes and the reply.

        A FUSE INTERRUPT (the caller was signalled, or killed: its own
        userfaultfd is released only once it is gone) ends the wait with
        EINTR, the worker abandoned (it finishes when its access does): before
        the writes nothing was changed; during them, the reply is as if the
        bit could not be written.
        """
        with self._waiting(req, fh) as (scope, _):
            if req.watch_interrupts():
                scope.cancel()
            while isinstance(step, Unfetched):
                if not await self._fetch(req, fh, file, cmd, arg, fetched, step):
                    return
                next_step = self._engine_ioctl(req, fh, file, cmd, arg, fetched)
                if next_step is None:
                    return
                step = next_step
            await self._caller_writes(req, fh, file, cmd, step)
            return
        if isinstance(step, Unfetched):
            req.reply_err(errno.EINTR)
            return
        bit = next((w for w in step.writes if isinstance(w, BitWrite)), None)
        if bit is not None:
            file.enable_write_failed(cmd, step.task, bit.addr, bit.bit)
        self._reply_after_publish(req, REPLY_ERR, errno.EINTR)

    async def _in_lane(self, req: Request, fh: int, work: Callable[..., T],
                       *args: object) -> tuple[bool, T | None]:
        """``work(*args)`` in the lane of the request's caller: (interrupted,
        its result). A FUSE INTERRUPT (the caller was signalled, or killed)
        ends the wait: (True, None), the worker abandoned."""
        with self._waiting(req, fh) as (scope, _):
            if req.watch_interrupts():
                scope.cancel()
            return False, await self.lanes.run(req.uid, work, *args)
        return True, None

    async def _fetch(self, req: Request, fh: int, file: UserEventsDataFile, cmd: int, arg: int,
                     fetched: dict[tuple[int, int], bytes], need: Unfetched) -> bool:
        """Read what the call needs of its caller's memory in the caller's
        lane, into ``fetched``; False once the request is answered instead."""
        try:
            if cmd == DIAG_IOCSREG and (need.addr, need.size) == (arg, 4):
                # The size: what the rest of the registration reads comes with it.
                found = await self.lanes.run(req.uid, fetch_registration, req.pid, arg,
                                             file.data.registration_reads)
            else:
                data = await self.lanes.run(req.uid, read_in_lane, req.pid, need.addr, need.size)
                found = {(need.addr, need.size): data}
        except Exception as exc:  # an unexpected errno: a bug, EIO
            req.reply_err(self._refused(exc, "ioctl", req, fh, cmd))
            return False
        fetched.update(found)
        return True

    async def _caller_writes(self, req: Request, fh: int, file: UserEventsDataFile, cmd: int,
                             step: _Writes) -> None:
        """A user_events ioctl's writes into its caller (its first enable bit,
        ``write_index``), made in the caller's lane, then the reply.

        The kernel's caller faults its own page in, and only it waits; here
        too: a page that never faults in (a userfaultfd nobody resolves) holds
        up this request alone.
        """
        task, writes = step.task, step.writes
        lock, done = self.lane_writes(task.tgid, writes)

        def write() -> BitWrite | None:
            with lock:
                return write_in_lane(task.pid, writes)

        try:
            failed = await self.lanes.run(req.uid, write, after=done)
        except Exception as exc:  # an unexpected errno: a bug, EIO
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "ioctl", req, fh, cmd))
            return
        if failed is not None:
            error = file.enable_write_failed(cmd, task, failed.addr, failed.bit)
            self._reply_after_publish(req, REPLY_ERR, self._refused(error, "ioctl", req, fh, cmd))
        else:
            self._reply_after_publish(req, REPLY_IOCTL, step.result)

    def _refused(self, exc: Exception, op: str, req: Request, fh: int,
                 cmd: int | None = None) -> int:
        """The errno for a refused request; one log line names it and its caller."""
        try:
            path: tuple[str, ...] | None = self.ops.files.path(fh)
        except KeyError:
            path = None  # the refusal itself: no such open file
        return errno_of(exc, request_name(op, path, cmd), req.pid)

    async def _blocked_get_reader(self, req: Request, fh: int, file: RawPipeFile) -> None:
        """``ring_buffer_wait`` then ``ring_buffer_map_get_reader``: the wait
        ends when buffer_percent is reached, at ``ioctl(fd, 0)`` (the kernel
        then goes on to the reader), or at an interrupt (EINTR)."""
        with self._waiting(req, fh) as (scope, waiter):
            while not waiter.by_ioctl and not file.poll():
                waiter.event = trio.Event()
                self._waiters.add(waiter)
                await waiter.event.wait()
        if scope.cancelled_caught:
            req.reply_err(errno.EINTR)
            return
        try:
            self.mappings.refresh(req.pid, self.ops.files.path(fh))
            result = file.get_reader()
        except Exception as exc:
            self._reply_after_publish(req, REPLY_ERR, self._refused(exc, "ioctl", req, fh))
            return
        self._reply_after_publish(req, REPLY_IOCTL, result)

    def publish_fast_path(self) -> None:
        """The fast path's table says what the engine now would (before any
        reply, and after an engine change outside a request: a perf event
        opened while ftrace records the event must take its writes from then on)."""
        self.native.publish(wake=bool(self._waiters or self.ops.poll_handles))

    def _reply_after_publish(self, req: Request, reply: int, value: int) -> None:
        """Reply once what the request changed is visible in clients' mappings,
        as in the kernel (pages are stored by the storer thread, which then
        sends the reply; see _pagepush), and once the fast path's table says
        what the engine now would. The enable bits the request changed are
        written first, by workers (``EnableWrites.written``: bounded, a page that
        never faults in leaves them late, as the kernel's faulting enable
        writes are), and the perf records it left waiting for their ring's
        ``data_tail`` are placed (``PerfTails``: bounded likewise)."""
        held = self.enable_writes.take_held()
        tails = self.perf_tails.take_held()
        if held or tails:
            self.nursery.start_soon(self._reply_when_written, held, tails, req, reply, value)
            return
        self._reply_now(req, reply, value)

    async def _reply_when_written(self, held: list[trio.Event], tails: list[trio.Event],
                                  req: Request, reply: int, value: int) -> None:
        await self.enable_writes.written(held)
        for placed in tails:
            await placed.wait()
        self._reply_now(req, reply, value)

    def _reply_now(self, req: Request, reply: int, value: int) -> None:
        self.publish_fast_path()
        stores = self.changed()
        if stores:
            self.pages.push_then_reply(stores, req, reply, value)
        elif reply == REPLY_WRITE:
            req.reply_write(value)
        elif reply == REPLY_IOCTL:
            req.reply_ioctl(value)
        else:
            req.reply_err(value)
        self.native.publish_perf()  # after the stores: see NativeWrites.publish_perf


def _splice_fill(file: RawPipeFile, offset: int, size: int, flags: int) -> bytes:
    """One page of a ``splice()`` from ``trace_pipe_raw``, for the page cache.

    A fill is never held (a held fill is a locked page; when it is readahead,
    only SIGKILL frees the caller) and never short (FUSE takes a short fill
    for end of file and shrinks i_size). So: one page of whole sub-buffers,
    readahead windows and fills ahead of the splicer refused (the kernel then
    fills page by page, in order, and the error is not seen), and with no
    whole sub-buffer EAGAIN for O_NONBLOCK, or
    EINTR where the kernel would wait for buffer_percent: tools select()
    first and retry EINTR, and a splice that has pages returns them. See
    docs/readers.md.

    Raises:
        TracefsError: EAGAIN or EINTR, as above.
    """
    error = errno.EAGAIN if flags & os.O_NONBLOCK else errno.EINTR
    if size != _PAGE_SIZE:
        raise TracefsError(error, f"page-cache fill of {size} bytes (readahead)")
    try:
        return file.splice_read(offset, size)
    except WouldBlock:
        raise TracefsError(error, "no whole sub-buffer to splice") from None


class _Writes(NamedTuple):
    """What a user_events ioctl wrote into its caller (for its lane to make),
    by whom, and its result once they are made."""

    task: Task
    writes: list[CallerWrite]
    result: int


#: What a request's lane does next: a read the engine still needs, or the writes.
_LaneStep = Unfetched | _Writes


class _Waiter:
    __slots__ = ("fh", "event", "by_ioctl")

    def __init__(self, fh: int) -> None:
        self.fh = fh
        self.event = trio.Event()
        self.by_ioctl = False
