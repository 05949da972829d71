"""The daemon: one engine, served at one mountpoint, following client processes.

Rules:
  * Everything runs in one trio thread: pyfuse3's dispatch, the bridge's
    handlers, process events. Engine calls are synchronous and never awaited,
    so every request sees (and leaves) a consistent engine.
  * A process is tracked (pidfd + pinned mm) from the first ioctl its thread
    sends to ``user_events_data``; nothing is ever written into an untracked
    process. If its number turns out to name a new image, whatever the engine
    held for the old one is dropped first.
  * Forked children inherit enablers when the process connector reports the
    fork; exec and exit drop them. The connector is listened to only while
    some process holds enabler state. After each batch of process events, children
    that still hold copies get the current enable state written (a state
    change may have raced with the fork).
  * After every request that may have changed what clients see, :meth:`Daemon.publish`
    wakes blocked readers and pollers and pushes changed pages into mappings.
"""

from __future__ import annotations

import logging
import os
import signal

import msgspec
import trio

from ..config import MountConfig
from ..engine._memory import Tgid
from ..engine._task import Task
from ..engine._tracefs import Tracefs
from ._fast_path import NativeWrites, host_clocks
from ._memory import VmProcessMemory
from ._mmap import MappingTracker, mount_device
from ._operations import TracefsOperations
from ._pagepush import PagePusher
from ._proc_events import EventsLost, ExecEvent, ExitWatcher, ForkEvent, ProcConnector
from ._requests import RequestHandler
from ._session import perfmon_capable, serve, terminate
from ._tasks import TaskFacts, TaskTable

log = logging.getLogger(__name__)

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


def marker_ip() -> int:
    """The host's address of ``tracing_mark_write`` (0 if kallsyms hides it)."""
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

    def __init__(self, config: MountConfig) -> None:
        self.config = config
        self.memory = VmProcessMemory()
        self.tasks = TaskTable()
        self.engine = Tracefs(
            nr_cpus=config.nr_cpus or possible_cpus(), memory=self.memory,
            clocks=host_clocks(), abi=config.abi, user_events_max=config.user_events_max,
            buffer_size_kb=config.buffer_size_kb, marker_ip=marker_ip())
        self.ops = TracefsOperations(self.engine.root, self.control_task, uid=config.uid,
                                     gid=config.gid, root_mode=config.mode)
        self.handler: RequestHandler | None = None
        self.mappings = MappingTracker(self.engine, self.ops.inodes, "", self._tgid)
        self.exits = ExitWatcher()
        self._generation = self.engine.generation
        self._writers: dict[int, tuple[TaskFacts, Task]] = {}
        self.pages = PagePusher()
        self.native = NativeWrites(self.engine, enabled=config.fast_path, debug=config.debug)
        self._connector: ProcConnector | None = None
        self._connector_ready = trio.Event()
        self._connector_error: OSError | None = None

    # -- who is calling ---------------------------------------------------------------

    def _tgid(self, tid: int) -> Tgid:
        return self.tasks.tgid(tid) or Tgid(tid)

    def caller_task(self, tid: int) -> Task:
        """An ioctl's caller: tracked (its memory may be written), with capabilities."""
        task = self.control_task(tid)
        self._track(task.tgid)
        return task

    def control_task(self, tid: int) -> Task:
        """An open or a control-file write: where it ran, and its capabilities."""
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

    def _track(self, tgid: Tgid) -> None:
        try:
            fresh = self.memory.track(tgid)
        except OSError as exc:
            log.debug("cannot track %d: %s", tgid, exc)
            return
        if fresh:
            # A new image under a number we knew: its enablers are stale.
            self.engine.registry.exit(tgid)
            self.exits.watch(tgid, self.memory.pidfd(tgid))
        self._subscribe()

    # -- the process connector, only while someone can fork with enablers -----------------

    def _subscribe(self) -> None:
        """Listen to forks from now on (synchronously: the caller is still in its
        ioctl, so it cannot have forked yet)."""
        if self._connector is None and self._connector_error is None:
            try:
                self._connector = ProcConnector()
            except OSError as exc:
                # Outside the initial user, pid and network namespaces the
                # connector cannot be joined; registration must still work.
                self._connector_error = exc
                log.warning("process connector unavailable (%s): forked children "
                            "will not inherit enablers", exc)
                return
            self._connector_ready.set()

    def _unsubscribe_if_idle(self) -> None:
        """Every process event on the machine costs us CPU: stop listening when
        no process holds enabler state."""
        if self._connector is not None and not self.engine.registry.mms:
            self._connector.close()
            self._connector = None

    # -- after every request ---------------------------------------------------------------

    def publish(self) -> trio.Event | None:
        """Wake readers if data arrived; queue page stores for mappings.

        Returns:
            The event a reply must wait for (its pages stored), or None.
        """
        generation = self.engine.generation
        if generation != self._generation:
            self._generation = generation
            assert self.handler is not None
            self.handler.data_arrived()
            self.ops.notify_pollers()
        stores = []
        for update in self.engine.take_page_updates():
            inode = self.ops.inodes.known(update.path)
            if inode is not None:  # never looked up: nobody can have it mapped
                stores.append((inode, update.offset, update.data))
        return self.pages.push(stores) if stores else None

    # -- process events ---------------------------------------------------------------------

    def _forget(self, tgid: Tgid) -> None:
        self.engine.registry.exit(tgid)
        self.memory.untrack(tgid)
        self.exits.unwatch(tgid)
        self._unsubscribe_if_idle()

    def process_events(self, events: list[object]) -> None:
        registry = self.engine.registry
        forked: list[Tgid] = []
        for event in events:
            if isinstance(event, ForkEvent):
                if event.is_thread or Tgid(event.parent_tgid) not in registry.mms:
                    continue
                child = Tgid(event.child_tgid)
                try:
                    fresh = self.memory.track(child, parent=Tgid(event.parent_tgid))
                except OSError as exc:
                    # exec'd already, or shares the parent's mm (vfork): the
                    # kernel would not write copies into it either.
                    log.debug("fork %d -> %d not followed: %s", event.parent_tgid, child, exc)
                    continue
                if fresh:
                    registry.exit(child)  # a previous holder of the number
                self.exits.watch(child, self.memory.pidfd(child))
                registry.fork(Tgid(event.parent_tgid), child)
                forked.append(child)
            elif isinstance(event, ExecEvent):
                # Only a hint: the process may have exec'd *and* registered in
                # its new image before we got here; the pinned mm decides.
                tgid = Tgid(event.tgid)
                if tgid in registry.mms and not self.memory.is_current(tgid):
                    self._forget(tgid)
            elif isinstance(event, EventsLost):
                for tgid in list(registry.mms):
                    if not self.memory.is_current(tgid):
                        self._forget(tgid)
        for child in forked:
            if child in registry.mms:
                registry.sync(child)
        self.publish()

    async def follow_processes(self) -> None:
        while True:
            connector = self._connector
            if connector is None:
                self._connector_ready = trio.Event()
                await self._connector_ready.wait()
                continue
            # Ends when _unsubscribe_if_idle closes it.
            async for event in connector:
                self.process_events([event, *connector.drain()])

    async def follow_exits(self) -> None:
        while True:
            for tgid in await self.exits.wait_exited():
                self._forget(tgid)
            self.publish()

    # -- serving ---------------------------------------------------------------------------------

    def mount_options(self) -> list[str]:
        options = ["fsname=tracefs", "subtype=tracefs", "allow_other", "default_permissions"]
        if self.config.debug:
            options.append("debug")
        return options

    @property
    def tracefs(self) -> Tracefs:
        """The engine being served (for in-process users such as ``tracefs_fuse.synth``)."""
        return self.engine

    def engine_changed(self) -> None:
        """Call after changing the engine outside a FUSE request (e.g. tracing
        from code): wakes blocked readers and pushes pages into mappings."""
        self.publish()

    async def run(self, stop_on_signals: bool = True, *,
                  task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
        """Mount, serve until unmounted (or, if asked, SIGTERM/SIGINT), unmount.

        ``task_status.started`` receives this daemon once the mount serves.
        """
        try:
            async with trio.open_nursery() as nursery:
                self.handler = RequestHandler(
                    self.ops, nursery, self.mappings, writer_task=self.writer_task,
                    control_task=self.control_task, caller_task=self.caller_task,
                    changed=self.publish, native=self.native, read_memory=self.memory.read)
                self.native.start(self.publish)
                nursery.start_soon(self.pages.run)
                nursery.start_soon(self.follow_processes)
                nursery.start_soon(self.follow_exits)
                if stop_on_signals:
                    nursery.start_soon(self._stop_on_signal)
                status = await nursery.start(self._serve, nursery)
                self.mappings.device = mount_device(self.config.mountpoint)
                log.info("serving %s: %s", self.config.mountpoint, status)
                task_status.started(self)
        finally:
            self.native.stop()
            if self._connector is not None:
                self._connector.close()
            self.exits.close()

    async def _serve(self, nursery: trio.Nursery,
                     task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until unmounted, then stop following processes."""
        assert self.handler is not None
        await serve(self.ops, self.handler, self.config.mountpoint, self.mount_options(),
                    task_status=task_status)
        nursery.cancel_scope.cancel()

    async def _stop_on_signal(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: unmounting", signum)
                terminate()
                return
