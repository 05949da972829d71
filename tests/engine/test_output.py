"""``trace``, ``trace_pipe`` and their per-CPU twins: header, lines, reads.

The golden files are what real kernels printed for the steps of
tests/oracle/clients/trace_output.c: user events of every field type on the
6.12 oracle, markers, lost events, clocks, truncation and options in a
private instance of this machine's 6.18 tracefs. The replay runs the same
steps through a whole :class:`Tracefs` and compares every read(2) result
byte for byte. What legitimately differs is fed in, not masked: each record's
time stamp, CPU, pid and comm are the ones the kernel printed, event ids start
where the kernel's did, and the marker's ``ip`` and preempt count are those of
the capturing kernel.
"""

from __future__ import annotations

import errno
import json
import os
import re
import struct
from pathlib import Path
from typing import Iterator

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.engine import _events, _ftrace_events
from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._clock import CounterClock, ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError, WouldBlock
from tracefs_fuse.engine._field import Field
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._output import (OutputOptions, TraceOutput, lat_fmt, marker_symbols,
                                         print_time)
from tracefs_fuse.engine._print_fields import TRACE_SEQ_BUFFER_SIZE, TraceSeq
from tracefs_fuse.engine._ringbuf import TraceRecord
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._tree import OpenFile

from .fakes import Client, FakeMemory

DATA = Path(__file__).parent.parent / "data"
GOLDEN_6_12 = DATA / "trace-output-6.12.117.json"
GOLDEN_6_18 = DATA / "trace-output-6.18.44.json"

# The context of one line, anywhere in a read (lines cut by the kernel run on
# into the next one): comm, pid, optional tgid, cpu, optional flags, time.
_CONTEXT = re.compile(
    r"(?P<comm>.{16})-(?P<pid>\d+) +(?:\((?:-------|[ \d]{7})\) )?\[(?P<cpu>\d{3})\] "
    r"(?:\S{5} )? *(?P<ts>\d+\.\d{6}|\d+): ", re.S)
_PER_CPU = re.compile(r"per_cpu/cpu(\d+)/(trace|trace_pipe)$")


class Line(msgspec.Struct, frozen=True):
    """A record as some read printed it."""

    cpu: int
    ts: str
    text: str


def printed_lines(results: list[str]) -> Iterator[tuple[str, Line]]:
    """(comm, record) of each line of one read's results."""
    text = "".join(r for r in results if r != "EAGAIN")
    matches = list(_CONTEXT.finditer(text))
    for match, following in zip(matches, matches[1:] + [None]):
        end = following.start() if following is not None else len(text)
        rest = text[match.end():end].split("\n", 1)[0]
        yield match["comm"].strip(), Line(int(match["cpu"]), match["ts"], rest)


def signature(step: dict, events: dict[int, str]) -> tuple[int, tuple[str, ...]]:
    """(cpu, possible starts of the text) a recording step's line shows."""
    data = bytes.fromhex(step.get("data", step.get("payload", "")))
    if step["op"] == "event":
        # An event deleted under its records prints as an unknown type.
        return step["cpu"], (f"{events[step['index']]}:", "Unknown type ")
    if step["path"] == "trace_marker_raw":
        return step["cpu"], (f"# {int.from_bytes(data[:4], 'little'):x} buf:",)
    text = re.split(b"[\n\0]", data)[0].decode("latin-1")
    return step["cpu"], (f"tracing_mark_write: {text}"[:60], "0x")


def _shows(text: str, starts: tuple[str, ...]) -> bool:
    """Does a printed line's text belong to a step with this signature?"""
    if starts[-1] == "0x":
        # A marker: the whole first line, after a symbol or an address.
        name, _, rest = text.partition(": ")
        expected = starts[0].partition(": ")[2]
        return rest == expected if len(starts[0]) < 60 else rest.startswith(expected)
    return text.startswith(starts)


class Replay:
    """One golden case run through a fresh 2-CPU engine."""

    def __init__(self, golden: dict, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steps: list[dict] = golden["cases"][case]
        self.pid: int = golden["pid"]
        kernel = golden["kernel"]
        # The kernel's ids are the lowest free too; start where it started.
        first_id = next((s["id"] for s in self.steps if s["op"] == "register"),
                        _events.FIRST_ID_UNKNOWN_HOST)
        if kernel.startswith("6.12"):
            # The oracle's tinyconfig kernel counts no preemption (PREEMPT_NONE
            # without PREEMPT_COUNT): its markers show "....." and no symbol
            # names (no kallsyms), so its print ip shows as an address.
            monkeypatch.setattr(_ftrace_events, "_MARKER_PREEMPT_COUNT", 0)
            marker_ip, ksym = 0xFFFFFFFF810C1695, (lambda ip: None)
        else:
            marker_ip = 0xFFFFFFFF81234560
            ksym = marker_symbols(marker_ip)
        self.clock = ManualClock()
        self.counter = CounterClock()
        clocks = TraceClocks(local=self.clock, global_=self.clock, perf=self.clock,
                             mono=self.clock, mono_raw=self.clock, boot=self.clock,
                             tai=self.clock, x86_tsc=self.clock, uptime_ns=self.clock,
                             counter=self.counter)
        self.memory = FakeMemory()
        self.fs = Tracefs(nr_cpus=2, memory=self.memory, clocks=clocks, marker_ip=marker_ip,
                          first_event_id=first_id)
        self.options = OutputOptions()
        self.output = TraceOutput(self.fs.top, nr_cpus=2, ksym=ksym,
                                  options=lambda: self.options)
        self.client = Client(self.memory, self.pid)
        self.data_file: OpenFile = self.fs.file("user_events_data").open(os.O_RDWR,
                                                                          self.client.task)
        self.events: dict[int, str] = {}
        #: The kernel's write index -> ours.
        self.indices: dict[int, int] = {}
        self.times = self._time_stamps()

    def _time_stamps(self) -> Iterator[int]:
        """Each recording step's time stamp, as the kernel printed it.

        Records nobody printed (overwritten, consumed unseen, cleared) get
        times evenly between their printed neighbours.
        """
        seen: dict[Line, None] = {}
        for step in self.steps:
            if step["op"] == "read":
                seen.update(dict.fromkeys(line for _, line in printed_lines(step["results"])))
        printed = sorted(seen, key=lambda line: float(line.ts))
        events: dict[int, str] = {}
        assigned: list[Line | None] = []
        for step in self.steps:
            if step["op"] == "register":
                events[step["index"]] = step["command"].split(" ", 1)[0]
            elif step["op"] in ("event", "write") and step["ret"] >= 0 and (
                    step["op"] == "event" or step["path"] in ("trace_marker", "trace_marker_raw")):
                cpu, starts = signature(step, events)
                line = printed[0] if printed else None
                if line is not None and line.cpu == cpu and _shows(line.text, starts):
                    assigned.append(printed.pop(0))
                else:
                    assigned.append(None)
        known = [(i, line) for i, line in enumerate(assigned) if line is not None]
        assert known, "no record of this case was printed"
        stamps = [self._ns(line.ts) for _, line in known]
        out: list[int] = []
        for i, line in enumerate(assigned):
            if line is not None:
                out.append(self._ns(line.ts))
                continue
            before = [(j, self._ns(k.ts)) for j, k in known if j < i]
            after = [(j, self._ns(k.ts)) for j, k in known if j > i]
            lo_i, lo = before[-1] if before else (-1, stamps[0] - 1_000 * (len(assigned) + 1))
            hi_i, hi = after[0] if after else (len(assigned), stamps[-1] + 1_000 * len(assigned))
            out.append(lo + (hi - lo) * (i - lo_i) // (hi_i - lo_i))
        return iter(out)

    @staticmethod
    def _ns(ts: str) -> int:
        if "." in ts:
            secs, usecs = ts.split(".")
            return int(secs) * 1_000_000_000 + int(usecs) * 1_000
        return int(ts)

    def task(self, cpu: int) -> Task:
        # tgid 0: nothing recorded a tgid for the kernel (record-tgid shows "-------").
        return Task(pid=self.pid, tgid=Tgid(0), cpu=cpu)

    def _tick(self) -> None:
        ts = next(self.times)
        if self.fs.buffer.clock.in_ns:
            self.clock.now = ts
        else:
            self.counter.value = ts - 1  # the write reads it once

    def _result(self, call) -> int:
        try:
            return call()
        except TracefsError as exc:
            return -exc.errno

    def run(self) -> None:
        for number, step in enumerate(self.steps):
            getattr(self, f"_{step['op']}")(step, f"step {number}: {step}"[:300])

    def _register(self, step: dict, where: str) -> None:
        word = len(self.events)
        addr = self.client.user_reg(step["command"], bit=0, word=word)
        self.data_file.ioctl(uapi.DIAG_IOCSREG, addr, self.client.task)
        # Earlier cases registered on the kernel's file too: only the order counts.
        self.indices[step["index"]] = self.client.write_index()
        self.events[step["index"]] = step["command"].split(" ", 1)[0]

    def _event(self, step: dict, where: str) -> None:
        if step["ret"] >= 0:
            self._tick()
        task = msgspec.structs.replace(self.client.task, cpu=step["cpu"])
        index = self.indices[step["index"]]
        payload = index.to_bytes(4, "little") + bytes.fromhex(step["payload"])
        assert self._result(lambda: self.data_file.write(payload, 0, task)) == step["ret"], where

    def _write(self, step: dict, where: str) -> None:
        path, data = step["path"], bytes.fromhex(step["data"])
        if path in ("trace_marker", "trace_marker_raw"):
            if step["ret"] >= 0:
                self._tick()
            task = self.task(step["cpu"])
            file = self.fs.file(path).open(os.O_WRONLY, task)
            assert self._result(lambda: file.write(data, 0, task)) == step["ret"], where
        elif path.startswith("options/"):
            name = path.split("/")[1].replace("-", "_")
            self.options = msgspec.structs.replace(self.options, **{name: data == b"1"})
        elif path == "buffer_size_kb":
            self.fs.buffer.write_buffer_size_kb(data)
        elif path == "trace_clock":
            self.fs.buffer.set_clock(self.fs.clocks.parse(data))
        elif path.startswith("events/"):
            task = self.task(0)
            assert self.fs.file(path).open(os.O_WRONLY, task).write(data, 0, task) == len(data)
        else:
            cpu = _PER_CPU.match(path)
            trunc = os.O_TRUNC if step["trunc"] else 0
            file = self.output.open_trace(os.O_WRONLY | trunc, int(cpu[1]) if cpu else None)
            assert file.write(data, 0, self.task(0)) == step["ret"], where
            file.release()

    def _delete(self, step: dict, where: str) -> None:
        # trace_output.c closed the registering file after DIAG_IOCSUNREG.
        raw = self.client.user_unreg(bit=0, word=len(self.events) - 1)
        self.data_file.ioctl(uapi.DIAG_IOCSUNREG, raw, self.client.task)
        self.data_file.release()
        name = self.client.name(step["name"])
        assert self._result(lambda: self.data_file.ioctl(uapi.DIAG_IOCSDEL, name,
                                                         self.client.task)) == step["ret"]

    def _read(self, step: dict, where: str) -> None:
        # The kernel saves a comm when the task is switched out while events
        # are on, so a capture shows it or <...> depending on the scheduler:
        # the saved comm is fed in as that read saw it.
        comms = {comm for comm, _ in printed_lines(step["results"])}
        assert len(comms) <= 1, f"{where}: comm changed within one read"
        for comm in comms:
            if comm == "<...>":
                self.fs.cmdlines.comms.pop(self.pid, None)
            else:
                self.fs.cmdlines.comms[self.pid] = comm
        cpu = _PER_CPU.match(step["path"])
        number = int(cpu[1]) if cpu else None
        pipe = step["path"].endswith("trace_pipe")
        file = (self.output.open_pipe(number) if pipe
                else self.output.open_trace(os.O_RDONLY, number))
        offset = 0
        for i, expected in enumerate(step["results"]):
            try:
                got = file.read(offset, step["size"]).decode("latin-1")
            except WouldBlock:
                got = "EAGAIN"
            offset += len(got)
            assert got == expected, f"{where}: read {i}"
        file.release()


def _cases(path: Path) -> list[tuple[Path, str]]:
    with path.open() as f:
        return [(path, case) for case in json.load(f)["cases"]]


@pytest.mark.parametrize(("path", "case"), _cases(GOLDEN_6_12) + _cases(GOLDEN_6_18),
                         ids=lambda value: value if isinstance(value, str) else value.stem)
def test_golden_replay(path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with path.open() as f:
        golden = json.load(f)
    Replay(golden, case, monkeypatch).run()


# -- rules the captures do not reach ---------------------------------------------------


@pytest.mark.parametrize(("flags", "preempt_count", "text"), [
    (0, 0, "....."),
    (0, 1, "...1."),
    (0, 0x2F, "...f2"),
    (0x01, 0, "d...."),
    (0x01 | 0x80, 0, "D...."),
    (0x80, 0, "b...."),
    (0x04 | 0x02 | 0x20, 0, ".B..."),
    (0x04 | 0x20, 0, ".N..."),
    (0x02 | 0x20, 0, ".L..."),
    (0x04 | 0x02, 0, ".b..."),
    (0x04, 0, ".n..."),
    (0x02, 0, ".l..."),
    (0x20, 0, ".p..."),
    (0x40 | 0x08, 0, "..Z.."),
    (0x40, 0, "..z.."),
    (0x08 | 0x10, 0, "..H.."),
    (0x08, 0, "..h.."),
    (0x10, 0, "..s.."),
    (0x01 | 0x04 | 0x20 | 0x10, 0x25, "dNs52"),
])
def test_lat_fmt(flags: int, preempt_count: int, text: str) -> None:
    assert lat_fmt(flags, preempt_count) == text


@pytest.mark.parametrize(("ts", "in_ns", "text"), [
    (1_674_907_139_000, True, "  1674.907139"),
    (3_992_072_561, True, "     3.992073"),   # ns2usecs rounds to nearest
    (999_999_999_600, True, "  1000.000000"),
    (123_456_789_012_345_678, True, " 123456789.012346"),
    (3, False, "            3"),
    (6_085_020_856_021, False, " 6085020856021"),
])
def test_print_time(ts: int, in_ns: bool, text: str) -> None:
    assert print_time(ts, in_ns) == text


class Small:
    """A 2-CPU tracefs with a hand-driven clock, and its text files."""

    def __init__(self, buffer_size_kb: int = 1410) -> None:
        self.clock = ManualClock(1_000_000_000)
        ip = 0xFFFFFFFF81000000
        self.fs = Tracefs(nr_cpus=2, memory=FakeMemory(),
                          clocks=TraceClocks.from_source(self.clock),
                          buffer_size_kb=buffer_size_kb, marker_ip=ip)
        self.output = TraceOutput(self.fs.top, nr_cpus=2, ksym=marker_symbols(ip))
        # Markers alone do not save comms (only a context switch while event
        # tracing is on does): give the writer one, as if that had happened.
        self.fs.cmdlines.save_comm(Task(pid=7, tgid=Tgid(7), comm="w"))

    def mark(self, text: str, cpu: int = 0, pid: int = 7) -> None:
        self.clock.advance(1000)
        task = Task(pid=pid, tgid=Tgid(pid), cpu=cpu, comm="w")
        self.fs.file("trace_marker").open(os.O_WRONLY, task).write(text.encode(), 0, task)

    def line(self, text: str, cpu: int = 0, usecs: int = 1) -> str:
        return (f"               w-7       [{cpu:03d}] ...1.     1.{usecs:06d}: "
                f"tracing_mark_write: {text}\n")

    def trace(self, cpu: int | None = None, size: int = 65536) -> str:
        file = self.output.open_trace(os.O_RDONLY, cpu)
        out, offset = b"", 0
        while chunk := file.read(offset, size):
            out += chunk
            offset += len(chunk)
        file.release()
        return out.decode("latin-1")


# What is done to an engine given marker_ip as a callable -> how often it was asked, and the
# lines the last read of trace named tracing_mark_write in; the host's kallsyms (15 ms) is
# read only once a record or a line needs the address.
MARKER_IP_ASKED = [
    ("built", [], 0, 0),
    ("trace read, no marker", ["trace"], 0, 0),
    ("marker written", ["mark"], 1, 0),
    ("markers written, then read", ["mark", "mark", "trace"], 1, 2),
]


@pytest.mark.parametrize(("steps", "asked", "named"), [row[1:] for row in MARKER_IP_ASKED],
                         ids=[row[0] for row in MARKER_IP_ASKED])
def test_marker_ip_is_found_once_on_first_use(steps: list[str], asked: int, named: int) -> None:
    clock = ManualClock(1_000_000_000)
    calls: list[int] = []

    def find() -> int:
        calls.append(1)
        return 0xFFFFFFFF81000000

    fs = Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=TraceClocks.from_source(clock),
                 marker_ip=find)
    task = Task(pid=7, tgid=Tgid(7), cpu=0, comm="w")
    fs.cmdlines.save_comm(task)
    text = ""
    for step in steps:
        clock.advance(1000)
        if step == "mark":
            fs.file("trace_marker").open(os.O_WRONLY, task).write(b"hi", 0, task)
        else:
            trace = fs.output.open_trace(os.O_RDONLY, None)
            text = trace.read(0, 65536).decode()
            trace.release()
    assert len(calls) == asked
    # The record's ip is the address found: the line names the symbol, not an address.
    assert text.count("tracing_mark_write: hi\n") == named


def test_header_counts_the_whole_buffer_even_per_cpu() -> None:
    s = Small()
    s.mark("a", cpu=1)
    s.mark("b", cpu=1)
    text = s.trace(cpu=0)
    assert "# entries-in-buffer/entries-written: 2/2   #P:2\n" in text
    assert "tracing_mark_write" not in text


@pytest.mark.parametrize(("path_cpu", "flags", "left"), [
    (None, os.O_WRONLY | os.O_TRUNC, []),
    (None, os.O_RDWR | os.O_TRUNC, []),
    (None, os.O_RDONLY | os.O_TRUNC, ["zero", "one"]),   # no FMODE_WRITE: no clear
    (None, os.O_WRONLY, ["zero", "one"]),
    (1, os.O_WRONLY | os.O_TRUNC, ["zero"]),
    (0, os.O_WRONLY | os.O_TRUNC, ["one"]),
])
def test_open_with_o_trunc_clears(path_cpu: int | None, flags: int, left: list[str]) -> None:
    s = Small()
    s.mark("zero", cpu=0)
    s.mark("one", cpu=1)
    file = s.output.open_trace(flags, path_cpu)
    assert file.write(b"anything", 0, Task(pid=1, tgid=Tgid(1))) == 8
    file.release()
    assert re.findall(r"tracing_mark_write: (\w+)", s.trace()) == left


def test_an_open_reader_keeps_the_buffer_from_resizing() -> None:
    s = Small()
    reader = s.output.open_trace(os.O_RDONLY)
    writer = s.output.open_trace(os.O_WRONLY)
    with pytest.raises(TracefsError) as err:
        s.fs.buffer.write_buffer_size_kb(b"8")
    assert err.value.errno == errno.EBUSY
    reader.release()
    reader.release()
    s.fs.buffer.write_buffer_size_kb(b"8")
    writer.release()


def test_trace_rereads_from_zero_with_a_fresh_header() -> None:
    s = Small()
    s.mark("a")
    file = s.output.open_trace(os.O_RDONLY, None)
    first = file.read(0, 65536)
    assert first.endswith(s.line("a").encode()) and file.read(len(first), 100) == b""
    s.mark("b")
    again = file.read(0, 65536).decode()
    assert "2/2" in again and again.endswith(s.line("a") + s.line("b", usecs=2))
    # Any other jump starts over too and skips to the offset.
    assert file.read(10, 5) == again[10:15].encode()
    file.release()


def test_trace_reads_return_whole_lines_that_fit_the_seq_file_buffer() -> None:
    s = Small()
    for i in range(60):
        s.mark(f"{i:02d}")
    file = s.output.open_trace(os.O_RDONLY, None)
    sizes, offset = [], 0
    while chunk := file.read(offset, 65536):
        sizes.append(len(chunk))
        offset += len(chunk)
    # A 517-byte header and 74-byte lines in 4 KiB: 48 lines, then 12.
    assert sizes == [517 + 48 * 74, 12 * 74]
    # A small read takes the rest of a line before formatting more.
    file = s.output.open_trace(os.O_RDONLY, None)
    assert len(file.read(0, 600)) == 600 and len(file.read(600, 100)) == 100
    file.release()


def test_annotation_marks_each_cpu_from_the_third_entry_on() -> None:
    # With overruns at open, the first entry of each CPU is announced, but
    # not for the first two entries of the trace (test_cpu_buff_start).
    s = Small(buffer_size_kb=4)
    s.mark("a", cpu=0)
    for i in range(400):
        s.mark(f"{i}", cpu=1)       # cpu1 overwrites its oldest: idx 1 is cpu1
    s.mark("z", cpu=0)
    text = s.trace()
    assert "#####" not in text and text.count("[001]") < 400
    s = Small(buffer_size_kb=4)
    for i in range(400):
        s.mark(f"{i}", cpu=1)
    s.mark("z", cpu=0)
    assert "\n##### CPU 0 buffer started ####\n" + s.line("z", usecs=401) in s.trace()
    s.fs.buffer.reset()             # no overrun left: no annotation
    s.mark("y", cpu=1)
    s.mark("x", cpu=1)
    s.mark("z", cpu=0)
    assert "#####" not in s.trace()


def test_pipe_readers_are_exclusive_per_cpu() -> None:
    s = Small()
    whole = s.output.open_pipe()
    for cpu in (None, 0, 1):
        with pytest.raises(TracefsError) as err:
            s.output.open_pipe(cpu)
        assert err.value.errno == errno.EBUSY
    whole.release()
    whole.release()
    cpu0 = s.output.open_pipe(0)
    cpu1 = s.output.open_pipe(1)
    with pytest.raises(TracefsError):
        s.output.open_pipe(0)
    with pytest.raises(TracefsError):
        s.output.open_pipe()
    cpu0.release()
    s.output.open_pipe(0).release()
    cpu1.release()
    s.output.trace_pipe_node().open(os.O_RDONLY, Task(pid=1, tgid=Tgid(1))).release()


def test_pipe_blocks_when_empty_and_consumes_what_it_formats() -> None:
    s = Small()
    pipe = s.output.open_pipe()
    with pytest.raises(WouldBlock):
        pipe.read(0, 100)
    assert pipe.read(0, 0) == b""
    s.mark("one")
    s.mark("two", cpu=1)
    s.mark("three")
    line = s.line("one").encode()
    assert pipe.read(0, 10) == line[:10]          # one line formatted and consumed
    assert pipe.read(0, 0) == b""
    assert pipe.read(0, 1000) == line[10:]        # the rest alone
    pipe.release()                               # "two" and "three" stay
    pipe = s.output.open_pipe(1)
    assert pipe.read(0, 1000) == s.line("two", cpu=1, usecs=2).encode()
    with pytest.raises(WouldBlock):
        pipe.read(0, 1000)
    pipe.release()
    assert s.output.open_pipe().read(0, 8000) == s.line("three", usecs=3).encode()


def test_pipe_batch_stops_at_the_read_size_and_before_a_line_too_big() -> None:
    s = Small()
    for text in ("a", "b"):
        s.mark(text)
    task = Task(pid=7, tgid=Tgid(7), comm="w")
    s.clock.advance(1000)
    raw = s.fs.file("trace_marker_raw").open(os.O_WRONLY, task)
    raw.write(b"\x01\0\0\0" + bytes(4000), 0, task)
    s.mark("c")
    pipe = s.output.open_pipe()
    # Two lines reach 100 bytes: the batch ends after the second.
    both = (s.line("a") + s.line("b", usecs=2)).encode()
    assert pipe.read(0, 100) == both[:100]
    assert pipe.read(0, 10000) == both[100:]
    # The raw line alone is cut (no newline, no room for [LINE TOO BIG]).
    big = pipe.read(0, 10000)
    assert len(big) == 8153 and big.endswith(b" 00")
    assert pipe.read(0, 10000) == s.line("c", usecs=4).encode()
    pipe.release()


class OwnText(_ftrace_events.FtraceEvent):
    """An event kind that prints itself (as synthetic events do)."""

    def print_trace(self, entry: bytes) -> str:
        return f"{self.name}: own {len(entry)}\n"


def test_events_print_by_kind() -> None:
    s = Small()
    own = OwnText("own", (), '""', has_reg=False)
    s.fs.events.add(own)
    task = Task(pid=7, tgid=Tgid(7), comm="w")
    for type_ in (own.id, 4242):
        s.clock.advance(1000)
        s.fs.top.record(struct.pack("<HBBi", type_, 0, 0, 7) + b"abc", task)
    text = s.trace()
    assert text.endswith(".000001: own: own 12\n"
                         "               w-7       [000] .....     1.000002: Unknown type 4242\n")


@pytest.mark.parametrize(("ip", "shown"), [
    (0xFFFFFFFF81000000, "tracing_mark_write"),
    (0, "0"),
    (0x1234, "0x00001234"),
    (0xFFFFFFFF810C1695, "0xffffffff810c1695"),
])
def test_print_ip(ip: int, shown: str) -> None:
    s = Small()
    task = Task(pid=7, tgid=Tgid(7), comm="w")
    s.fs.top.record(struct.pack("<HBBiQ", _ftrace_events.TRACE_PRINT, 0, 1, 7, ip) + b"hi\n\0",
                    task)
    assert s.trace().endswith(f": {shown}: hi\n")


@pytest.mark.parametrize(("cpu", "percent", "readable"), [
    (None, 50, True),      # the all-CPU pipe: any event
    (0, 50, False),        # a per-CPU pipe waits for buffer_percent (6.18 measured)
    (0, 0, True),
    (1, 0, False),
])
def test_pipe_poll(cpu: int | None, percent: int, readable: bool) -> None:
    s = Small()
    output = TraceOutput(s.fs.top, nr_cpus=2, buffer_percent=lambda: percent)
    pipe = output.open_pipe(cpu)
    assert pipe.poll() == 0
    s.mark("poll me", cpu=0)
    assert pipe.poll() == (0x41 if readable else 0)
    pipe.release()


# -- lines built whole ------------------------------------------------------------------


class _Lines:
    """A line printer over every kind of event: markers, fields, its own text, unknown."""

    def __init__(self, in_ns: bool) -> None:
        self.small = Small()
        fs = self.small.fs
        self.own = OwnText("own", (), '""', has_reg=False)
        self.fields = _events.TraceEvent("user_events", "f%s", (
            Field(type="u8", name="a", offset=8, size=1, is_signed=False),
            Field(type="s64", name="b", offset=9, size=8, is_signed=True),
            Field(type="__rel_loc char[]", name="c", offset=17, size=4, is_signed=False),
        ), '""')
        fs.events.add(self.own)
        fs.events.add(self.fields)
        fs.cmdlines.tgids[7] = 7
        self.options = OutputOptions()
        self.printer = TraceOutput(fs.top, nr_cpus=2, ksym=marker_symbols(0x1234),
                                   options=lambda: self.options).line_printer()
        self.printer.in_ns = in_ns
        self.types = (_ftrace_events.TRACE_PRINT, _ftrace_events.TRACE_RAW_DATA, self.own.id,
                      self.fields.id, 4242)


@given(st.booleans(), st.integers(0, 4), st.integers(0, 255), st.integers(0, 255),
       st.sampled_from([0, 7, 8, -1]), st.binary(max_size=40), st.integers(0, 2**64 - 1),
       st.integers(0, 1), st.integers(0, 3), st.booleans(), st.booleans())
def test_a_line_built_whole_is_what_the_pieces_write(
        in_ns: bool, kind: int, flags: int, preempt_count: int, pid: int, body: bytes, ts: int,
        cpu: int, lost: int, irq_info: bool, record_tgid: bool) -> None:
    lines = _Lines(in_ns)
    if kind < 2:
        body = bytes(8) + body  # ftrace writes its records whole: ip or id first
    entry = struct.pack("<HBBi", lines.types[kind], flags, preempt_count, pid) + body
    record = TraceRecord(cpu=cpu, ts=ts, data=entry + bytes(-len(entry) % 4))
    lines.options = OutputOptions(irq_info=irq_info, record_tgid=record_tgid)
    lines.printer.start_read()
    seq = TraceSeq()
    lines.printer.print_pieces(seq, record, lost)
    line = lines.printer.line(record, lost)
    if line is None:  # a record too short for its fields: left to the pieces
        assert kind == 3 and len(record.data) < 21
    else:
        assert line == seq.text() and not seq.full


def test_each_read_prints_with_the_comms_options_and_events_of_its_time() -> None:
    # Lines are printed at read time; nothing one read kept changes the next.
    s = Small()
    for text in ("a", "b", "c"):
        s.mark(text)
    options = [OutputOptions()]
    pipe = TraceOutput(s.fs.top, nr_cpus=2, ksym=marker_symbols(0xFFFFFFFF81000000),
                       options=lambda: options[0]).open_pipe()
    assert pipe.read(0, 1) == s.line("a").encode()[:1]
    assert pipe.read(0, 8000) == s.line("a").encode()[1:]
    s.fs.cmdlines.save_comm(Task(pid=7, tgid=Tgid(7), comm="renamed"))
    options[0] = OutputOptions(irq_info=False)
    b = "         renamed-7       [000]      1.000002: tracing_mark_write: b\n"
    assert pipe.read(0, len(b)).decode() == b
    s.fs.events.remove(s.fs.events.by_id(_ftrace_events.TRACE_PRINT))
    assert pipe.read(0, 8000).decode() == (
        "         renamed-7       [000]      1.000003: Unknown type 5\n")
    pipe.release()


def test_a_line_that_does_not_fit_whole_is_cut_piece_by_piece() -> None:
    lines = _Lines(in_ns=True)
    record = TraceRecord(cpu=0, ts=1, data=struct.pack(
        "<HBBiI", _ftrace_events.TRACE_RAW_DATA, 0, 0, 7, 1) + bytes(3000))
    seq = TraceSeq()
    seq.puts("x" * 100)
    lines.printer.print_line(seq, record)
    assert seq.full and seq.len < TRACE_SEQ_BUFFER_SIZE
    assert seq.text().endswith(" 00") and len(seq.text()) == TRACE_SEQ_BUFFER_SIZE - 2
