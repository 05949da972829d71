"""Perf events on our events (``struct perf_event``): the perf consumer beside ftrace.

Rules:
  * An event exists from the ``perf_event_open`` we emulate (``_perf_event_attr``)
    to the release of its file. A tracepoint one attaches a ``Probe.PERF`` to its
    user event for all that time (``TRACE_REG_PERF_REGISTER`` at open), so the
    enable bit is set while a perf event exists, enabled or not.
  * A write of the event reaches every perf event recording it through the same
    ``record`` path as a trace array (``event.files``), synchronously: the sample
    is in the ring before the write returns (``user_event_perf``).
  * A per-task event records the writes of its task (by tid; with ``inherit``,
    of its whole process: children are not followed yet); a CPU-wide one, of
    its CPU. ``SET_OUTPUT`` sends an event's records into another of ours.
  * ``enable_on_exec`` on a per-task event enables it at its task's next exec
    (``perf_event_enable_on_exec``). Execs are not seen as they happen: the
    task's image (``image_of``: its AT_RANDOM bytes, new every exec) is taken
    at open, and the event enables itself at the first write of the task
    from another image. A CPU-wide event is in no task's context: never.
  * Each event is a file of ours, ``.perf/<id>``, never listed. A ring exists
    once a mapping of that file is known; the adapter finds mappings
    (``find_mapping``) when a record needs the ring and none is known.
    Without a ring a record is lost, as in the kernel.

Kernel: kernel/events/core.c (``perf_event_set_output``, ``_perf_ioctl``,
``perf_event_for_each_child``), kernel/trace/trace_event_perf.c.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable, Iterator

from ._clock import TraceClocks
from ._errors import TracefsError
from ._events import Probe, TraceEvent
from ._memory import Tgid
from ._perf_backward import BackwardBuffer
from ._perf_buffer import PerfBuffer, check_mapping
from ._perf_event_attr import Flag, Kind, PerfEventAttr
from ._perf_output import (Counts, EventIds, SampleFacts, comm_record, lost_record, read,
                           sample_record)
from ._ringbuf import Accept
from ._task import Task
from ._tree import POLLIN, POLLRDNORM, Dir, File, FileKind, Node, OpenFile, Vma

PERF_DIR = ".perf"
#: include/uapi/asm-generic/poll.h
POLLHUP = 0x10

# include/uapi/linux/perf_event.h: _IO/_IOR/_IOW('$', n, …)
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_REFRESH = 0x2402
PERF_EVENT_IOC_RESET = 0x2403
PERF_EVENT_IOC_PERIOD = 0x40082404
PERF_EVENT_IOC_SET_OUTPUT = 0x2405
PERF_EVENT_IOC_SET_FILTER = 0x40082406
PERF_EVENT_IOC_ID = 0x80082407
PERF_EVENT_IOC_SET_BPF = 0x40042408
PERF_EVENT_IOC_PAUSE_OUTPUT = 0x40042409
PERF_EVENT_IOC_QUERY_BPF = 0xC008240A
PERF_EVENT_IOC_MODIFY_ATTRIBUTES = 0x4008240B

#: attr.clockid -> our clock's name (``perf_event_set_clock``); no clockid: perf_clock.
_CLOCKS = {1: "mono", 4: "mono_raw", 7: "boot"}


def clock_name(attr: PerfEventAttr) -> str:
    if not attr.has(Flag.USE_CLOCKID):
        return "perf"
    if attr.clockid not in _CLOCKS:
        raise TracefsError(errno.EINVAL, f"clockid {attr.clockid} is not emulated")
    return _CLOCKS[attr.clockid]


class PerfEvent:
    """One emulated event; also the record sink its user event calls."""

    def __init__(self, owner: PerfEvents, event_id: int, attr: PerfEventAttr, kind: Kind,
                 event: TraceEvent | None, target: Task | None, cpu: int, owner_tgid: Tgid) -> None:
        self.owner = owner
        self.id = event_id
        self.attr = attr
        self.kind = kind
        self.event = event
        self.target = target
        self.cpu = cpu
        self.owner_tgid = owner_tgid
        self.clock = clock_name(attr)
        self.enabled = not attr.has(Flag.DISABLED) and not attr.has(Flag.ENABLE_ON_EXEC)
        #: The target's image at open while an exec is awaited (enable_on_exec).
        self.exec_awaited: bytes | None = None
        if attr.has(Flag.ENABLE_ON_EXEC) and target is not None:
            self.exec_awaited = owner.image_of(target.tgid)
        self.enabled_ns = 0
        self._enabled_at = owner.now(self.clock) if self.enabled else None
        self.count = 0
        self.lost = 0
        self.ring: PerfBuffer | None = None
        self.output: PerfEvent | None = None
        self.wakeup = False
        #: ``record()`` finds its sink as ``event_file.trace_array``.
        self.trace_array = self
        self.path = (PERF_DIR, str(event_id))

    # -- the record sink --------------------------------------------------------

    def can_record(self, length: int, cpu: int) -> bool:
        return (self.enabled or self.exec_awaited is not None) and self.cpu in (-1, cpu)

    def record(self, entry: bytes, task: Task, accept: Accept | None = None) -> None:
        target = self.target
        if target is not None:
            same = task.tgid == target.tgid if self.attr.has(Flag.INHERIT) else task.pid == target.pid
            if not same:
                return
        execed = not self.enabled
        if execed:
            if self.owner.image_of(task.tgid) in (None, self.exec_awaited):
                return
            self.exec_awaited = None
            self.set_enabled(True)
        # user_event_perf validates the entry in perf_trace_buf_alloc()'s buffer, which it
        # starts: the byte before an empty __data_loc string at offset 0 lies outside that
        # buffer, in memory we cannot know; it is taken as 0 (the string's NUL).
        if accept is not None and not accept(0):
            return
        self.count += 1
        facts = SampleFacts(pid=task.tgid, tid=task.pid, time=self.owner.now(self.clock),
                            cpu=task.cpu, entry=entry)
        ids = EventIds(id=self.id, stream_id=self.id)
        sink = self.output or self
        if execed and self.attr.has(Flag.COMM):
            # The exec's comm (perf_event_comm after perf_event_enable_on_exec);
            # without it perf names the samples by the pre-exec comm.
            comm = task.comm.encode("latin-1", "replace")
            sink.deliver(comm_record(self.attr, ids, comm, facts, exec_=True), ids, facts, self)
        sink.deliver(sample_record(self.attr, ids, facts), ids, facts, self)

    def deliver(self, record: bytes, ids: EventIds, facts: SampleFacts, source: PerfEvent) -> None:
        if self.ring is None:
            self.owner.find_mapping(self.owner_tgid, self.path)
        ring = self.ring
        if ring is None:
            source.lost += 1
            return
        lost_ids = ids

        def lost(n: int) -> bytes:
            return lost_record(source.attr, lost_ids, n, facts)

        before = ring.dropped
        changes, wakeup = ring.output(record, lambda: self.owner.read_tail(self), lost)
        source.lost += ring.dropped - before
        for offset, data in changes:
            self.owner.publish(self.path, offset, data)
        if wakeup:
            self.wakeup = True
            self.owner.generation += 1

    # -- enable state -----------------------------------------------------------

    def set_enabled(self, enabled: bool) -> None:
        if enabled == self.enabled:
            return
        now = self.owner.now(self.clock)
        if enabled:
            self._enabled_at = now
        elif self._enabled_at is not None:
            self.enabled_ns += now - self._enabled_at
            self._enabled_at = None
        self.enabled = enabled

    def counts(self) -> Counts:
        total = self.enabled_ns
        if self._enabled_at is not None:
            total += self.owner.now(self.clock) - self._enabled_at
        return Counts(value=self.count, enabled_ns=total, running_ns=total, id=self.id,
                      lost=self.lost)

    # -- the mapping ------------------------------------------------------------

    def mapped(self, vma: Vma) -> None:
        data_pages = check_mapping(vma.nr_pages, vma.shared, vma.pgoff)
        watermark = self.attr.wakeup_events if self.attr.has(Flag.WATERMARK) else None
        wakeup_events = 0 if self.attr.has(Flag.WATERMARK) else self.attr.wakeup_events
        ring = BackwardBuffer if self.attr.has(Flag.WRITE_BACKWARD) else PerfBuffer
        self.ring = ring(data_pages, writable=vma.write, wakeup_events=wakeup_events,
                               watermark=watermark)

    def unmapped(self) -> None:
        self.ring = None

    def map_read(self, offset: int, size: int) -> bytes:
        if self.ring is None:
            return bytes(size)
        return self.ring.file_bytes(offset, size)

    # -- ioctl ------------------------------------------------------------------

    def ioctl(self, cmd: int, arg: int, output: PerfEvent | None | int) -> tuple[int, bytes | None]:
        """``_perf_ioctl``; ``output``: SET_OUTPUT's target (ours, None for -1,
        or an errno when the fd is not one of ours). Returns the result and
        bytes for ``*arg``."""
        if cmd == PERF_EVENT_IOC_ENABLE:
            self.set_enabled(True)
        elif cmd == PERF_EVENT_IOC_DISABLE:
            self.set_enabled(False)
        elif cmd == PERF_EVENT_IOC_RESET:
            self.count = 0
        elif cmd == PERF_EVENT_IOC_REFRESH:
            if self.attr.has(Flag.INHERIT) or not self.attr.sample_period:
                raise TracefsError(errno.EINVAL, "refresh of a non-sampling or inherited event")
            self.set_enabled(True)
        elif cmd == PERF_EVENT_IOC_ID:
            return 0, struct.pack("=Q", self.id)
        elif cmd == PERF_EVENT_IOC_SET_OUTPUT:
            self.set_output(output)
        elif cmd == PERF_EVENT_IOC_PAUSE_OUTPUT:
            self.pause_output(bool(arg))
        elif cmd == PERF_EVENT_IOC_MODIFY_ATTRIBUTES:
            raise TracefsError(errno.EOPNOTSUPP, "only breakpoints can be modified")
        elif cmd in (PERF_EVENT_IOC_SET_FILTER, PERF_EVENT_IOC_SET_BPF, PERF_EVENT_IOC_QUERY_BPF,
                     PERF_EVENT_IOC_PERIOD):
            raise TracefsError(errno.EINVAL, "filters, BPF and periods are not emulated")
        else:
            raise TracefsError(errno.ENOTTY, f"unknown perf ioctl {cmd:#x}")
        return 0, None

    def pause_output(self, pause: bool) -> None:
        """``PERF_EVENT_IOC_PAUSE_OUTPUT`` (``rb_toggle_paused``): of the ring
        the event writes into, its own or the one ``SET_OUTPUT`` chose."""
        sink = self.output or self
        if sink.ring is None:
            self.owner.find_mapping(sink.owner_tgid, sink.path)
        if sink.ring is None or not sink.ring.size:
            raise TracefsError(errno.EINVAL, "no ring to pause")
        sink.ring.paused = pause

    def set_output(self, output: PerfEvent | None | int) -> None:
        """``perf_event_set_output``."""
        if isinstance(output, int):
            raise TracefsError(output, "SET_OUTPUT into an event we do not serve")
        if output is self:
            return
        if output is not None:
            if output.cpu != self.cpu or output.clock != self.clock:
                raise TracefsError(errno.EINVAL, "SET_OUTPUT across CPUs or clocks")
            if output.cpu == -1 and output.target != self.target:
                raise TracefsError(errno.EINVAL, "SET_OUTPUT across tasks")
            if output.attr.has(Flag.WRITE_BACKWARD) != self.attr.has(Flag.WRITE_BACKWARD):
                raise TracefsError(errno.EINVAL, "SET_OUTPUT across ring directions")
        if self.ring is not None:
            raise TracefsError(errno.EINVAL, "a mapped event keeps its ring")
        self.output = output


class PerfFile(OpenFile):
    """The perf event's fd, as the client holds it."""

    kind = FileKind.MAPPABLE_PIPE

    def __init__(self, perf: PerfEvent) -> None:
        self.perf = perf

    def read(self, offset: int, size: int) -> bytes:
        return read(self.perf.attr.read_format, [self.perf.counts()], size)

    def poll(self) -> int:
        """``perf_poll``: without a ring, POLLHUP; else the ring's wakeup,
        taken (``atomic_xchg(&rb->poll, 0)``): POLLIN once per wakeup."""
        sink = self.perf.output or self.perf
        if sink.ring is None:
            self.perf.owner.find_mapping(sink.owner_tgid, sink.path)
        if sink.ring is None:
            return POLLHUP
        woke, sink.wakeup = sink.wakeup, False
        return POLLIN | POLLRDNORM if woke else 0

    def release(self) -> None:
        self.perf.owner.close(self.perf)  # idempotent: at the last flush, then at release

    def released_at_last_close(self) -> Tgid | None:
        # perf_test (6.12) checks the enable bit cleared as soon as close() returns.
        return self.perf.owner_tgid


class PerfEvents:
    """Every emulated event of one tracefs.

    Args:
        clocks: the clocks samples are stamped with.
        publish: stores ``(path, offset, bytes)`` into clients' mappings.
        find_mapping: the adapter looks for ``tgid``'s mapping of ``path``
            and reports it (``mapped``) before returning.
        read_tail: the reader's ``data_tail`` of a writable ring (None: unknown).
        image_of: a process's current image, as bytes that differ after an
            exec (None: unknown).
    """

    def __init__(self, clocks: TraceClocks,
                 publish: Callable[[tuple[str, ...], int, bytes], None],
                 enable_listeners: list[Callable[[TraceEvent], None]]) -> None:
        self._clocks = clocks
        self.publish = publish
        #: Told when an event gains or loses a perf probe (the fast path
        #: leaves such events' writes to the engine).
        self._enable_listeners = enable_listeners
        self.find_mapping: Callable[[Tgid, tuple[str, ...]], None] = lambda tgid, path: None
        self.read_tail: Callable[[PerfEvent], int | None] = lambda perf: None
        #: What tells a process's exec'd images apart (None: unknown).
        self.image_of: Callable[[Tgid], bytes | None] = lambda tgid: None
        self._events: dict[int, PerfEvent] = {}
        self._next_id = 1
        #: Moves whenever a ring woke its readers.
        self.generation = 0

    def now(self, clock: str) -> int:
        return self._clocks[clock].read()

    def open(self, attr: PerfEventAttr, kind: Kind, event: TraceEvent | None,
             target: Task | None, cpu: int, owner: Tgid) -> PerfEvent:
        perf = PerfEvent(self, self._next_id, attr, kind, event, target, cpu, owner)
        self._next_id += 1
        self._events[perf.id] = perf
        if event is not None:
            event.files.append(perf)  # type: ignore[arg-type]
            event.attach(Probe.PERF)
            self._changed(event)
        return perf

    def _changed(self, event: TraceEvent) -> None:
        for listener in self._enable_listeners:
            listener(event)

    def close(self, perf: PerfEvent) -> None:
        if self._events.pop(perf.id, None) is None:
            return
        for other in self._events.values():
            if other.output is perf:
                other.output = None
        if perf.event is not None:
            perf.event.files.remove(perf)  # type: ignore[arg-type]
            perf.event.detach(Probe.PERF)
            self._changed(perf.event)

    def by_path(self, name: str) -> PerfEvent | None:
        return self._events.get(int(name)) if name.isdigit() else None

    def __iter__(self) -> Iterator[PerfEvent]:
        return iter(self._events.values())

    def node(self) -> Dir:
        """``.perf/``: looked up, never listed."""
        return _UnlistedDir(PERF_DIR, self._file)

    def _file(self, name: str) -> Node | None:
        perf = self.by_path(name)
        if perf is None:
            return None
        return File(name, 0o600, lambda flags, task: PerfFile(perf), FileKind.MAPPABLE_PIPE)


class PerfRoot(Dir):
    """The root directory, which also finds ``.perf`` (never listed)."""

    __slots__ = ("_perf",)

    def __init__(self, entries: Callable[[], Iterator[Node]], perf: Dir, mode: int) -> None:
        super().__init__("", entries, mode=mode)
        self._perf = perf

    def lookup(self, name: str) -> Node | None:
        return self._perf if name == PERF_DIR else super().lookup(name)


class _UnlistedDir(Dir):
    __slots__ = ("_find",)

    def __init__(self, name: str, find: Callable[[str], Node | None]) -> None:
        super().__init__(name, lambda: (), mode=0o700)
        self._find = find

    def lookup(self, name: str) -> Node | None:
        return self._find(name)
