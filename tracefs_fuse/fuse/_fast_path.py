"""The native fast path, from the adapter's side: the bridge's table kept in step
with the engine, and staged records taken in.

The receiver thread (``_native/receiver.c``) answers an enabled event's write
to ``user_events_data`` itself when the table (``_native/fastpath.c``) says
the engine would answer it with its full count, and stages the record. This
module publishes that table from :class:`~..engine._fast_path.FastPath` and
hands the staged records to the engine.

Rules:
  * The table is republished after every request the engine served that may
    have changed it, before that request's reply: an enable or disable, a
    registration, ``tracing_on``, a buffer resize, a clock change. So a
    write that starts after ``write(enable, "0")`` returns sees the disable.
  * Staged records are taken in before the engine sees any other request
    (the bridge drains in its ``io_read``), when a reader waits for data
    (a blocked read, a poll), and when the staging ring is half full.
  * The writer's CPU, tgid and comm (for the record and ``saved_cmdlines``)
    are the ones the engine's own path last read for that thread from
    ``/proc/<tid>/stat``; they serve the fast path for :data:`TASK_TTL_NS`,
    then the thread's next write goes to the engine, which reads them again.
  * The perf table (``engine._fast_perf``) is given to the bridge after a
    request that changed a perf event or a ring, once that request's page
    stores are queued (``publish_perf``), and withdrawn
    (``PerfEvents.before_change``) before the engine changes one, the samples
    the bridge wrote meanwhile taken in at once.
  * ``--no-fast-path`` stages nothing: every write goes to the engine. The
    receiver thread runs either way (it answers the daemon's own faults).

Caveats:
  * A thread that moves to another CPU, or renames itself, has its records
    filed under the old CPU and comm for up to :data:`TASK_TTL_NS` (the
    kernel files each record under the CPU the write ran on). Measured in
    docs/performance.md.
  * Only host clocks are read natively (:data:`HOST_CLOCKS`); with
    ``trace_clock`` set to ``counter``, writes that record go to the engine.
"""

from __future__ import annotations

import logging
import struct
import time
import weakref
from typing import Callable

from ..engine._clock import TraceClocks
from ..engine._fast_path import FastArray, FastPath
from ..engine._fast_perf import FastPerf, FastRing, perf_table
from ..engine._task import Task
from ..engine._tracefs import Tracefs
from ..engine._user_events import UserEvent
from ..engine._user_events_files import UserEventsDataFile
from ._session import native

log = logging.getLogger(__name__)

#: How long the writer facts the engine's path read serve the fast path.
TASK_TTL_NS = 2_000_000
#: The staging ring: records wait here until the engine takes them in
#: (drained at half). 256 KiB is some 4,000 small records.
STAGING_BYTES = 256 * 1024
#: What the daemon reads each trace clock from: (clock id, divisor). The
#: engine's ``uptime`` is jiffies (USER_HZ) of the boot-time clock;
#: ``counter`` is the engine's own and has no entry.
HOST_CLOCKS: dict[str, tuple[int, int]] = {
    "local": (time.CLOCK_MONOTONIC, 1),  # sched_clock()'s stand-in
    "global": (time.CLOCK_MONOTONIC, 1),
    "perf": (time.CLOCK_MONOTONIC, 1),
    "mono": (time.CLOCK_MONOTONIC, 1),
    "mono_raw": (time.CLOCK_MONOTONIC_RAW, 1),
    "boot": (time.CLOCK_BOOTTIME, 1),
    "tai": (time.CLOCK_TAI, 1),
    "x86-tsc": (time.CLOCK_MONOTONIC, 1),  # any monotonic counter will do
}
#: ``fs.fuse.max_pages_limit`` (6.13+); before it the kernel's fixed limit.
MAX_PAGES_LIMIT = "/proc/sys/fs/fuse/max_pages_limit"
FUSE_MAX_MAX_PAGES = 256
# Each validator as the bridge reads it: u32 offset, u8 rel, u8 ensure_null.
_VALIDATOR = struct.Struct("<IBBxx")
#: struct fp_perf_ring_in (fastpath.c): sink, ino, size, head, tail, written,
#: wakeup_at, watermark (u64 each), events_left (s64), wakeup_events (u32),
#: writable (u8), 3 bytes of padding.
PERF_RING = struct.Struct("<QQQQQQQQqIB3x")
#: struct fp_perf_in (fastpath.c): id, sample_type (u64), event (u32), cpu,
#: tid, clock (s32), ring (u32; PERF_ENGINE: the engine writes its samples),
#: enabled, inherit, comm (u8), 1 byte of padding.
PERF_EVENT = struct.Struct("<QQIiiiIBBBx")
#: struct fp_announced_in (fastpath.c): tid (s32), ring (u32), comm (16 bytes).
PERF_ANNOUNCED = struct.Struct("<iI16s")
PERF_ENGINE = 0xFFFF_FFFF
_U64 = (1 << 64) - 1


def host_clocks() -> TraceClocks:
    """The trace clocks, from the host's clocks (the ones :data:`HOST_CLOCKS` names)."""

    def clock(name: str) -> Callable[[], int]:
        clock_id, _ = HOST_CLOCKS[name]
        return lambda: time.clock_gettime_ns(clock_id)

    return TraceClocks(local=clock("local"), global_=clock("global"), perf=clock("perf"),
                       mono=clock("mono"), mono_raw=clock("mono_raw"), boot=clock("boot"),
                       tai=clock("tai"), x86_tsc=clock("x86-tsc"),
                       uptime_ns=lambda: time.clock_gettime_ns(time.CLOCK_BOOTTIME))


def _native_clock(name: str) -> tuple[int, int]:
    """(clock id, divisor) of a trace clock; divisor 0: not readable natively."""
    if name == "uptime":
        return time.CLOCK_BOOTTIME, 10_000_000  # jiffies_clock(): USER_HZ ticks
    return HOST_CLOCKS.get(name, (0, 0))


def max_pages_limit() -> int:
    try:
        with open(MAX_PAGES_LIMIT) as f:
            return int(f.read())
    except (OSError, ValueError):
        return FUSE_MAX_MAX_PAGES


class NativeWrites:
    """One mount's fast path: its table in the bridge, and the intake.

    Args:
        engine: the tracefs served.
        enabled: False for ``--no-fast-path``.
        debug: the bridge logs which path served each write.
        inode_of: a file's inode, if the kernel knows it (where a perf
            ring's pages are stored).
    """

    def __init__(self, engine: Tracefs, *, enabled: bool, debug: bool,
                 inode_of: Callable[[tuple[str, ...]], int | None]) -> None:
        self.engine = engine
        self.enabled = enabled
        self.table = FastPath((engine.top,), engine.perf)
        self._inode_of = inode_of
        #: The perf table given to the bridge is live (it may write rings).
        self._perf_live = False
        self._perf_dirty = False
        self._on_records: Callable[[], object] = lambda: None
        #: fh -> (its open file, write indices published so far)
        self._files: dict[int, tuple[weakref.ref[UserEventsDataFile], int]] = {}
        self._dirty_files: set[int] = set()
        self._released: list[int] = []
        #: Events the table holds, by id (ids are reused after a deletion).
        self._events: dict[int, UserEvent] = {}
        #: An in-process reader follows the buffers (a recording).
        self._followed = False
        try:
            native.fast_configure(nr_cpus=engine.nr_cpus,
                                  staging_bytes=STAGING_BYTES if enabled else 0,
                                  debug=debug, max_pages_limit=max_pages_limit())
        except MemoryError:
            # The bridge left the fast path off: the engine serves every write.
            log.warning("fast path off: its staging ring could not be allocated")
            self.enabled = False
        if self.enabled:
            engine.perf.before_change = self._perf_changing

    def start(self, on_records: Callable[[], object]) -> None:
        """Take staged records in from now on; ``on_records`` runs after each intake."""
        self._on_records = on_records
        native.set_drain(self.drain)

    def stop(self) -> None:
        native.set_drain(None)

    def follow(self) -> None:
        """An in-process reader follows the buffers from now on: take records
        in as they come, as for a reader blocked on a FUSE read."""
        self._followed = True
        if self.enabled:
            native.fast_wake(True)

    # -- the table -------------------------------------------------------------------

    def file_used(self, fh: int, file: UserEventsDataFile) -> None:
        """A write or ioctl reached the engine for ``fh``: its indices may have grown."""
        if not self.enabled:
            return
        if fh not in self._files:
            released = self._released
            self._files[fh] = (weakref.ref(file, lambda _: released.append(fh)), 0)
        self._dirty_files.add(fh)

    def remember(self, task: Task) -> None:
        """The writer facts the engine just read for a write of ``task``'s."""
        if self.enabled:
            native.fast_task(task.pid, task.tgid, task.cpu, task.comm.encode("latin-1"),
                             TASK_TTL_NS)

    def publish(self, *, wake: bool) -> None:
        """Bring the bridge's table up to date; call before replying.

        Args:
            wake: a reader waits for data (take records in as they come).
        """
        if not self.enabled:
            return
        native.fast_wake(wake or self._followed)
        for index, array in self.table.changed_arrays():
            self._publish_array(index, array)
        for event in self.table.take_changed_events():
            if self._events.get(event.id) is event:
                assert isinstance(event, UserEvent)
                self._publish_event(event)
        while self._released:
            fh = self._released.pop()
            self._files.pop(fh, None)
            self._dirty_files.discard(fh)
            native.fast_drop_file(fh)
        for fh in self._dirty_files:
            ref, published = self._files[fh]
            file = ref()
            if file is None:
                continue
            events = self.table.slot_events(file.file, published)
            if not events:
                continue
            for event in events:
                if self._events.get(event.id) is not event:
                    self._publish_event(event)
            native.fast_slots(fh, published, struct.pack(f"<{len(events)}H",
                                                          *(e.id for e in events)))
            self._files[fh] = (ref, published + len(events))
        self._dirty_files.clear()

    def publish_perf(self) -> None:
        """Give the bridge the perf table again if an event or a ring changed.

        Call only once the page stores the engine made until now are queued
        (``Daemon.take_changes`` then the storer): the bridge's samples go to
        the storer after them, so a ``data_head`` it stores never covers
        records of the engine's still on their way (a reader would find them
        missing). Until then the engine writes every perf sample.
        """
        if self._perf_dirty:
            self._publish_perf()

    def _perf_changing(self) -> None:
        """An event or a ring is about to change: the bridge stops writing
        samples, and the engine takes in those it wrote, before it does."""
        self._perf_dirty = True
        if self._perf_live:
            self._perf_live = False
            native.fast_perf_revoke()
            self._take_in()

    def _publish_perf(self) -> None:
        self._perf_changing()  # the table below must be the engine's whole state
        self._perf_dirty = False
        rings, perfs = perf_table(self.engine.perf)
        packed_rings: list[bytes] = []
        announced: list[bytes] = []
        placed: dict[int, int] = {}  # index in rings -> index in the bridge's
        for index, ring in enumerate(rings):
            ino = self._inode_of(ring.path)
            if ino is not None:  # never looked up: nobody can have it mapped
                placed[index] = len(packed_rings)
                packed_rings.append(_pack_ring(ring, ino))
                announced.extend(PERF_ANNOUNCED.pack(tid, placed[index], comm.encode("latin-1"))
                                 for tid, comm in ring.announced)
        native.fast_perf(b"".join(packed_rings), PERF_RING.size,
                         b"".join(_pack_perf(perf, placed) for perf in perfs), PERF_EVENT.size,
                         b"".join(announced), PERF_ANNOUNCED.size)
        self._perf_live = True

    def _publish_array(self, index: int, array: FastArray) -> None:
        clock_id, divisor = _native_clock(array.clock)
        nr_cpus = self.engine.nr_cpus
        native.fast_array(index, array.tracing_on, array.max_entry_size,
                          array.cpumask.to_bytes((nr_cpus + 7) // 8, "little"),
                          clock_id, divisor)

    def _publish_event(self, event: UserEvent) -> None:
        fast = self.table.event(event)
        self._events[event.id] = event
        native.fast_event(fast.id, fast.enabled, fast.perf, sum(1 << i for i in fast.recorders),
                          fast.min_size,
                          b"".join(_VALIDATOR.pack(*v) for v in fast.validators))

    # -- the intake -------------------------------------------------------------------

    def drain(self) -> None:
        """Take every staged record in (the bridge calls this, trio thread)."""
        if self._take_in():
            self._on_records()

    def _take_in(self) -> int:
        taken = 0
        while (staged := native.fast_staged()) is not None:
            with staged:
                taken += self.table.take_in(staged)
                size = len(staged)
            native.fast_consumed(size)
        return taken


def _pack_ring(ring: FastRing, ino: int) -> bytes:
    return PERF_RING.pack(ring.sink, ino, ring.size, ring.head & _U64, ring.tail & _U64,
                          ring.written, ring.wakeup_at, ring.watermark, ring.events_left,
                          ring.wakeup_events, ring.writable)


def _pack_perf(perf: FastPerf, placed: dict[int, int]) -> bytes:
    ring = PERF_ENGINE if perf.ring is None else placed.get(perf.ring, PERF_ENGINE)
    clock_id, divisor = _native_clock(perf.clock)
    if divisor != 1:
        ring = PERF_ENGINE  # not a clock read in nanoseconds natively
    return PERF_EVENT.pack(perf.id, perf.sample_type, perf.event, perf.cpu, perf.tid, clock_id,
                           ring, perf.enabled, perf.inherit, perf.comm)
