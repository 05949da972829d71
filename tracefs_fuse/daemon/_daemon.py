"""The daemon: one engine, served at one mountpoint, following client processes.

Rules:
  * Everything runs in one trio thread: pyfuse3's dispatch, the bridge's
    handlers, process events. Engine calls are synchronous and never awaited,
    so every request sees (and leaves) a consistent engine. Only accesses to
    one client's memory on that client's behalf leave it, for the client's
    lane (``process/_lanes.py``), and never touch the engine there.
  * A process is followed (its image pinned, ``_tracking``) from the first
    ioctl its thread sends to ``user_events_data``; nothing is ever written
    into a process outside its own request but through its pinned image.
  * Forks, execs and exits are followed by :class:`~._tracking.ProcessTracker`
    (the process connector where it can be joined, ``/proc`` elsewhere), which
    catches up before every request that user_events state depends on.
  * After every request that may have changed what clients see, :meth:`Daemon.publish`
    wakes blocked readers and pollers and pushes changed pages into mappings.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
from collections.abc import Callable, Iterator
from typing import TypeVar

import msgspec
import trio

from ..engine._events import first_dynamic_id
from ..engine._memory import Tgid
from ..engine._perf_events import PerfEvent
from ..engine._task import Task
from ..engine._tracefs import Tracefs
from ..fuse._fast_path import NativeWrites, host_clocks
from ..fuse._mmap import MappingTracker
from ..fuse._operations import TracefsOperations
from ..fuse._pagepush import PagePusher, Store
from ..fuse._requests import RequestHandler
from ..fuse._session import (
    access_begin,
    access_end,
    perfmon_capable,
    serve,
    set_own_device,
    terminate,
)
from ..host._host_events import host_highest_event_id
from ..host._mountinfo import mount_device
from ..process._budget import FdBudget, raise_fd_limit
from ..process._lanes import Lanes
from ..process._memory import CallerWrite, ClientMemory, watch_accesses
from ..process._perf_tails import PerfTails
from ..process._tasks import TaskFacts, TaskTable
from ..process._tracking import ProcessTracker
from ._config import MountConfig
from ._mount_options import fuse_options

log = logging.getLogger(__name__)

T = TypeVar("T")

# Client memory accesses are bracketed for the receiver's watchdog (process/_memory.py).
watch_accesses(access_begin, access_end)

#: Writer tasks kept for reuse (a Task per thread while its CPU and comm hold).
_WRITER_CACHE = 4096


def possible_cpus() -> int:
    """CPUs the kernel could bring online (``/sys/devices/system/cpu/possible``)."""
    try:
        with open("/sys/devices/system/cpu/possible") as f:
            text = f.read().strip()
        return max(int(part.split("-")[-1]) for part in text.split(",")) + 1
    except (OSError, ValueError):
        return os.cpu_count() or 1


@functools.cache
def marker_ip() -> int:
    """The host's address of ``tracing_mark_write`` (0 if kallsyms hides it).

    Read once per process (a fork of the run server has it already): the
    kernel generates kallsyms line by line, some 15 ms to this symbol.
    """
    try:
        with open("/proc/kallsyms", "rb") as f:
            for line in f:
                if line.endswith(b" tracing_mark_write\n"):
                    return int(line.split(b" ", 1)[0], 16)
    except OSError:
        pass
    return 0


class Daemon:
    """One mount's engine, adapter and process tracking."""

    def __init__(self, config: MountConfig, device: int | None = None) -> None:
        """``device``: the ``/dev/fuse`` descriptor of a mount at
        ``config.mountpoint`` made already (``host/_fuse_mount.py``), served
        instead of mounting; ours from here on."""
        self.config = config
        self._device = device
        #: The soft RLIMIT_NOFILE we were started with (our children get it back).
        self.fd_limit = raise_fd_limit()
        self.budget = FdBudget()
        self.memory = ClientMemory(budget=self.budget)
        self.tasks = TaskTable()
        self.engine = Tracefs(
            nr_cpus=config.nr_cpus or possible_cpus(), memory=self.memory, bits=self.memory,
            clocks=host_clocks(), abi=config.abi, user_events_max=config.user_events_max,
            buffer_size_kb=config.buffer_size_kb, marker_ip=marker_ip,
            auto_enable=config.events, first_event_id=first_dynamic_id(host_highest_event_id()))
        # An exec closing a perf file of ours waits for our FUSE_FLUSH reply.
        self.memory.careful_pins = self.engine.perf.any_open
        self.tracker = ProcessTracker(self.engine.registry, self.memory,
                                      source=config.process_source, changed=self.publish)
        self.ops = TracefsOperations(self.engine.root, self.control_task, uid=config.uid,
                                     gid=config.gid, root_mode=config.mode,
                                     before_release=self.tracker.catch_up,
                                     after_release=self._bits_written)
        self.handler: RequestHandler | None = None
        self.mappings = MappingTracker(self.engine, self.ops.inodes, "", self._tgid,
                                       self.budget)
        # A perf ring is known once its mapping is (engine/_perf_events.py).
        self.engine.perf.find_mapping = self.mappings.refresh
        #: Writable rings' data_tail, read in their readers' lanes.
        self.perf_tails = PerfTails(self.memory, self._ring_start)
        self.engine.perf.read_tail = self.perf_tails.read_tail
        self._generation = self.engine.generation
        self._writers: dict[int, tuple[TaskFacts, Task]] = {}
        self.pages = PagePusher()
        #: Called after a request (or process event) that put records in a
        #: buffer: in-process readers such as a recording (tracefs_fuse.record).
        self._data_listeners: list[Callable[[], None]] = []
        self.native = NativeWrites(self.engine, enabled=config.fast_path,
                                   debug=config.log_level == "debug",
                                   inode_of=self.ops.inodes.known)

    # -- who is calling ---------------------------------------------------------------

    def _tgid(self, tid: int) -> Tgid:
        return self.tasks.tgid(tid) or Tgid(tid)

    @contextlib.contextmanager
    def caller(self, tid: int, uid: int, registering: bool,
               fetched: dict[tuple[int, int], bytes]) -> Iterator[tuple[Task, list[CallerWrite]]]:
        """Around a user_events_data ioctl: its caller (of uid ``uid``) is
        followed, and its memory is what its lane read (``fetched``: a read of
        anything else raises ``Unfetched``) and will write (the list yielded;
        ``_memory.ClientMemory.deferring``)."""
        task = self._capable_task(tid)
        self.tracker.enter(task.tgid, tid, uid, registering=registering)
        try:
            with self.memory.deferring(fetched) as writes:
                yield task, writes
        finally:
            self.tracker.leave(task.tgid)

    def _ring_start(self, perf: PerfEvent) -> int | None:
        """Where a perf ring's reader maps it writable: its first page, where
        it writes ``data_tail`` (``_perf_tails``)."""
        return self.mappings.writable_start(perf.owner_tgid, perf.path)

    def control_task(self, tid: int) -> Task:
        """An open or a control-file write: where it ran, and its capabilities.

        Forks are followed first: what such a request changes is written into
        every process holding enablers, forked children included.
        """
        self.tracker.catch_up()
        return self._capable_task(tid)

    def _capable_task(self, tid: int) -> Task:
        return msgspec.structs.replace(self.writer_task(tid), perfmon=perfmon_capable(tid))

    def writer_task(self, tid: int) -> Task:
        """An event write's caller: the hot path, one pread of /proc/<tid>/stat."""
        facts = self.tasks.facts(tid)
        known = self._writers.get(tid)
        if known is not None and known[0] == facts:
            return known[1]  # same thread, same CPU: the same Task
        # The engine's text is latin-1 (bytes round-trip); comm came as fsdecode'd.
        comm = facts.comm.encode("utf-8", "surrogateescape").decode("latin-1")
        task = Task(pid=tid, tgid=facts.tgid, cpu=facts.cpu % self.engine.nr_cpus, comm=comm)
        if len(self._writers) >= _WRITER_CACHE:
            self._writers.clear()
        self._writers[tid] = (facts, task)
        return task

    # -- after every request ---------------------------------------------------------------

    def publish(self) -> trio.Event | None:
        """Wake readers if data arrived; queue page stores for mappings.

        Returns:
            The event a caller must wait for (its pages stored), or None.
        """
        # Perf records that wait for their ring's tail outside a request are
        # placed when it comes; no reply waits for them (a request's own are
        # taken with its reply).
        self.perf_tails.take_held()
        stores = self.take_changes()
        stored = self.pages.push(stores) if stores else None
        self.native.publish_perf()  # after the stores: see NativeWrites.publish_perf
        return stored

    def take_changes(self) -> list[Store]:
        """Wake readers if data arrived; the page stores mappings now need
        (a request's reply goes to the storer with them: _pagepush)."""
        generation = self.engine.generation
        if generation != self._generation:
            self._generation = generation
            assert self.handler is not None
            self.handler.data_arrived()
            self.ops.notify_pollers()
            for listener in self._data_listeners:
                listener()
        stores = []
        for update in self.engine.take_page_updates():
            inode = self.ops.inodes.known(update.path)
            if inode is not None:  # never looked up: nobody can have it mapped
                stores.append((inode, update.offset, update.data))
        return stores

    # -- serving ---------------------------------------------------------------------------------

    def mount_options(self) -> list[str]:
        return fuse_options(self.config)

    @property
    def tracefs(self) -> Tracefs:
        """The engine being served (for in-process users such as ``tracefs_fuse.synth``)."""
        return self.engine

    def add_data_listener(self, listener: Callable[[], None]) -> None:
        """An in-process reader: ``listener`` runs whenever records arrive,
        and records the fast path stages reach the engine as they come."""
        self._data_listeners.append(listener)
        self.native.follow()

    def take_in_staged(self) -> None:
        """Records the fast path staged are in the engine's buffers on return."""
        self.native.drain()

    def engine_changed(self) -> trio.Event | None:
        """Call after changing the engine outside a FUSE request (e.g. tracing
        from code, a perf event opened): brings the fast path's table up to
        date, wakes blocked readers and pushes pages into mappings.

        Returns:
            The event set once those pages are stored (None: none to store),
            for a caller that must not answer before its change is visible.
        """
        if self.handler is None:
            return self.publish()
        self.handler.publish_fast_path()
        tails = self.perf_tails.take_held()
        stored = self.publish()
        held = self.memory.enable_writes.take_held()
        if not held and not tails:
            return stored
        visible = trio.Event()
        self.handler.nursery.start_soon(self._when_visible, stored, held, tails, visible)
        return visible

    async def _bits_written(self) -> None:
        bits = self.memory.enable_writes
        await bits.written(bits.take_held())

    async def _when_visible(self, stored: trio.Event | None, held: list[trio.Event],
                            tails: list[trio.Event], visible: trio.Event) -> None:
        """Set ``visible`` once the pages are stored, the enable bits are
        written (those bounded, ``EnableWrites.written``) and the perf records
        that waited for their ring's tail are placed (``PerfTails``)."""
        await self.memory.enable_writes.written(held)
        for placed in tails:
            await placed.wait()
        if stored is not None:
            await stored.wait()
        visible.set()

    async def run(self, stop_on_signals: bool = True, *,
                  task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
        """Mount, serve until unmounted (or, if asked, SIGTERM/SIGINT), unmount.

        ``task_status.started`` receives this daemon once the mount serves.
        """
        try:
            async with trio.open_nursery() as nursery:
                self.handler = RequestHandler(
                    self.ops, nursery, self.mappings, writer_task=self.writer_task,
                    control_task=self.control_task, caller=self.caller,
                    changed=self.take_changes, pages=self.pages, native=self.native,
                    lane_writes=self.memory.lane_writes,
                    enable_writes=self.memory.enable_writes, perf_tails=self.perf_tails)
                enable_writes = self.memory.enable_writes
                enable_writes.in_lane = functools.partial(self._in_lane, nursery,
                                                          self.handler.lanes)
                enable_writes.call_soon = functools.partial(
                    _call_soon, trio.lowlevel.current_trio_token())
                self.perf_tails.start(nursery, self.handler.lanes, self.publish)
                self.native.start(self.publish)
                log.info("%s", self.tracker.describe())
                nursery.start_soon(self.pages.run)
                nursery.start_soon(self.tracker.follow_connector)
                nursery.start_soon(self.tracker.follow_exits)
                nursery.start_soon(self.tracker.watch_images)
                nursery.start_soon(self.tracker.release_detached)
                nursery.start_soon(self.mappings.follow_exits, self.publish)
                if stop_on_signals:
                    nursery.start_soon(self._stop_on_signal)
                status = await nursery.start(self._serve, nursery)
                self.mappings.device = mount_device(self.config.mountpoint)
                set_own_device(*(int(part, 16) for part in self.mappings.device.split(":")))
                log.info("serving %s", self.config.mountpoint)
                log.debug("bridge: %s", status)
                task_status.started(self)
        finally:
            self.native.stop()
            self.tracker.close()
            self.memory.close()
            self.mappings.close()

    @staticmethod
    def _in_lane(nursery: trio.Nursery, lanes: Lanes, uid: int, work: Callable[[], T],
                 done: Callable[[T | None], None]) -> None:
        """``ClientMemory.in_lane``: ``work`` on a worker of ``uid``'s lane,
        then ``done`` with its result here (None: it failed, a bug logged)."""
        async def run() -> None:
            try:
                result = await lanes.run(uid, work)
            except Exception:
                log.exception("enable bits written for uid %d", uid)
                result = None
            done(result)

        nursery.start_soon(run)

    async def _serve(self, nursery: trio.Nursery,
                     task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until unmounted, then stop following processes."""
        assert self.handler is not None
        await serve(self.ops, self.handler, self.config.mountpoint, self.mount_options(),
                    device=self._device, task_status=task_status)
        nursery.cancel_scope.cancel()

    async def _stop_on_signal(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: unmounting", signum)
                terminate()
                return


def _call_soon(token: trio.lowlevel.TrioToken, function: Callable[..., None],
               *args: object) -> None:
    """``EnableWrites.call_soon``: from a worker, after the daemon may have stopped."""
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(function, *args)
