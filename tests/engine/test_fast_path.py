"""The fast path's view of the engine, and its intake of staged records.

* The intake appends an event the native side encoded only when that is
  byte for byte what ``CpuBuffer.write`` would have written: random records,
  time stamps (small, large and backwards deltas) and buffer sizes, staged
  with an encoder built here from the page format, leave the same pages as
  writing each record with its stamp.
* The table says what ``UserEventsData.write`` would check.
* A write FUSE split or cut short is answered for its whole count.
"""

from __future__ import annotations

import errno
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.synth_oracle import new_tracefs
from tracefs_fuse.engine._clock import ManualClock
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._fast_path import STAGED_RECORD, STAGED_WRAP, FastPath
from tracefs_fuse.engine._page import (RB_LEN_TIME_EXTEND, TS_EXTEND_MAX, TS_MASK,
                                       encode_data_event, encode_time_extend,
                                       rb_calculate_event_length)
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._uapi import Abi
from tracefs_fuse.engine._user_events import UserEventsFile

U64 = (1 << 64) - 1


def stage(records: list[tuple[int, int, bytes]], pid: int = 7, comm: bytes = b"w") -> bytes:
    """Staged records, encoded as fastpath.c does: (cpu, ts, entry) each."""
    out = bytearray()
    last: dict[int, int] = {}
    for cpu, ts, entry in records:
        previous = last.get(cpu, 0)
        delta = (ts - previous) & U64
        encoded = bytearray(16 + len(entry) + 8)
        at = 0
        if delta & ~TS_MASK:
            encode_time_extend(encoded, 0, delta if delta <= TS_EXTEND_MAX else 0)
            at, delta = RB_LEN_TIME_EXTEND, 0
        length = rb_calculate_event_length(len(entry))
        encode_data_event(encoded, at, entry, length, delta)
        header = 8 if length - 4 > 112 else 4
        copy_len = at + header + len(entry)
        size = (STAGED_RECORD.size + copy_len + 7) & ~7
        out += STAGED_RECORD.pack(size, cpu, 0, ts, previous, pid, pid, len(entry), copy_len,
                                  at + length, comm.ljust(16, b"\0"))
        out += encoded[:copy_len] + bytes(size - STAGED_RECORD.size - copy_len)
        last[cpu] = ts
    return bytes(out)


def entry(rng: random.Random) -> bytes:
    return struct.pack("<HBBi", 1000, 0, 0, 7) + rng.randbytes(rng.choice([0, 1, 5, 16, 120,
                                                                            300, 2000]))


def pages(tracefs: Tracefs) -> list[list[bytes]]:
    buffer = tracefs.buffer
    return [[page.render() for page in cpu.ring()] + [cpu.reader_page.render()]
            for cpu in buffer.cpus]


@settings(max_examples=60)
@given(st.integers(0, 2**32), st.sampled_from([4, 8, 1410]))
def test_fast_path_intake_writes_what_write_would(seed: int, size_kb: int) -> None:
    rng = random.Random(seed)
    records = []
    ts = 1_000_000
    for _ in range(rng.randrange(1, 400)):
        ts += rng.choice([0, 1, 500, 1 << 26, 1 << 27, 1 << 40, -3000])
        records.append((rng.randrange(2), max(ts, 0), entry(rng)))
    engine, fast = new_tracefs(), new_tracefs()
    for tracefs in (engine, fast):
        tracefs.buffer.resize(size_kb * 1024)
    for cpu, stamp, record in records:
        engine.buffer.cpus[cpu].write(record, stamp)
    taken = FastPath((fast.top,)).take_in(memoryview(stage(records)))
    assert taken == len(records)
    assert pages(fast) == pages(engine)
    for a, b in zip(engine.buffer.cpus, fast.buffer.cpus):
        assert a.statistics() == b.statistics()


def test_fast_path_intake_skips_wrap_records_and_saves_each_writer() -> None:
    tracefs = new_tracefs()
    _file_with(tracefs, "fp_c u32 a", enabled=True)  # record-cmd saves comms while enabled
    records = stage([(0, 10, b"\xe8\x03\0\0\x07\0\0\0")], pid=7, comm=b"first")
    wrap = STAGED_RECORD.pack(STAGED_RECORD.size, 0, STAGED_WRAP, 0, 0, 0, 0, 0, 0, 0, b"")
    records += wrap + stage([(0, 20, b"\xe8\x03\0\0\x09\0\0\0")], pid=9, comm=b"second")
    assert FastPath((tracefs.top,)).take_in(memoryview(records)) == 2
    assert tracefs.cmdlines.comm(7) == "first" and tracefs.cmdlines.comm(9) == "second"
    assert tracefs.top.generation == 2


def test_fast_path_table_follows_enables_and_arrays() -> None:
    tracefs = new_tracefs(ManualClock(0))
    fast = FastPath((tracefs.top,))
    first = fast.changed_arrays()
    assert [index for index, _ in first] == [0] and first[0][1].tracing_on
    assert fast.changed_arrays() == []
    tracefs.top.set_tracing_on(False)
    assert [a.tracing_on for _, a in fast.changed_arrays()] == [False]
    event = tracefs.registry.create_persistent(
        "fp_t __data_loc char[] s; u32 n", Task(pid=1, tgid=1, perfmon=True))  # type: ignore[arg-type]
    assert fast.event(event).enabled is False
    tracefs.top.set_enabled(event, True)
    assert fast.take_changed_events() == [event]
    described = fast.event(event)
    assert (described.enabled, described.recorders, described.min_size) == (True, (0,), 8)
    assert described.validators == ((8, False, True),)
    assert fast.take_changed_events() == []


def _file_with(tracefs: Tracefs, command: str, enabled: bool) -> UserEventsFile:
    task = Task(pid=1, tgid=1, perfmon=True)  # type: ignore[arg-type]
    event = tracefs.registry.create_persistent(command, task)
    file = UserEventsFile()
    file.ref_add(event, Abi.MAINLINE)
    if enabled:
        tracefs.top.set_enabled(event, True)
    return file


@pytest.mark.parametrize(("data", "count", "faulted", "enabled", "expected"), [
    (b"\0\0\0\0abcd", 1200, False, True, 1200),          # split: the whole count
    (b"\0\0\0\0", 20, True, True, errno.EFAULT),         # payload unreadable
    (b"\0\0\0\0", 20, True, False, errno.EBADF),         # ... of a disabled event
    (b"\0\0\0\0", 6, True, True, errno.EINVAL),          # min_size counts the whole
    (b"\0\0", 20, True, True, errno.EFAULT),             # the index itself unreadable
    (b"\0\0\0\0" + bytes(1 << 20), 1 << 21, False, True, 1 << 21),  # too large: dropped
])
def test_fast_path_whole_write_is_answered_for_its_count(
        data: bytes, count: int, faulted: bool, enabled: bool, expected: int) -> None:
    tracefs = new_tracefs()
    file = _file_with(tracefs, "fp_w u32 a", enabled)
    task = Task(pid=1, tgid=1)  # type: ignore[arg-type]
    write = tracefs.user_events_data.write
    if expected > 100:
        assert write(file, data, 0, task, count=count, faulted=faulted) == expected
    else:
        with pytest.raises(TracefsError) as info:
            write(file, data, 0, task, count=count, faulted=faulted)
        assert info.value.errno == expected
    records = sum(cpu.entries for cpu in tracefs.buffer.cpus)
    assert records == (1 if expected == 1200 else 0)
