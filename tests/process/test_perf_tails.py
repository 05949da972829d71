"""PerfTails: a writable perf ring's data_tail read by a lane's worker
(process/_perf_tails.py): the records wait for it, one read per ring, and a
read given up leaves the tail unknown, at once, until it ends."""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import AsyncIterator

import pytest
import trio

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._perf_buffer import DATA_TAIL
from tracefs_fuse.engine._perf_event_attr import Kind, copy_attr
from tracefs_fuse.engine._perf_events import PerfEvent, PerfEvents
from tracefs_fuse.engine._tree import Vma
from tracefs_fuse.process import _perf_tails
from tracefs_fuse.process._lanes import Lanes
from tracefs_fuse.process._perf_tails import PerfTails

from ..engine.test_perf import attr_bytes
from ..engine.test_perf_tail import ENTRY, WRITER

#: Where the reader maps its ring.
START = 0x7000_0000


class FakeMemory:
    """Copies of a pinned image's descriptor: /dev/null, counted."""

    def __init__(self) -> None:
        self.open = 0
        self.dropped = trio.Event()

    def image_copy(self, tgid: Tgid, owner: int) -> int | None:
        self.open += 1
        return os.open(os.devnull, os.O_RDONLY)

    def drop_copy(self, fd: int, owner: int) -> None:
        os.close(fd)
        self.open -= 1
        self.dropped.set()


class FakePage:
    """The reader's page: its data_tail, read when ``go`` lets it."""

    def __init__(self, tail: int) -> None:
        self.tail = tail
        self.go = threading.Event()
        self.go.set()
        self.reads: list[int] = []

    def read_through(self, pid: int, fd: int, addr: int, size: int) -> bytes:
        self.reads.append(addr)
        assert self.go.wait(10)
        return struct.pack("=Q", self.tail)


def full_ring(tails: PerfTails) -> PerfEvent:
    """A writable one-page ring with three records of 1,024 bytes: a fourth needs the tail."""
    events = PerfEvents(TraceClocks.from_source(ManualClock(1)), lambda *change: None, [])
    events.read_tail = tails.read_tail
    perf = events.open(copy_attr(attr_bytes()), Kind.TRACEPOINT, None, None, 0, Tgid(1))
    perf.mapped(Vma(pgoff=0, nr_pages=2, write=True, execute=False, shared=True))
    for _ in range(3):
        perf.record(ENTRY, WRITER)
    return perf


@contextlib.asynccontextmanager
async def serving(start: int | None) -> AsyncIterator[tuple[FakeMemory, PerfTails, PerfEvent]]:
    """PerfTails serving, the reader's ring mapped at ``start`` (None:
    unknown), full (:func:`full_ring`)."""
    memory = FakeMemory()
    tails = PerfTails(memory, lambda perf: start)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        tails.start(nursery, Lanes(), lambda: None)
        yield memory, tails, full_ring(tails)


def head(perf: PerfEvent) -> int:
    assert perf.ring is not None
    return perf.ring.head


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> FakePage:
    page = FakePage(tail=2048)
    monkeypatch.setattr(_perf_tails, "read_through", page.read_through)
    return page


async def test_records_wait_for_one_read_then_are_placed(page: FakePage) -> None:
    async with serving(START) as (memory, tails, perf):
        page.go.clear()
        perf.record(ENTRY, WRITER)  # needs the tail
        perf.record(ENTRY, WRITER)  # waits behind it, for the same read
        held = tails.take_held()
        assert (len(held), len(perf.waiting), head(perf)) == (1, 2, 3072)
        page.go.set()
        await held[0].wait()
    # Both fit behind the tail read (2048): 1,023 + 2,048 bytes of space.
    assert (head(perf), perf.waiting, page.reads) == (5120, [], [START + DATA_TAIL])
    assert memory.open == 0


async def test_a_read_given_up_leaves_the_tail_unknown_until_it_ends(
        page: FakePage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_perf_tails, "TAIL_WAIT_S", 0.05)
    async with serving(START) as (memory, tails, perf):
        page.go.clear()
        perf.record(ENTRY, WRITER)
        (held,) = tails.take_held()
        await held.wait()  # given up: unknown, the record overwrites
        assert (head(perf), len(page.reads), memory.open) == (4096, 1, 1)
        # While that read hangs, a record that needs the tail overwrites at once.
        for _ in range(4):
            perf.record(ENTRY, WRITER)
        assert (head(perf), len(page.reads), tails.take_held()) == (8192, 1, [])
        page.go.set()
        await memory.dropped.wait()
        # It ended: the next record that needs the tail has it read again.
        for _ in range(4):
            perf.record(ENTRY, WRITER)
        (held,) = tails.take_held()
        await held.wait()
    assert (len(page.reads), memory.open) == (2, 0)


async def test_unknown_at_once_without_an_image_or_a_mapping(page: FakePage) -> None:
    async with serving(None) as (memory, tails, perf):
        perf.record(ENTRY, WRITER)  # no writable mapping known: overwrites
    assert (head(perf), page.reads, tails.take_held(), memory.open) == (4096, [], [], 0)
