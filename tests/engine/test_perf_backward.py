"""Circular mode's rings: ``write_backward`` layout, PAUSE_OUTPUT, perf_poll.

A reader here walks a backward ring as TracepointSession's circular mode does:
from ``data_head`` forward, one ring's worth at most, stopping at a zero or
too-large size (unused space, or a record the writer partly overwrote).
"""

from __future__ import annotations

import errno
import struct

import pytest

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._perf_backward import BackwardBuffer
from tracefs_fuse.engine._perf_buffer import DATA_HEAD, PAGE_SIZE, PerfBuffer
from tracefs_fuse.engine._perf_event_attr import Flag, Kind, Sample, copy_attr
from tracefs_fuse.engine._perf_events import (
    PERF_EVENT_IOC_PAUSE_OUTPUT,
    PERF_EVENT_IOC_SET_OUTPUT,
    POLLHUP,
    PerfEvent,
    PerfEvents,
    PerfFile,
)
from tracefs_fuse.engine._perf_output import PERF_RECORD_LOST, PERF_RECORD_SAMPLE
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tree import POLLIN, POLLRDNORM, Vma

from .test_perf import attr_bytes

U64 = 1 << 64


def rec(n: int, size: int) -> bytes:
    """A record of ``size`` bytes: ``perf_event_header`` then ``n`` repeated."""
    return struct.pack("=IHH", PERF_RECORD_SAMPLE, 0, size) + bytes([n]) * (size - 8)


def lost_rec(count: int) -> bytes:
    return struct.pack("=IHHQQ", PERF_RECORD_LOST, 0, 24, 0, count)


def no_tail() -> int | None:
    return None


def data_head(ring: PerfBuffer) -> int:
    return struct.unpack("=Q", ring.file_bytes(DATA_HEAD, 8))[0]


def walk(ring: PerfBuffer) -> list[bytes]:
    """What a circular reader finds, newest first."""
    data = ring.file_bytes(PAGE_SIZE, ring.size)
    pos, remaining, found = data_head(ring), ring.size, []
    while remaining:
        at = pos % ring.size
        size = struct.unpack_from("=IHH", data, at)[2]
        if size == 0 or size > remaining:
            break
        found.append((data + data)[at:at + size])
        pos += size
        remaining -= size
    return found


@pytest.mark.parametrize(("pages", "sizes", "newest_first"), [
    # Each record lies whole before the previous one.
    (1, [16, 24, 8], [2, 1, 0]),
    # A record across the ring's end is whole to the walk; the oldest lost its end.
    (1, [4088, 16], [1]),
    (1, [2048, 2040, 16], [2, 1]),
    # Overwrite: the oldest one, partly overwritten, is where the walk stops.
    (1, [1000] * 5, [4, 3, 2, 1]),
    (2, [1000] * 9, [8, 7, 6, 5, 4, 3, 2, 1]),
    # Exactly a ring: every record survives.
    (1, [1024] * 4, [3, 2, 1, 0]),
])
def test_backward_layout(pages: int, sizes: list[int], newest_first: list[int]) -> None:
    ring = BackwardBuffer(pages, writable=False, wakeup_events=0, watermark=None)
    for n, size in enumerate(sizes):
        ring.output(rec(n, size), no_tail, lost_rec)
    assert data_head(ring) == U64 - sum(sizes)
    assert walk(ring) == [rec(n, sizes[n]) for n in newest_first]


@pytest.mark.parametrize(("head", "size", "changes"), [
    # -head is what was written: the record goes just below it, data then data_head.
    (0, 16, [(PAGE_SIZE + 4080, rec(7, 16)), (DATA_HEAD, U64 - 16)]),
    (-4088, 16, [(PAGE_SIZE + 4088, rec(7, 16)[:8]), (PAGE_SIZE, rec(7, 16)[8:]),
                 (DATA_HEAD, U64 - 4104)]),
    (-4096, 8, [(PAGE_SIZE + 4088, rec(7, 8)), (DATA_HEAD, U64 - 4104)]),
])
def test_backward_changes(head: int, size: int, changes: list[tuple[int, object]]) -> None:
    ring = BackwardBuffer(1, writable=False, wakeup_events=0, watermark=None)
    ring.head = head
    got, _ = ring.output(rec(7, size), no_tail, lost_rec)
    assert got == [(offset, struct.pack("=Q", data) if isinstance(data, int) else data)
                   for offset, data in changes]


@pytest.mark.parametrize(("reader_tail", "head", "fits"), [
    (0, -(4096 - 8), False),            # CIRC_SPACE(tail, head) = 7
    (0, -(4096 - 24), True),            # 23
    (U64 - 1024, -3072, True),          # the reader took the oldest 1024 bytes
    (None, -(4096 - 8), True),          # unreadable tail: overwrite
])
def test_backward_space(reader_tail: int | None, head: int, fits: bool) -> None:
    ring = BackwardBuffer(1, writable=True, wakeup_events=0, watermark=None)
    ring.head = head
    changes, _ = ring.output(rec(1, 16), lambda: reader_tail, lost_rec)
    assert bool(changes) is fits
    assert (ring.lost, ring.dropped) == ((0, 0) if fits else (1, 1))


def test_backward_watermark_counts_bytes_written() -> None:
    ring = BackwardBuffer(1, writable=False, wakeup_events=0, watermark=100)
    assert [ring.output(rec(0, 64), no_tail, lost_rec)[1] for _ in range(4)] == \
        [False, True, False, True]


@pytest.mark.parametrize("ring_type", [PerfBuffer, BackwardBuffer])
def test_paused_ring_counts_then_reports(ring_type: type[PerfBuffer]) -> None:
    ring = ring_type(1, writable=False, wakeup_events=1, watermark=None)
    ring.paused = True
    assert ring.output(rec(1, 16), no_tail, lost_rec) == ([], False)
    assert ring.output(rec(2, 16), no_tail, lost_rec) == ([], False)
    assert (ring.lost, ring.dropped, ring.head) == (2, 2, 0)
    ring.paused = False
    changes, wakeup = ring.output(rec(3, 16), no_tail, lost_rec)
    assert wakeup and (ring.lost, ring.dropped) == (0, 2)
    data = b"".join(part for offset, part in changes if offset != DATA_HEAD)
    assert data == lost_rec(2) + rec(3, 16)


# -- the events: PAUSE_OUTPUT, SET_OUTPUT, poll ---------------------------------------

TASK = Task(pid=7, tgid=Tgid(7), cpu=0, comm="t")
RO_RING = Vma(pgoff=0, nr_pages=2, write=False, execute=False, shared=True)


def events() -> tuple[PerfEvents, list[tuple[str, int, bytes]]]:
    stored: list[tuple[str, int, bytes]] = []
    perfs = PerfEvents(TraceClocks.from_source(ManualClock(1)),
                       lambda path, offset, data: stored.append((path[1], offset, data)), [])
    return perfs, stored


def open_cpu0(perfs: PerfEvents, flags: int = Flag.WRITE_BACKWARD) -> PerfEvent:
    attr = copy_attr(attr_bytes(sample_type=Sample.IDENTIFIER | Sample.RAW, flags=flags))
    return perfs.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(1))


def test_pause_output_pauses_the_shared_ring() -> None:
    perfs, stored = events()
    leader, member = open_cpu0(perfs), open_cpu0(perfs)
    member.ioctl(PERF_EVENT_IOC_SET_OUTPUT, 0, leader)
    leader.mapped(RO_RING)
    assert member.ioctl(PERF_EVENT_IOC_PAUSE_OUTPUT, 1, None) == (0, None)
    leader.record(b"e" * 8, TASK)
    member.record(b"e" * 8, TASK)
    assert stored == [] and (leader.lost, member.lost) == (1, 1)
    leader.ioctl(PERF_EVENT_IOC_PAUSE_OUTPUT, 0, None)
    member.record(b"e" * 8, TASK)
    # PERF_RECORD_LOST (id, 2) first, then the sample, below it: one store, then data_head.
    (_, offset, data), (_, head_at, head) = stored
    assert struct.unpack_from("=IHHQQ", data) == (PERF_RECORD_LOST, 0, 24, member.id, 2)
    assert offset == PAGE_SIZE + PAGE_SIZE - len(data) and head_at == DATA_HEAD
    assert struct.unpack("=Q", head)[0] == U64 - len(data)
    assert (leader.count, member.count, leader.lost, member.lost) == (1, 2, 1, 1)


def test_pause_output_finds_the_ring_or_refuses() -> None:
    perfs, _ = events()
    perf = open_cpu0(perfs)
    with pytest.raises(TracefsError) as exc:
        perf.ioctl(PERF_EVENT_IOC_PAUSE_OUTPUT, 1, None)
    assert exc.value.errno == errno.EINVAL
    # The mapping is known once looked for (mmap never reaches us).
    perfs.find_mapping = lambda tgid, path: perf.mapped(RO_RING)
    perf.ioctl(PERF_EVENT_IOC_PAUSE_OUTPUT, 1, None)
    assert perf.ring is not None and perf.ring.paused


@pytest.mark.parametrize(("leader_flags", "member_flags", "expected"), [
    (Flag.WRITE_BACKWARD, Flag.WRITE_BACKWARD, None),
    (Flag.WRITE_BACKWARD, 0, errno.EINVAL),
    (0, Flag.WRITE_BACKWARD, errno.EINVAL),
])
def test_set_output_keeps_one_direction(leader_flags: int, member_flags: int,
                                        expected: int | None) -> None:
    perfs, _ = events()
    leader, member = open_cpu0(perfs, leader_flags), open_cpu0(perfs, member_flags)
    if expected is None:
        member.ioctl(PERF_EVENT_IOC_SET_OUTPUT, 0, leader)
        assert member.output is leader
        return
    with pytest.raises(TracefsError) as exc:
        member.ioctl(PERF_EVENT_IOC_SET_OUTPUT, 0, leader)
    assert exc.value.errno == expected


def test_poll_hup_without_ring_then_each_wakeup_once() -> None:
    perfs, _ = events()
    attr = copy_attr(attr_bytes(sample_type=Sample.RAW, wakeup=1))
    perf = perfs.open(attr, Kind.TRACEPOINT, None, None, 0, Tgid(1))
    fd = PerfFile(perf)
    assert fd.poll() == POLLHUP
    perf.mapped(RO_RING)
    assert fd.poll() == 0
    perf.record(b"e" * 8, TASK)
    assert [fd.poll(), fd.poll()] == [POLLIN | POLLRDNORM, 0]
