"""Perf events on our events (``struct perf_event``): the perf consumer beside ftrace.

Rules:
  * An event exists from the ``perf_event_open`` we emulate (``_perf_event_attr``)
    to the release of its file. A tracepoint one attaches a ``Probe.PERF`` to its
    user event for all that time (``TRACE_REG_PERF_REGISTER`` at open), so the
    enable bit is set while a perf event exists, enabled or not.
  * A write of the event reaches every perf event recording it through the same
    ``record`` path as a trace array (``event.files``), synchronously: the sample
    is in the ring before the write returns (``user_event_perf``).
  * A record that does not fit a writable ring behind the tail last read
    needs the reader's ``data_tail`` now, which the adapter reads off the
    engine's thread (the reader's page may be one that never faults in):
    ``read_tail`` raises ``TailAwaited``, and the record, and every later
    one for that ring, waits in order (``waiting``) until ``tail_read``
    places them as a read at once would have. The adapter answers the
    write once they are placed.
  * A per-task event records the writes of its task (by tid; with ``inherit``,
    of the threads and processes it creates while the event exists:
    ``_perf_inherit``); a CPU-wide one, of its CPU. ``SET_OUTPUT`` sends an
    event's records into another of ours; a real event's into one of ours is
    accepted and its output dropped (the kernel cannot write our ring), but
    the side-band it asked for (``foreign_side_band``) is written by us.
  * Before a sample, the side-band records its ring owes the reader (FORK,
    COMM: ``_perf_side_band``); an EXIT when a followed process is gone
    (``exited``), after which a target with nothing left to follow makes
    ``poll()`` say POLLHUP (``is_event_hup``).
  * Budgets per user (``owner_uid``): ``EVENTS_MAX`` live events (more:
    ENOMEM, as a failed ``perf_event_alloc``), and ``RING_BYTES_MAX`` bytes of
    rings; a mapping past that gets no ring (its records go nowhere and
    are not counted lost, as without a mapping): mmap never reaches us to
    be refused.
  * ``enable_on_exec`` on a per-task event enables it at its task's next exec
    (``perf_event_enable_on_exec``). Execs are not seen as they happen: the
    task's image (``image_of``: its AT_RANDOM bytes, new every exec) is taken
    at open, and the event enables itself at the first write of the task
    from another image. A CPU-wide event is in no task's context: never.
  * Each event is a file of ours, ``.perf/<id>``, never listed. A ring exists
    once a mapping of that file is known; the adapter finds mappings
    (``find_mapping``) when a record needs the ring and none is known.
    Without a ring a record goes nowhere and is not counted lost (the
    kernel's ``__perf_output_begin`` leaves before counting when the event
    has no ``rb``): ``read()`` still counts it in the value.

Kernel: kernel/events/core.c (``perf_event_set_output``, ``_perf_ioctl``,
``perf_event_for_each_child``), kernel/trace/trace_event_perf.c.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ._clock import TraceClocks
from ._errors import TracefsError
from ._events import Probe, TraceEvent
from ._memory import Tgid
from ._perf_backward import BackwardBuffer
from ._perf_buffer import PAGE_SIZE, PerfBuffer, TailAwaited, check_mapping
from ._perf_event_attr import SIDE_BAND, Flag, Kind, PerfEventAttr
from ._perf_inherit import Family, Inheritance
from ._perf_output import Counts, EventIds, SampleFacts, lost_record, read, sample_record
from ._perf_side_band import PERF_RECORD_EXIT, TASK_MATCH, Lineage, SideBand, task_record
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
#: include/uapi/asm-generic/poll.h
POLLHUP = 0x10
#: Live events one user may have (ours, not the kernel's: see docs/perf.md).
EVENTS_MAX = 16384
#: Bytes of rings one user's mappings may make us hold.
RING_BYTES_MAX = 256 << 20


def clock_name(attr: PerfEventAttr) -> str:
    if not attr.has(Flag.USE_CLOCKID):
        return "perf"
    if attr.clockid not in _CLOCKS:
        raise TracefsError(errno.EINVAL, f"clockid {attr.clockid} is not emulated")
    return _CLOCKS[attr.clockid]


class PerfEvent:
    """One emulated event; also the record sink its user event calls."""

    def __init__(self, owner: PerfEvents, event_id: int, attr: PerfEventAttr, kind: Kind,
                 event: TraceEvent | None, target: Task | None, cpu: int, owner_tgid: Tgid,
                 owner_uid: int = 0) -> None:
        self.owner = owner
        self.id = event_id
        self.attr = attr
        self.kind = kind
        self.event = event
        self.target = target
        self.cpu = cpu
        self.owner_tgid = owner_tgid
        self.owner_uid = owner_uid
        self.inheritance: Inheritance | None = None
        if target is not None:
            inherit = attr.has(Flag.INHERIT)
            family = owner.family(target.tgid) if inherit else Family(frozenset(), frozenset())
            self.inheritance = Inheritance(target, inherit, family, owner.ancestry)
        #: Processes followed (inherit) that have not exited, target's included.
        self.alive: set[Tgid] = {target.tgid} if target is not None else set()
        #: The target task is gone (it exited).
        self.target_gone = False
        #: Side-band bits of real events redirected into this ring.
        self.foreign_side_band = 0
        self.side_band = SideBand(owner.image_of)
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
        #: Records for the ring waiting, in order, for the reader's ``data_tail``
        #: (``TailAwaited``; :meth:`tail_read`).
        self.waiting: list[_Waiting] = []
        self.output: PerfEvent | None = None
        self.wakeup = False
        #: ``record()`` finds its sink as ``event_file.trace_array``.
        self.trace_array = self
        self.path = (PERF_DIR, str(event_id))

    # -- the record sink --------------------------------------------------------

    def can_record(self, length: int, cpu: int) -> bool:
        return (self.enabled or self.exec_awaited is not None) and self.cpu in (-1, cpu)

    def record(self, entry: bytes, task: Task, accept: Accept | None = None) -> None:
        forks: list[Lineage] = []
        if self.inheritance is not None:
            followed = self.inheritance.follows(task)
            if followed is None:
                return
            forks = followed
            for lineage in followed:
                if lineage.pid not in self.alive and lineage.pid == lineage.tid:
                    self.alive.add(lineage.pid)
                    self.owner.follow(lineage.pid)
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
        # With enable_on_exec the first of these is the exec's COMM, which the
        # kernel writes after enabling (perf_event_comm after
        # perf_event_enable_on_exec): perf then names the workload.
        flags = (self.attr.flags | sink.foreign_side_band) & SIDE_BAND
        if flags:
            self.owner.before_change()  # what the ring's reader was told changes
            for record in sink.side_band.before_sample(flags, self.attr, ids, facts, task.comm,
                                                       forks):
                sink.deliver(record, ids, facts, self)
        sink.deliver(sample_record(self.attr, ids, facts), ids, facts, self)

    def exited(self, lineage: Lineage) -> None:
        """A followed process is gone (``perf_event_exit_task``)."""
        if lineage.pid not in self.alive:
            return
        self.owner.before_change()
        self.alive.discard(lineage.pid)
        sink = self.output or self
        flags = (self.attr.flags | sink.foreign_side_band) & TASK_MATCH
        if flags and sink.ring is not None:
            ids = EventIds(id=self.id, stream_id=self.id)
            facts = SampleFacts(pid=lineage.pid, tid=lineage.tid, time=self.owner.now(self.clock),
                                cpu=max(self.cpu, 0), entry=b"")
            sink.deliver(task_record(PERF_RECORD_EXIT, self.attr, ids, lineage, facts), ids,
                         facts, self)
        sink.side_band.forget(lineage.tid)
        if self.target is not None and lineage.pid == self.target.tgid:
            self.target_gone = True
        if self.hup():
            self.owner.generation += 1

    def hup(self) -> bool:
        """``is_event_hup``: the task is gone and no task it created is followed."""
        return self.target_gone and not self.alive

    def deliver(self, record: bytes, ids: EventIds, facts: SampleFacts, source: PerfEvent) -> None:
        if self.ring is None:
            self.owner.find_mapping(self.owner_tgid, self.path)
        ring = self.ring
        if ring is None:
            return  # __perf_output_begin: no rb, nothing counted (not even lost)
        lost_ids = ids

        def lost(n: int) -> bytes:
            return lost_record(source.attr, lost_ids, n, facts)

        waiting = _Waiting(ring, record, lost, source, ring.paused)
        try:
            if self.waiting:
                # Behind records waiting for the tail: their place decides this one's.
                self.tail_read(self.owner.read_tail(self))
            self._place(waiting, lambda: self.owner.read_tail(self))
        except TailAwaited:
            self.waiting.append(waiting)

    def tail_read(self, tail: int | None) -> None:
        """The reader's ``data_tail`` the adapter said would come
        (``TailAwaited``): the records that waited for it are placed (or
        lost) as they would have been had it been read at once; None:
        unreadable, they overwrite. Those of a ring unmapped meanwhile go
        nowhere."""
        waiting, self.waiting = self.waiting, []
        for record in waiting:
            if record.ring is self.ring:
                self._place(record, lambda: tail)

    def _place(self, waiting: _Waiting, read_tail: Callable[[], int | None]) -> None:
        self.owner.before_change()
        ring, source = waiting.ring, waiting.source
        before = ring.dropped
        changes, wakeup = ring.output(waiting.record, read_tail, waiting.lost,
                                      paused=waiting.paused)
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
        self.owner.before_change()
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
        self.owner.before_change()
        if not self.owner.reserve_ring(self, data_pages * PAGE_SIZE):
            self.ring = None
            return
        watermark = self.attr.wakeup_events if self.attr.has(Flag.WATERMARK) else None
        wakeup_events = 0 if self.attr.has(Flag.WATERMARK) else self.attr.wakeup_events
        ring = BackwardBuffer if self.attr.has(Flag.WRITE_BACKWARD) else PerfBuffer
        self.ring = ring(data_pages, writable=vma.write, wakeup_events=wakeup_events,
                               watermark=watermark)

    def unmapped(self) -> None:
        self.owner.before_change()
        self.owner.reserve_ring(self, 0)
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
        self.owner.before_change()
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
            # hw.target is the task itself: its thread, not the facts (CPU, comm)
            # a Task carries from the moment each event was opened.
            if output.cpu == -1 and _tid(output.target) != _tid(self.target):
                raise TracefsError(errno.EINVAL, "SET_OUTPUT across tasks")
            if output.attr.has(Flag.WRITE_BACKWARD) != self.attr.has(Flag.WRITE_BACKWARD):
                raise TracefsError(errno.EINVAL, "SET_OUTPUT across ring directions")
        if self.ring is not None:
            raise TracefsError(errno.EINVAL, "a mapped event keeps its ring")
        self.owner.before_change()
        self.output = output
        if output is not None:
            # The ring now carries what this event asked to be told (an
            # emulated side-band dummy's COMM, FORK, EXIT).
            output.foreign_side_band |= self.attr.flags & SIDE_BAND


class _Waiting(NamedTuple):
    """A record for ``ring`` that waits for the reader's ``data_tail``."""

    ring: PerfBuffer
    record: bytes
    lost: Callable[[int], bytes]
    source: PerfEvent
    #: The ring was paused when the record was written (a PAUSE_OUTPUT that
    #: comes while it waits is later than its write: it does not lose it).
    paused: bool


def _tid(task: Task | None) -> int | None:
    return None if task is None else task.pid


class PerfFile(OpenFile):
    """The perf event's fd, as the client holds it."""

    kind = FileKind.MAPPABLE_PIPE

    def __init__(self, perf: PerfEvent) -> None:
        self.perf = perf

    def read(self, offset: int, size: int) -> bytes:
        return read(self.perf.attr.read_format, [self.perf.counts()], size)

    def poll(self) -> int:
        """``perf_poll``: POLLHUP once a per-task target is gone, or without a
        ring; else the ring's wakeup, taken (``atomic_xchg(&rb->poll, 0)``):
        POLLIN once per wakeup."""
        if self.perf.hup():
            return POLLHUP
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
        read_tail: the reader's ``data_tail`` of a writable ring (None:
            unknown); raises ``TailAwaited`` when it comes later, through
            the event's ``tail_read``.
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
        #: A process's threads and child processes now (for ``inherit``).
        self.family: Callable[[Tgid], Family] = lambda tgid: Family(frozenset(), frozenset())
        #: A process, its parent, its parent's parent, … (as far as known).
        self.ancestry: Callable[[Tgid], list[Tgid]] = lambda tgid: [tgid]
        #: Told of every process an event starts following (its exit is awaited).
        self.follow: Callable[[Tgid], None] = lambda tgid: None
        #: Called before an event or a ring changes: the fast path, which
        #: writes samples into rings from a copy of their state, stops and
        #: hands in what it wrote (:meth:`took`) first.
        self.before_change: Callable[[], None] = lambda: None
        #: uid -> live events; uid -> ring bytes held; event id -> its ring's bytes.
        self._events_of: dict[int, int] = {}
        self._ring_bytes: dict[int, int] = {}
        self._ring_of: dict[int, int] = {}
        self._events: dict[int, PerfEvent] = {}
        self._next_id = 1
        #: Moves whenever a ring woke its readers.
        self.generation = 0

    def any_open(self) -> bool:
        """Is a perf event of ours open (a file whose close may wait for us)?"""
        return bool(self._events)

    def now(self, clock: str) -> int:
        return self._clocks[clock].read()

    def open(self, attr: PerfEventAttr, kind: Kind, event: TraceEvent | None,
             target: Task | None, cpu: int, owner: Tgid, uid: int = 0) -> PerfEvent:
        if self._events_of.get(uid, 0) >= EVENTS_MAX:
            raise TracefsError(errno.ENOMEM, f"uid {uid} has {EVENTS_MAX} perf events")
        self.before_change()
        perf = PerfEvent(self, self._next_id, attr, kind, event, target, cpu, owner, uid)
        self._events_of[uid] = self._events_of.get(uid, 0) + 1
        self._next_id += 1
        self._events[perf.id] = perf
        if target is not None:
            self.follow(target.tgid)
        if event is not None:
            event.files.append(perf)  # type: ignore[arg-type]
            event.attach(Probe.PERF)
            self._changed(event)
        return perf

    def _changed(self, event: TraceEvent) -> None:
        for listener in self._enable_listeners:
            listener(event)

    def close(self, perf: PerfEvent) -> None:
        if perf.id not in self._events:
            return
        self.before_change()
        del self._events[perf.id]
        self.reserve_ring(perf, 0)
        left = self._events_of.pop(perf.owner_uid) - 1
        if left:
            self._events_of[perf.owner_uid] = left
        for other in self._events.values():
            if other.output is perf:
                other.output = None
        if perf.event is not None:
            perf.event.files.remove(perf)  # type: ignore[arg-type]
            perf.event.detach(Probe.PERF)
            self._changed(perf.event)

    def reserve_ring(self, perf: PerfEvent, size: int) -> bool:
        """Hold ``size`` bytes of ring for ``perf`` (0: none) within its user's budget."""
        uid = perf.owner_uid
        held = self._ring_bytes.get(uid, 0) - self._ring_of.pop(perf.id, 0)
        fits = held + size <= RING_BYTES_MAX
        if fits and size:
            self._ring_of[perf.id] = size
            held += size
        if held:
            self._ring_bytes[uid] = held
        else:
            self._ring_bytes.pop(uid, None)
        return fits

    def redirected(self, perf: PerfEvent, side_band: int) -> None:
        """A real event's ``SET_OUTPUT`` into ``perf``: accepted, its output
        dropped; the side-band records it asked for we write ourselves."""
        self.before_change()
        perf.foreign_side_band |= side_band & SIDE_BAND

    def took(self, source: int, sink: int, record: bytes) -> None:
        """A sample the fast path wrote for event ``source`` into ``sink``'s
        ring (stored already): counted, and the ring as ``deliver`` would
        have left it. It wrote only while neither event nor ring changed
        (``before_change``), so both are as it saw them."""
        self._events[source].count += 1
        perf = self._events[sink]
        assert perf.ring is not None
        if perf.ring.took(record):
            perf.wakeup = True
            self.generation += 1

    def exited(self, lineage: Lineage) -> None:
        """A process is gone: every event following it says so."""
        for perf in list(self._events.values()):
            perf.exited(lineage)

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
