"""Trace clocks: what a ring buffer stamps its events with, and ``trace_clock``.

Rules:
  * The engine never reads time itself. Every clock but ``counter`` is a
    callable injected by the adapter; ``counter`` is a plain counter that
    advances on every read, like the kernel's ``trace_clock_counter``.
  * The table order, names and ``in_ns`` flags are the kernel's
    ``trace_clocks[]`` (x86_64 adds ``x86-tsc``). ``in_ns`` decides how text
    timestamps print: ``%5lu.%06lu`` seconds for ns clocks, a raw integer
    otherwise.
  * ``uptime`` is ``trace_clock_jiffies``: USER_HZ (100 Hz) ticks, not ns, so
    it prints raw (measured on 6.18: ``90401`` at about 904 s of uptime).
  * Reading a clock may have effects (the counter advances), so only code
    that the kernel reads the clock in may call one: event writes, the
    ``now ts:`` line of ``stats``, and a whole-buffer reset.

Kernel: kernel/trace/trace.c (``trace_clocks[]``, ``tracing_clock_show``,
``tracing_clock_write``, ``tracing_set_clock``, ``ns2usecs``),
kernel/trace/trace_clock.c, Linux 6.18.
"""

from __future__ import annotations

import errno
from typing import Callable

import msgspec

from ._errors import TracefsError

#: A time source: returns the current reading (ns, except ``uptime`` and
#: ``x86-tsc``).
ClockSource = Callable[[], int]

#: ``trace_clocks[]`` order (``trace_clock`` lists them in this order).
TRACE_CLOCK_NAMES = ("local", "global", "counter", "uptime", "perf", "mono",
                     "mono_raw", "boot", "tai", "x86-tsc")
#: The clock a new trace array starts with.
DEFAULT_TRACE_CLOCK = "local"
#: ``trace_clocks[].in_ns``.
_IN_NS = {"local": True, "global": True, "counter": False, "uptime": False,
          "perf": True, "mono": True, "mono_raw": True, "boot": True,
          "tai": True, "x86-tsc": False}
#: ``jiffies_64_to_clock_t``: USER_HZ is 100, one tick is 10 ms.
_NSEC_PER_USER_HZ_TICK = 10_000_000
#: ``tracing_clock_write`` copies into ``char buf[64]`` and refuses to truncate.
_CLOCK_WRITE_MAX = 64
#: ``isspace()`` in the kernel's ``strstrip``.
_KERNEL_WHITESPACE = b" \t\n\v\f\r"


class TraceClock(msgspec.Struct, frozen=True):
    """One row of ``trace_clocks[]``.

    Attributes:
        name: the name ``trace_clock`` shows.
        in_ns: whether readings are nanoseconds (text prints seconds.usecs).
        read: the time source.
    """

    name: str
    in_ns: bool
    read: ClockSource


class CounterClock:
    """``trace_clock_counter``: +1 per reading, shared by every buffer using it.

    The kernel's counter is one global ``atomic64_t``; share one instance
    between trace arrays to reproduce that.
    """

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = value

    def __call__(self) -> int:
        self.value += 1
        return self.value


class ManualClock:
    """A time source that only moves when told to (for tests and replays)."""

    __slots__ = ("now",)

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, delta: int) -> int:
        """Move forward by ``delta`` and return the new reading."""
        self.now += delta
        return self.now


def jiffies_clock(ns_source: ClockSource) -> ClockSource:
    """``trace_clock_jiffies`` from an ns source: USER_HZ ticks since it started."""
    return lambda: ns_source() // _NSEC_PER_USER_HZ_TICK


def ns2usecs(nsec: int) -> int:
    """``ns2usecs``: microseconds, rounded to nearest (``(nsec + 500) / 1000``).

    Text timestamps and ``stats`` print ``usecs / 10**6`` and
    ``usecs % 10**6``; the rounding is observable (``...072561`` ns prints
    ``.992073``).
    """
    return (nsec + 500) // 1000


def format_ts(ts: int, in_ns: bool) -> str:
    """``%5llu.%06lu`` seconds for ns clocks, the raw reading (``%llu``) otherwise.

    This is how ``stats`` and the text trace print time stamps.
    """
    if not in_ns:
        return str(ts)
    usecs = ns2usecs(ts)
    return f"{usecs // 1_000_000:5d}.{usecs % 1_000_000:06d}"


class TraceClocks:
    """The clocks a tracefs offers, built from the adapter's time sources.

    Args:
        local: ``trace_clock_local`` (sched_clock; CLOCK_MONOTONIC is close).
        global_: ``trace_clock_global``.
        perf: ``trace_clock`` (perf's clock).
        mono: ``ktime_get_mono_fast_ns``.
        mono_raw: ``ktime_get_raw_fast_ns``.
        boot: ``ktime_get_boot_fast_ns``.
        tai: ``ktime_get_tai_fast_ns``.
        x86_tsc: raw TSC cycles (any monotonic counter will do; printed raw).
        uptime_ns: an ns source since boot; ``uptime`` reads it in jiffies.
        counter: the shared counter (a fresh one if omitted).
    """

    def __init__(self, *, local: ClockSource, global_: ClockSource, perf: ClockSource,
                 mono: ClockSource, mono_raw: ClockSource, boot: ClockSource,
                 tai: ClockSource, x86_tsc: ClockSource, uptime_ns: ClockSource,
                 counter: CounterClock | None = None) -> None:
        sources: dict[str, ClockSource] = {
            "local": local, "global": global_,
            "counter": counter if counter is not None else CounterClock(),
            "uptime": jiffies_clock(uptime_ns), "perf": perf, "mono": mono,
            "mono_raw": mono_raw, "boot": boot, "tai": tai, "x86-tsc": x86_tsc,
        }
        self._clocks = {name: TraceClock(name=name, in_ns=_IN_NS[name], read=sources[name])
                        for name in TRACE_CLOCK_NAMES}

    @classmethod
    def from_source(cls, source: ClockSource) -> TraceClocks:
        """Every clock from one source (tests; ``uptime`` still ticks in jiffies)."""
        return cls(local=source, global_=source, perf=source, mono=source,
                   mono_raw=source, boot=source, tai=source, x86_tsc=source,
                   uptime_ns=source)

    def __getitem__(self, name: str) -> TraceClock:
        return self._clocks[name]

    @property
    def default(self) -> TraceClock:
        return self._clocks[DEFAULT_TRACE_CLOCK]

    def render(self, current: TraceClock) -> bytes:
        """``trace_clock`` contents: every name, the current one in brackets."""
        return (" ".join(f"[{name}]" if name == current.name else name
                         for name in TRACE_CLOCK_NAMES) + "\n").encode()

    def parse(self, data: bytes) -> TraceClock:
        """The clock a write to ``trace_clock`` selects (``tracing_clock_write``).

        Surrounding whitespace is ignored; the caller then selects it with
        ``RingBuffer.set_clock``, which resets the buffer even if the clock
        did not change (as ``tracing_set_clock`` does).

        Raises:
            TracefsError: EINVAL for 64 bytes or more, or an unknown name.
        """
        if len(data) >= _CLOCK_WRITE_MAX:
            raise TracefsError(errno.EINVAL, "trace_clock write too long")
        name = data.split(b"\0", 1)[0].strip(_KERNEL_WHITESPACE).decode("latin-1")
        clock = self._clocks.get(name)
        if clock is None:
            raise TracefsError(errno.EINVAL, f"unknown trace clock {name!r}")
        return clock
