"""A writable ring's ``data_tail`` that comes later (``TailAwaited``): the
records that need it wait, nothing changed, and are then placed or lost
exactly as a read at once would have placed or lost them (issue 19, item 3)."""

from __future__ import annotations

import pytest

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._perf_buffer import TailAwaited
from tracefs_fuse.engine._perf_event_attr import Kind, copy_attr
from tracefs_fuse.engine._perf_events import PerfEvent, PerfEvents
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tree import Vma

from .test_perf import attr_bytes

#: A RAW sample of this entry is 1,024 bytes: a one-page ring holds three
#: (CIRC_SPACE is one byte short of the ring).
ENTRY = b"e" * 1008
WRITER = Task(pid=7, tgid=Tgid(7), cpu=0, comm="w")


class Reader:
    """The reader's page as the adapter reads it: at once, or later."""

    def __init__(self, later: bool) -> None:
        self.later = later
        self.tail: int | None = 0
        self.asked = 0

    def read_tail(self, perf: PerfEvent) -> int | None:
        self.asked += 1
        if self.later:
            raise TailAwaited
        return self.tail


def ring_of(reader: Reader, writable: bool = True) -> tuple[PerfEvent, list[tuple[int, bytes]]]:
    published: list[tuple[int, bytes]] = []
    events = PerfEvents(TraceClocks.from_source(ManualClock(1)),
                        lambda path, offset, data: published.append((offset, data)), [])
    events.read_tail = reader.read_tail
    perf = events.open(copy_attr(attr_bytes()), Kind.TRACEPOINT, None, None, 0, Tgid(1))
    perf.mapped(Vma(pgoff=0, nr_pages=2, write=writable, execute=False, shared=True))
    return perf, published


def state(perf: PerfEvent) -> tuple[object, ...]:
    ring = perf.ring
    assert ring is not None
    return (ring.head, ring.tail, ring.lost, ring.dropped, bytes(ring.data), perf.lost,
            perf.counts().value, perf.wakeup)


# The reader's data_tail at each write; the write from which the rest are made
# while the tail is awaited (they wait behind the first, for one read); how
# often the adapter is asked, at once / later.
CASES = [
    pytest.param([0, 0, 0, 1024], 4, (1, 1), id="the 4th fits behind the tail read"),
    pytest.param([0, 0, 0, 0], 4, (1, 1), id="the 4th is lost"),
    pytest.param([0, 0, 0, 0, 0, 3072], 6, (3, 3), id="lost, lost, then after a LOST record"),
    pytest.param([0, 0, 0, None], 4, (1, 1), id="unreadable: overwrites"),
    pytest.param([0, 0, 0, 2048, 2048, 2048], 3, (2, 3), id="three wait for one read"),
    pytest.param([0, 0, 0, 0, 0, 0], 3, (3, 3), id="three wait, all lost"),
]


@pytest.mark.parametrize(("tails", "together", "asks"), CASES)
def test_a_tail_read_later_places_as_at_once(tails: list[int | None], together: int,
                                             asks: tuple[int, int]) -> None:
    at_once = Reader(later=False)
    perf, published = ring_of(at_once)
    for tail in tails:
        at_once.tail = tail
        perf.record(ENTRY, WRITER)
    expected = (state(perf), published)

    later = Reader(later=True)
    perf, published = ring_of(later)
    for n, tail in enumerate(tails):
        asked, before, shown = later.asked, state(perf)[:5], len(published)
        perf.record(ENTRY, WRITER)
        if later.asked == asked:
            continue  # it fit behind the tail known
        # Nothing changed in the ring, nothing published; the write is counted.
        assert (state(perf)[:5], len(published)) == (before, shown)
        if n + 1 >= together and n + 1 < len(tails):
            continue  # the next write waits behind this one
        perf.tail_read(tail)
        assert perf.waiting == []
    assert (state(perf), published) == expected
    assert (at_once.asked, later.asked) == asks


def test_records_of_a_ring_unmapped_meanwhile_go_nowhere() -> None:
    reader = Reader(later=True)
    perf, published = ring_of(reader)
    for _ in range(4):
        perf.record(ENTRY, WRITER)
    assert (len(perf.waiting), len(published)) == (1, 6)  # 3 records, each data and head
    perf.unmapped()
    perf.mapped(Vma(pgoff=0, nr_pages=2, write=True, execute=False, shared=True))
    perf.tail_read(4096)
    assert state(perf)[:4] == (0, 0, 0, 0) and len(published) == 6


def test_a_read_only_ring_never_asks() -> None:
    reader = Reader(later=True)
    perf, published = ring_of(reader, writable=False)
    for _ in range(5):
        perf.record(ENTRY, WRITER)
    assert (reader.asked, perf.waiting, len(published)) == (0, [], 10)  # overwrites: data, head


# Whether the ring is paused (PAUSE_OUTPUT) at each write: the 4th write needs
# the tail, which comes only after the last write.
PAUSES = [
    pytest.param([False, False, False, False, True], id="paused while the 4th waits: it is placed"),
    pytest.param([False, False, False, False, True, False],
                 id="one written paused behind it: lost; one after: placed"),
]


@pytest.mark.parametrize("pauses", PAUSES)
def test_a_pause_while_a_record_waits_is_later_than_its_write(pauses: list[bool]) -> None:
    """PAUSE_OUTPUT judges the records written after it, not those written
    before it that still wait for the tail (``__perf_output_begin`` looks at
    ``rb->paused`` as the record is written)."""
    at_once = Reader(later=False)
    at_once.tail = 2048
    perf, published = ring_of(at_once)
    later = Reader(later=True)
    waiting, waiting_published = ring_of(later)
    for paused in pauses:
        for event in (perf, waiting):
            event.pause_output(paused)
            event.record(ENTRY, WRITER)
    assert len(waiting.waiting) == len(pauses) - 3
    waiting.tail_read(2048)
    assert (state(waiting), waiting_published) == (state(perf), published)
