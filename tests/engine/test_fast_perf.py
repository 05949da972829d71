"""What the fast path may write of perf samples, and the samples it wrote taken in.

* The table describes as natively writable exactly the plain case of
  ``PerfEvent.record`` and ``PerfBuffer.output`` (``_fast_perf``'s rules); every
  other perf event sends the writes it matches to the engine.
* A staged sample taken in leaves the event's count and its ring (head, bytes,
  wakeup counters) as the engine's own ``record`` of that write would.
* Every change to an event or a ring first calls ``before_change`` (the fast
  path's copy is withdrawn before it is stale).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.engine.synth_oracle import new_tracefs
from tracefs_fuse.engine._fast_path import FastPath
from tracefs_fuse.engine._fast_perf import (ANNOUNCED_FAST, FAST_SAMPLE_TYPES, STAGED_PERF,
                                            STAGED_PERF_ARRAY, perf_table)
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._perf_event_attr import Flag, Kind, Sample, copy_attr
from tracefs_fuse.engine._perf_events import PerfEvent
from tracefs_fuse.engine._perf_output import EventIds, SampleFacts, sample_record
from tracefs_fuse.engine._perf_side_band import Lineage
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._tree import Vma
from tracefs_fuse.engine._user_events import UserEvent

from .test_perf import attr_bytes

WRITER = Task(pid=7, tgid=Tgid(7), cpu=1, comm="w")
ENTRY = b"\x01\x00\x00\x00\x07\x00\x00\x00" + b"payload!"
PLAIN = int(Sample.IDENTIFIER | Sample.TID | Sample.TIME | Sample.CPU | Sample.RAW)


def event_of(tracefs: Tracefs) -> UserEvent:
    return tracefs.registry.create_persistent("fp_perf u64 a", Task(pid=1, tgid=Tgid(1),
                                                                    perfmon=True))


def open_perf(tracefs: Tracefs, *, sample_type: int = PLAIN, flags: int = 0, wakeup: int = 0,
              target: Task | None = WRITER, cpu: int = -1, pages: int = 2,
              writable: bool = False) -> PerfEvent:
    attr = copy_attr(attr_bytes(sample_type=sample_type, flags=flags, wakeup=wakeup))
    perf = tracefs.perf.open(attr, Kind.TRACEPOINT, event_of(tracefs), target, cpu, Tgid(7))
    if pages:
        perf.mapped(Vma(pgoff=0, nr_pages=pages, write=writable, execute=False, shared=True))
    return perf


def lost_owed(perf: PerfEvent) -> None:
    assert perf.ring is not None
    perf.ring.lost = 1


def paused(perf: PerfEvent) -> None:
    perf.pause_output(True)


def redirected(perf: PerfEvent) -> None:
    perf.owner.redirected(perf, int(Flag.COMM))


# What is done to a fresh perf event; whether its samples may be natively
# written; (tid, enabled, inherit, comm) as described.
CASES: list[tuple[str, dict[str, object], Callable[[PerfEvent], None] | None, bool,
                  tuple[int, bool, bool, bool]]] = [
    ("plain, per task", {}, None, True, (7, True, False, False)),
    ("plain, CPU-wide", {"target": None, "cpu": 1}, None, True, (0, True, False, False)),
    ("every fast field", {"sample_type": FAST_SAMPLE_TYPES}, None, True,
     (7, True, False, False)),
    ("PERF_SAMPLE_READ", {"sample_type": PLAIN | Sample.READ}, None, False,
     (7, True, False, False)),
    ("never mapped", {"pages": 0}, None, False, (7, True, False, False)),
    ("no data pages", {"pages": 1}, None, False, (7, True, False, False)),
    ("write_backward", {"flags": Flag.WRITE_BACKWARD}, None, False, (7, True, False, False)),
    ("inherit: its own thread's writes", {"flags": Flag.INHERIT}, None, True,
     (7, True, True, False)),
    ("awaiting its exec", {"flags": Flag.DISABLED | Flag.ENABLE_ON_EXEC}, None, False,
     (7, True, False, False)),
    ("disabled", {"flags": Flag.DISABLED}, None, True, (7, False, False, False)),
    ("its own COMM records", {"flags": Flag.COMM}, None, True, (7, True, False, True)),
    ("TASK records: none before its own thread's samples", {"flags": Flag.TASK}, None, True,
     (7, True, False, False)),
    ("COMM asked by a real event redirected into it", {}, redirected, True,
     (7, True, False, True)),
    ("a LOST record owed", {"writable": True}, lost_owed, False, (7, True, False, False)),
    ("paused", {}, paused, False, (7, True, False, False)),
]


@pytest.mark.parametrize(("opened", "then", "native", "described"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_table_says_what_is_plain(opened: dict[str, object],
                                      then: Callable[[PerfEvent], None] | None, native: bool,
                                      described: tuple[int, bool, bool, bool]) -> None:
    tracefs = new_tracefs()
    tracefs.perf.image_of = lambda tgid: b"image"
    perf = open_perf(tracefs, **opened)  # type: ignore[arg-type]
    if then is not None:
        then(perf)
    rings, perfs = perf_table(tracefs.perf)
    assert len(perfs) == 1
    fast = perfs[0]
    assert (fast.ring is not None, (fast.tid, fast.enabled, fast.inherit, fast.comm)) == (
        native, described)
    assert len(rings) == native
    if native:
        ring = perf.ring
        assert ring is not None
        assert (rings[0].sink, rings[0].size, rings[0].head) == (perf.id, ring.size, ring.head)


def test_a_ring_says_whom_its_reader_was_told_about() -> None:
    tracefs = new_tracefs()
    perf = open_perf(tracefs, flags=Flag.COMM, target=None, cpu=1)
    for tid in range(ANNOUNCED_FAST + 2):
        perf.record(ENTRY, Task(pid=100 + tid, tgid=Tgid(100), cpu=1, comm=f"t{tid}"))
    perf.record(ENTRY, Task(pid=100, tgid=Tgid(100), cpu=1, comm="renamed"))
    rings, _ = perf_table(tracefs.perf)
    announced = rings[0].announced
    assert len(announced) == ANNOUNCED_FAST
    assert announced[-1] == (100, "renamed")  # announced again under its new name
    assert announced[0] == (103, "t3")  # the oldest ones left out: the engine's


def test_events_sharing_a_ring_share_its_description() -> None:
    tracefs = new_tracefs()
    leader = open_perf(tracefs)
    member = open_perf(tracefs, pages=0)
    member.set_output(leader)
    rings, perfs = perf_table(tracefs.perf)
    assert [p.ring for p in perfs] == [0, 0] and [r.sink for r in rings] == [leader.id]


def staged(source: PerfEvent, sink: PerfEvent, record: bytes) -> bytes:
    size = (STAGED_PERF.size + len(record) + 7) & ~7
    return (STAGED_PERF.pack(size, STAGED_PERF_ARRAY, source.id, sink.id, len(record))
            + record + bytes(size - STAGED_PERF.size - len(record)))


def ring_state(perf: PerfEvent) -> tuple[object, ...]:
    ring = perf.ring
    assert ring is not None
    return (perf.count, ring.head, bytes(ring.data), ring.wakeup_state(), perf.wakeup,
            ring.file_bytes(0, 8192))


@pytest.mark.parametrize("writes", [1, 5, 200])  # 200: the ring wraps
@pytest.mark.parametrize("wakeup", [0, 3])
def test_a_staged_sample_leaves_what_record_would(writes: int, wakeup: int) -> None:
    engine, fast = new_tracefs(), new_tracefs()
    by_engine = open_perf(engine, wakeup=wakeup)
    by_fast = open_perf(fast, wakeup=wakeup)
    engine.perf.now = fast.perf.now = lambda clock: 1234  # type: ignore[method-assign]
    stages = b""
    for _ in range(writes):
        by_engine.record(ENTRY, WRITER)
        facts = SampleFacts(pid=WRITER.tgid, tid=WRITER.pid, time=1234, cpu=WRITER.cpu,
                            entry=ENTRY)
        record = sample_record(by_fast.attr, EventIds(id=by_fast.id, stream_id=by_fast.id),
                               facts)
        stages += staged(by_fast, by_fast, record)
    taken = FastPath((fast.top,), fast.perf).take_in(memoryview(stages))
    assert taken == writes
    assert ring_state(by_fast) == ring_state(by_engine)


def test_a_staged_sample_counts_for_its_source_and_fills_its_sinks_ring() -> None:
    tracefs = new_tracefs()
    leader = open_perf(tracefs)
    member = open_perf(tracefs, pages=0)
    member.set_output(leader)
    FastPath((tracefs.top,), tracefs.perf).take_in(memoryview(staged(member, leader, b"r" * 16)))
    assert (member.count, leader.count) == (1, 0)
    assert leader.ring is not None and leader.ring.head == 16


# Each change the fast path's copy must not outlive, on a mapped plain event.
CHANGES: list[tuple[str, Callable[[Tracefs, PerfEvent], object]]] = [
    ("open", lambda tracefs, perf: open_perf(tracefs, pages=0)),
    ("close", lambda tracefs, perf: tracefs.perf.close(perf)),
    ("mapped", lambda tracefs, perf: perf.mapped(Vma(pgoff=0, nr_pages=2, write=False,
                                                     execute=False, shared=True))),
    ("unmapped", lambda tracefs, perf: perf.unmapped()),
    ("disabled", lambda tracefs, perf: perf.set_enabled(False)),
    ("paused", lambda tracefs, perf: perf.pause_output(True)),
    ("SET_OUTPUT", lambda tracefs, perf: open_perf(tracefs, pages=0).set_output(perf)),
    ("a real event redirected into it", lambda tracefs, perf: tracefs.perf.redirected(perf, 0)),
    ("a sample the engine writes", lambda tracefs, perf: perf.record(ENTRY, WRITER)),
    ("a process it follows exits", lambda tracefs, perf: perf.exited(
        Lineage(pid=WRITER.tgid, tid=WRITER.pid, ppid=1, ptid=1))),
]


@pytest.mark.parametrize("change", [c[1] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_every_change_first_withdraws_the_fast_paths_copy(
        change: Callable[[Tracefs, PerfEvent], object]) -> None:
    tracefs = new_tracefs()
    perf = open_perf(tracefs)
    calls: list[int] = []
    tracefs.perf.before_change = lambda: calls.append(perf.ring.head if perf.ring else -1)
    head = perf.ring.head if perf.ring else -1
    change(tracefs, perf)
    assert calls and calls[0] == head  # called before anything moved
