"""Which perf samples the native fast path may write itself, and the ones it wrote.

A write of an event that a perf event of ours records needs its sample in
the ring before the write returns. The fast path (``fuse/_native/fastpath.c``)
writes it from a description of each perf event and of each ring this
module gives; the engine takes the samples it wrote in (:func:`take_in`)
as it takes staged trace records in.

Rules:
  * The engine keeps the kernel's rules: a perf event is described as
    writable natively only when its samples can be the plain case of
    :meth:`PerfEvent.record <._perf_events.PerfEvent.record>` and
    :meth:`PerfBuffer.output <._perf_buffer.PerfBuffer.output>`: enabled
    (not awaiting an exec), a ``sample_type`` of fixed fields and RAW only
    (:data:`FAST_SAMPLE_TYPES`), a forward ring that is mapped, not paused,
    with no LOST record owed and nothing waiting for its tail. The fast path
    then decides per write what stays the engine's: with ``inherit``, a
    write by any thread but the event's own (it may be one the event
    follows, owed FORK records); with COMM asked (by the event, or by a real
    event redirected into its ring), a writer its ring's reader was not told
    about under its current comm (:attr:`FastRing.announced`: the last
    :data:`ANNOUNCED_FAST`); a sample that does not fit behind the tail last
    read, or that is due a wakeup. Anything else matching a write sends
    that write to the engine.
  * The description is a copy: the fast path writes rings from it (their
    head, the wakeup counters), so it must be withdrawn before the engine
    changes an event or a ring, and what the fast path wrote taken in
    first (``PerfEvents.before_change``); it is given again afterwards.
  * Perf samples go through the same staging ring as trace records, each
    with its source event (whose count it is) and the event owning the ring.

Kernel: kernel/trace/trace_events_user.c (``user_event_perf``),
kernel/events/core.c (``perf_output_sample``), kernel/events/ring_buffer.c
(``__perf_output_begin``).
"""

from __future__ import annotations

import struct

import msgspec

from ._perf_buffer import PerfBuffer
from ._perf_event_attr import Flag, Sample
from ._perf_events import PerfEvent, PerfEvents

#: Threads per ring the fast path knows were announced (the last ones).
ANNOUNCED_FAST = 64
#: What ``fastpath.c`` writes of a sample: the fixed fields and RAW.
FAST_SAMPLE_TYPES = int(Sample.IDENTIFIER | Sample.IP | Sample.TID | Sample.TIME | Sample.ADDR
                        | Sample.ID | Sample.STREAM_ID | Sample.CPU | Sample.PERIOD | Sample.RAW)

# A staged perf sample, written by fuse/_native/fastpath.c (which checks this
# layout with _Static_assert); its first eight bytes are a staged record's:
#
# struct staged_perf {
#         __u32 size;          /* of this staged record, padding included */
#         __u16 __pad0;
#         __u8  array;         /* STAGED_PERF */
#         __u8  __pad1;
#         __u64 source;        /* the perf event that recorded (its count) */
#         __u64 sink;          /* the perf event whose ring it went to */
#         __u32 len;           /* bytes of the record */
#         __u8  __pad2[36];
#         __u8  record[];      /* the PERF_RECORD_SAMPLE, as stored */
# };
STAGED_PERF = struct.Struct("<I2xBxQQI36x")
assert STAGED_PERF.size == 64
#: ``array`` of a staged perf sample.
STAGED_PERF_ARRAY = 0xFE


class FastRing(msgspec.Struct, frozen=True, kw_only=True):
    """A ring the fast path may write, in its state now (``PerfBuffer``)."""

    #: The perf event owning it, and its file.
    sink: int
    path: tuple[str, ...]
    size: int
    head: int
    tail: int
    writable: bool
    written: int
    wakeup_at: int
    watermark: int
    events_left: int
    wakeup_events: int
    #: (tid, comm) of the threads its reader was last told about (COMM records).
    announced: tuple[tuple[int, str], ...]


class FastPerf(msgspec.Struct, frozen=True, kw_only=True):
    """A perf event of ours on a user event, as a write's decision needs it."""

    id: int
    #: The user event it records.
    event: int
    sample_type: int
    #: -1: any CPU.
    cpu: int
    #: The thread it follows; 0: any (a CPU-wide event).
    tid: int
    #: The trace clock its samples' TIME reads.
    clock: str
    #: ``can_record``'s first half: enabled, or awaiting an exec.
    enabled: bool
    #: It follows the threads its thread creates: theirs are the engine's.
    inherit: bool
    #: It asks for COMM records (itself, or a real event redirected into its ring).
    comm: bool
    #: Its ring's index in the table; None: the engine writes its samples.
    ring: int | None


def perf_table(events: PerfEvents) -> tuple[list[FastRing], list[FastPerf]]:
    """Every perf event of ours on an event, and the rings the fast path may write."""
    rings: list[FastRing] = []
    index: dict[int, int] = {}
    perfs = []
    for perf in events:
        if perf.event is None:
            continue
        sink = perf.output or perf
        ring = None
        if _plain(perf, sink):
            assert sink.ring is not None
            if sink.id not in index:
                index[sink.id] = len(rings)
                rings.append(_ring(sink, sink.ring))
            ring = index[sink.id]
        inherit = perf.inheritance is not None and perf.inheritance.inherit
        comm = bool((perf.attr.flags | sink.foreign_side_band) & Flag.COMM)
        perfs.append(FastPerf(id=perf.id, event=perf.event.id, sample_type=perf.attr.sample_type,
                              cpu=perf.cpu, tid=0 if perf.target is None else perf.target.pid,
                              clock=perf.clock, inherit=inherit, comm=comm,
                              enabled=perf.enabled or perf.exec_awaited is not None, ring=ring))
    return rings, perfs


def _plain(perf: PerfEvent, sink: PerfEvent) -> bool:
    """Is every sample of ``perf`` the plain case (module rules)?"""
    ring = sink.ring
    return (perf.exec_awaited is None
            and not perf.attr.sample_type & ~FAST_SAMPLE_TYPES
            and type(ring) is PerfBuffer and ring.size > 0 and not ring.paused
            and not ring.lost and not sink.waiting
            and not perf.attr.has(Flag.WRITE_BACKWARD))


def _ring(sink: PerfEvent, ring: PerfBuffer) -> FastRing:
    wakeup = ring.wakeup_state()
    return FastRing(sink=sink.id, path=sink.path, size=ring.size, head=ring.head, tail=ring.tail,
                    writable=ring.writable, written=wakeup.written, wakeup_at=wakeup.wakeup_at,
                    watermark=wakeup.watermark, events_left=wakeup.events_left,
                    wakeup_events=wakeup.wakeup_events,
                    announced=tuple(sink.side_band.recent(ANNOUNCED_FAST)))


def take_in(events: PerfEvents, staged: memoryview, off: int) -> None:
    """The staged perf sample at ``off``: counted, and in its ring."""
    _, _, source, sink, length = STAGED_PERF.unpack_from(staged, off)
    start = off + STAGED_PERF.size
    events.took(source, sink, bytes(staged[start:start + length]))
