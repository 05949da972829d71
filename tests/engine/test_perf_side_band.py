"""Side-band records (FORK, COMM, EXIT), inherit's lineage and the per-user budgets of perf events."""

from __future__ import annotations

import errno
import struct

import pytest

from tracefs_fuse.engine import _perf_events
from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._perf_event_attr import Flag, Kind, Sample, copy_attr
from tracefs_fuse.engine._perf_events import PerfEvents
from tracefs_fuse.engine._perf_inherit import Family, Inheritance
from tracefs_fuse.engine._perf_output import EventIds, SampleFacts
from tracefs_fuse.engine._perf_side_band import (PERF_RECORD_EXIT, PERF_RECORD_FORK, Lineage,
                                                 SideBand, task_record)
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tree import Vma

from .test_perf import attr_bytes

COMM, FORK, EXIT = 3, PERF_RECORD_FORK, PERF_RECORD_EXIT
EXEC = 1 << 13


def test_task_record_layouts() -> None:
    attr = copy_attr(attr_bytes(sample_type=Sample.TID | Sample.ID, flags=Flag.SAMPLE_ID_ALL))
    ids = EventIds(id=9, stream_id=9)
    facts = SampleFacts(pid=20, tid=21, time=5, cpu=0, entry=b"")
    lineage = Lineage(pid=Tgid(20), tid=21, ppid=10, ptid=11)
    trailer = struct.pack("=IIQ", 20, 21, 9)
    fork = task_record(FORK, attr, ids, lineage, facts)
    assert fork == struct.pack("=IHH", FORK, 0, 48) + struct.pack("=IIIIQ", 20, 10, 21, 11, 5) + trailer
    # perf_event_task_output: an EXIT names the real parent's pid twice.
    exit_ = task_record(EXIT, attr, ids, lineage, facts)
    assert exit_[8:24] == struct.pack("=IIII", 20, 10, 21, 10)


def kinds(records: list[bytes]) -> list[tuple[int, int]]:
    return [struct.unpack_from("=IH", record) for record in records]


#: Task 8, forked by 7 after the open.
CHILD = [Lineage(pid=Tgid(8), tid=8, ppid=7, ptid=7)]

# (flags, writes as (tid, comm, image, forks)) -> records before each sample, as (type, misc)
CASES = [
    # comm only: the first COMM (exec), a rename in one image (plain), the same name (none)
    (Flag.COMM | Flag.COMM_EXEC, [(7, "a", b"1", []), (7, "b", b"1", []), (7, "b", b"1", [])],
     [[(COMM, EXEC)], [(COMM, 0)], []]),
    # an exec: another image and name
    (Flag.COMM | Flag.COMM_EXEC, [(7, "a", b"1", []), (7, "x", b"2", [])],
     [[(COMM, EXEC)], [(COMM, EXEC)]]),
    # without comm_exec, COMM is never marked an exec
    (Flag.COMM, [(7, "a", b"1", [])], [[(COMM, 0)]]),
    # task: FORK for a followed child, once; its parent's name is its own: no COMM
    (Flag.TASK | Flag.COMM, [(7, "a", b"1", []), (8, "a", b"1", CHILD), (8, "a", b"1", CHILD)],
     [[(COMM, 0)], [(FORK, 0)], []]),
    # task alone: FORK, no COMM
    (Flag.TASK, [(8, "a", b"1", CHILD)], [[(FORK, 0)]]),
]


@pytest.mark.parametrize(("flags", "writes", "expected"), CASES)
def test_side_band_before_samples(flags: int, writes: list[tuple[int, str, bytes, list[Lineage]]],
                                  expected: list[list[tuple[int, int]]]) -> None:
    attr = copy_attr(attr_bytes(sample_type=Sample.TID, flags=flags | Flag.SAMPLE_ID_ALL))
    images: dict[int, bytes] = {}
    side_band = SideBand(lambda tgid: images.get(tgid))
    for (tid, comm, image, forks), want in zip(writes, expected, strict=True):
        images[tid] = image
        facts = SampleFacts(pid=tid, tid=tid, time=1, cpu=0, entry=b"")
        got = side_band.before_sample(flags, attr, EventIds(id=1, stream_id=1), facts, comm, forks)
        assert kinds(got) == want


def task(pid: int, tgid: int | None = None) -> Task:
    return Task(pid=pid, tgid=Tgid(tgid or pid), cpu=0, comm="t")


# ancestry: tgid -> its chain up; family at open: threads {1}, children {5}
ANCESTRY = {1: [1, 0], 2: [2, 1], 3: [3, 2, 1], 5: [5, 1], 6: [6, 5, 1], 9: [9, 4]}


@pytest.mark.parametrize(("inherit", "writer", "followed"), [
    (False, task(1), []),                     # the event's own thread
    (False, task(2), None),                   # no inherit: nobody else
    (True, task(2), [(2, 1)]),                # a child made after open
    (True, task(3), [(2, 1), (3, 2)]),        # its child, parents first
    (True, task(5), None),                    # a child that existed at open
    (True, task(6), None),                    # ... and what descends from it
    (True, task(9), None),                    # unrelated
    (True, task(11, 1), [(1, 1)]),            # a thread made after open
    (True, task(12, 1), None),                # a thread that existed at open
])
def test_inheritance(inherit: bool, writer: Task, followed: list[tuple[int, int]] | None) -> None:
    lineage = Inheritance(task(1), inherit, Family(frozenset({1, 12}), frozenset({5})),
                          lambda tgid: [Tgid(t) for t in ANCESTRY[tgid]])
    got = lineage.follows(writer)
    assert (None if got is None else [(line.pid, line.ppid) for line in got]) == followed


def perfs() -> PerfEvents:
    return PerfEvents(TraceClocks.from_source(ManualClock(1)), lambda *change: None, [])


def test_events_per_user_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_perf_events, "EVENTS_MAX", 2)
    events = perfs()
    attr = copy_attr(attr_bytes())
    opened = [events.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(1), uid=1000) for _ in range(2)]
    with pytest.raises(TracefsError) as exc:
        events.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(1), uid=1000)
    assert exc.value.errno == errno.ENOMEM
    events.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(2), uid=0)  # another user: served
    events.close(opened[0])
    events.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(1), uid=1000)  # room again


def test_ring_bytes_per_user_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_perf_events, "RING_BYTES_MAX", 3 * 4096)
    events = perfs()
    attr = copy_attr(attr_bytes())
    a, b, c = (events.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(1), uid=uid)
               for uid in (1000, 1000, 0))
    two = Vma(pgoff=0, nr_pages=3, write=True, execute=False, shared=True)
    a.mapped(two)
    b.mapped(two)  # 2 + 2 data pages > 3: no ring, its records lost
    c.mapped(two)  # another user's budget
    assert (a.ring is not None, b.ring is None, c.ring is not None) == (True, True, True)
    events.close(a)
    b.mapped(two)
    assert b.ring is not None


def test_target_exit_makes_pollhup_once_nothing_is_followed() -> None:
    events = perfs()
    events.family = lambda tgid: Family(frozenset({1}), frozenset())
    events.ancestry = lambda tgid: [tgid, Tgid(1)]
    attr = copy_attr(attr_bytes(flags=Flag.INHERIT))
    perf = events.open(attr, Kind.TRACEPOINT, None, task(1), -1, Tgid(1))
    perf.record(b"e" * 8, task(2))  # a child made after open: followed
    assert perf.alive == {1, 2}
    events.exited(Lineage(pid=Tgid(1), tid=1, ppid=0, ptid=0))
    assert not perf.hup()  # the child is still followed
    events.exited(Lineage(pid=Tgid(2), tid=2, ppid=1, ptid=1))
    assert perf.hup()


@pytest.mark.parametrize("pages, written, lost", [
    (None, 3, 0),  # never mapped: no rb, nothing counted lost (the kernel's out: label)
    (2, 3, 0),     # one data page holds all three
    (2, 300, 300 - 4096 // 24),  # a full ring, never read (no tail): the rest lost
])
def test_records_without_a_ring_are_not_counted_lost(pages: int | None, written: int,
                                                     lost: int) -> None:
    events = perfs()
    events.read_tail = lambda perf: 0
    perf = events.open(copy_attr(attr_bytes()), Kind.TRACEPOINT, None, None, 0, Tgid(1))
    if pages is not None:
        perf.mapped(Vma(pgoff=0, nr_pages=pages, write=True, execute=False, shared=True))
    for _ in range(written):
        perf.record(b"e" * 8, task(1))
    counts = perf.counts()
    assert (counts.value, counts.lost) == (written, lost)
