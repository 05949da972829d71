"""Trace clocks and the ``trace_clock`` file (behaviour measured on Linux 6.18)."""

from __future__ import annotations

import errno

import pytest

from tracefs_fuse.engine._clock import (TRACE_CLOCK_NAMES, CounterClock, ManualClock,
                                        TraceClocks, format_ts, jiffies_clock, ns2usecs)
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._ringbuf import RingBuffer


def make_clocks(now: ManualClock | None = None) -> TraceClocks:
    return TraceClocks.from_source(now or ManualClock(5_000_000_000))


def test_clock_render_brackets_current() -> None:
    clocks = make_clocks()
    assert clocks.render(clocks.default) == (
        b"[local] global counter uptime perf mono mono_raw boot tai x86-tsc\n")
    assert clocks.render(clocks["x86-tsc"]) == (
        b"local global counter uptime perf mono mono_raw boot tai [x86-tsc]\n")


@pytest.mark.parametrize(("written", "name"), [
    (b"local", "local"), (b" uptime\n", "uptime"), (b"\tcounter \n", "counter"),
    (b"mono_raw\0garbage", "mono_raw"), (b"x86-tsc", "x86-tsc"),
])
def test_clock_parse_strips_whitespace(written: bytes, name: str) -> None:
    assert make_clocks().parse(written).name == name


@pytest.mark.parametrize("written", [b"", b"\n", b"Local", b"jiffies", b"mono raw",
                                     b" " * 60 + b"boot", b"local" + b" " * 59])
def test_clock_parse_rejects(written: bytes) -> None:
    with pytest.raises(TracefsError) as exc:
        make_clocks().parse(written)
    assert exc.value.errno == errno.EINVAL


# trace_clocks[].in_ns: "uptime" is jiffies (printed raw, measured: 90401).
IN_NS = {"local": True, "global": True, "counter": False, "uptime": False, "perf": True,
         "mono": True, "mono_raw": True, "boot": True, "tai": True, "x86-tsc": False}


@pytest.mark.parametrize("name", TRACE_CLOCK_NAMES)
def test_clock_in_ns_table(name: str) -> None:
    assert make_clocks()[name].in_ns is IN_NS[name]


def test_clock_uptime_counts_user_hz_ticks() -> None:
    now = ManualClock(904_012_345_678)
    assert make_clocks(now)["uptime"].read() == 90401
    assert jiffies_clock(ManualClock(9_999_999))() == 0


def test_clock_counter_advances_per_read_and_is_shared() -> None:
    counter = CounterClock()
    clocks = TraceClocks.from_source(ManualClock())
    shared = TraceClocks(local=ManualClock(), global_=ManualClock(), perf=ManualClock(),
                         mono=ManualClock(), mono_raw=ManualClock(), boot=ManualClock(),
                         tai=ManualClock(), x86_tsc=ManualClock(), uptime_ns=ManualClock(),
                         counter=counter)
    assert [shared["counter"].read() for _ in range(3)] == [1, 2, 3]
    assert counter.value == 3
    assert clocks["counter"].read() == 1  # a separate table has its own counter


def test_clock_manual_only_moves_when_told() -> None:
    clock = ManualClock(10)
    assert clock() == clock() == 10
    assert clock.advance(5) == 15 == clock()


@pytest.mark.parametrize(("ns", "usecs"), [
    (899992048415, 899992048), (899992072561, 899992073), (499, 0), (500, 1), (0, 0)])
def test_clock_ns2usecs_rounds(ns: int, usecs: int) -> None:
    assert ns2usecs(ns) == usecs


@pytest.mark.parametrize(("ts", "in_ns", "text"), [
    (694386495000, True, "  694.386495"), (0, True, "    0.000000"),
    (123456789012345, True, "123456.789012"), (3, False, "3"),
    (2347889651887, False, "2347889651887")])
def test_clock_format_ts(ts: int, in_ns: bool, text: str) -> None:
    assert format_ts(ts, in_ns) == text


def test_clock_selecting_resets_the_buffer_even_if_unchanged() -> None:
    clocks = make_clocks()
    buffer = RingBuffer(2, clocks.default)
    buffer.write(0, bytes(16))
    buffer.set_clock(clocks.parse(b"local"))
    assert buffer.get_total_entries().entries == 0


def test_clock_counter_ticks_of_a_reset_write_and_stats() -> None:
    """Measured: after selecting counter, events are 2 and 3 and ``now ts`` is 4.

    The reset that selecting a clock does reads the clock once (time_start).
    """
    clocks = make_clocks()
    buffer = RingBuffer(2, clocks.default)
    buffer.set_clock(clocks["counter"])
    buffer.write(0, bytes(16))
    buffer.write(0, bytes(16))
    stats = buffer.render_stats(0).decode().splitlines()
    assert stats[4:6] == ["oldest event ts: 2", "now ts: 4"]
    assert buffer.time_start == 1
    with buffer.open_iterator() as events:
        assert [r.ts for r in events] == [2, 3]
