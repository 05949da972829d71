"""Which perf_event_open calls the supervisor asks Python about (``must_ask``
in perf/_supervisor.c), and that it never leaves one of ours to the kernel."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.engine._perf_event_attr import (ATTR_STRUCT, PERF_ATTR_SIZE,
                                                   PERF_COUNT_SW_DUMMY, PERF_TYPE_SOFTWARE,
                                                   PERF_TYPE_TRACEPOINT, SIDE_BAND, Flag,
                                                   copy_attr, emulated)
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.perf._supervisor import must_ask

PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_TYPE_RAW = 4


def attr(type_: int, config: int, flags: int = 0, size: int = PERF_ATTR_SIZE) -> bytes:
    return ATTR_STRUCT.pack(type_, size, config, *[0] * 3, flags, *[0] * 16)[:size]


@pytest.mark.parametrize("raw, asked", [
    # a program's own counters: the kernel's at once
    (attr(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES), False),
    (attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK), False),
    (attr(PERF_TYPE_RAW, 0x3c, Flag.DISABLED | Flag.INHERIT), False),
    (attr(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, size=64), False),
    # maybe ours: a tracepoint (its id decides), an inert dummy leader
    (attr(PERF_TYPE_TRACEPOINT, 1234), True),
    (attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY), True),
    # side-band bits are remembered for a later SET_OUTPUT into ours
    (attr(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, Flag.COMM | Flag.MMAP), True),
    (attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, Flag.TASK), True),
    # what cannot be read whole: Python gives the kernel's answer
    (attr(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES)[:47], True),
    (b"", True),
])
def test_must_ask(raw: bytes, asked: bool) -> None:
    assert must_ask(raw, SIDE_BAND) is asked


@given(type_=st.sampled_from([0, 1, 2, 3, 4, 5, 6, 9, 0xFFFFFFFF]),
       config=st.one_of(st.sampled_from([0, 1, PERF_COUNT_SW_DUMMY, 1234]),
                        st.integers(0, 2**64 - 1)),
       flags=st.integers(0, 2**64 - 1), side_band=st.booleans())
def test_what_is_not_asked_is_never_ours(type_: int, config: int, flags: int,
                                         side_band: bool) -> None:
    """Not asked means: not emulated whatever our ids are, no dummy that could
    stand in, no side-band bits to remember (the service would have let it
    continue without looking further)."""
    if not side_band:
        flags &= ~SIDE_BAND
    raw = attr(type_, config, flags)
    if must_ask(raw, SIDE_BAND):
        return
    try:
        parsed = copy_attr(raw)
    except TracefsError:
        pass  # the kernel refuses it the same way
    else:
        assert emulated(parsed, lambda _id: True) is None
    assert not (type_ == PERF_TYPE_SOFTWARE and config == PERF_COUNT_SW_DUMMY)
    assert not flags & SIDE_BAND
