"""Trace arrays: enabling, tracing_on, the cpumask, saved comms and tgids."""

from __future__ import annotations

import errno
import os

import pytest

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs

from .fakes import Client, FakeMemory

WRITER = Task(pid=42, tgid=Tgid(40), cpu=1, comm="writer")


def fs() -> Tracefs:
    return Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=TraceClocks.from_source(ManualClock(1)))


def mark(t: Tracefs, task: Task = WRITER) -> int:
    return t.file("trace_marker").open(os.O_WRONLY, task).write(b"x", 0, task)


def test_comms_are_saved_only_while_event_tracing_is_on() -> None:
    t = fs()
    mark(t)
    assert t.cmdlines.comm(42) == "<...>"  # markers alone: no sched_switch recording
    c = Client(t.registry.memory, 100)  # type: ignore[arg-type]
    t.registry.create_persistent("e u32 a", c.task)
    t.top.set_clr_event(True, name="e")
    mark(t)
    assert t.cmdlines.comm(42) == "writer"
    assert t.cmdlines.tgids == {}  # record-tgid is off by default
    t.top.options.set("record-tgid", True)
    mark(t)
    assert t.cmdlines.tgids == {42: 40}


def test_tracing_on_stops_recording_and_markers_get_ebadf() -> None:
    t = fs()
    t.file("tracing_on").open(os.O_WRONLY, WRITER).write(b"0\n", 0, WRITER)
    with pytest.raises(TracefsError) as info:
        mark(t)
    assert info.value.errno == errno.EBADF
    assert t.file("tracing_on").open(0, WRITER).read(0, 10) == b"0\n"


def test_cpumask_drops_records_of_masked_cpus() -> None:
    t = fs()
    t.file("tracing_cpumask").open(os.O_WRONLY, WRITER).write(b"1\n", 0, WRITER)
    with pytest.raises(TracefsError):
        mark(t)  # CPU 1 is masked: the reservation fails like tracing off
    mark(t, Task(pid=1, tgid=Tgid(1), cpu=0))
    assert t.buffer.get_total_entries().entries == 1
    assert t.file("tracing_cpumask").open(0, WRITER).read(0, 10) == b"1\n"


@pytest.mark.parametrize(("text", "expected"), [
    (b"3", 0), (b"0", 0), (b"4", errno.EOVERFLOW), (b"xyz", errno.EINVAL), (b"", errno.EINVAL),
])
def test_cpumask_parsing(text: bytes, expected: int) -> None:
    t = fs()
    f = t.file("tracing_cpumask").open(os.O_WRONLY, WRITER)
    if expected:
        with pytest.raises(TracefsError) as info:
            f.write(text, 0, WRITER)
        assert info.value.errno == expected
    else:
        f.write(text, 0, WRITER)


def test_markers_option_off_is_einval() -> None:
    t = fs()
    t.file("options/markers").open(os.O_WRONLY, WRITER).write(b"0", 0, WRITER)
    with pytest.raises(TracefsError) as info:
        mark(t)
    assert info.value.errno == errno.EINVAL
    assert "nomarkers\n" in t.file("trace_options").open(0, WRITER).read(0, 4096).decode()


def test_overwrite_option_reaches_the_buffer() -> None:
    t = fs()
    t.file("trace_options").open(os.O_WRONLY, WRITER).write(b"nooverwrite", 0, WRITER)
    assert t.buffer.overwrite is False
