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
from pathlib import Path
from typing import Iterator

import msgspec
import pytest

from tracefs_fuse.engine import _events, _ftrace_events
from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._clock import CounterClock, ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError, WouldBlock
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._output import OutputOptions, TraceOutput, marker_symbols
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
    comm: str
    text: str


def printed_lines(results: list[str]) -> Iterator[Line]:
    text = "".join(r for r in results if r != "EAGAIN")
    matches = list(_CONTEXT.finditer(text))
    for match, following in zip(matches, matches[1:] + [None]):
        end = following.start() if following is not None else len(text)
        rest = text[match.end():end].split("\n", 1)[0]
        yield Line(int(match["cpu"]), match["ts"], match["comm"].strip(), rest)


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
        first_id = next((s["id"] for s in self.steps if s["op"] == "register"), None)
        if first_id is not None:
            # The kernel's ids are the lowest free too; start where it started.
            monkeypatch.setattr(_events, "FIRST_DYNAMIC_ID", first_id)
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
        self.fs = Tracefs(nr_cpus=2, memory=self.memory, clocks=clocks, marker_ip=marker_ip)
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

    def _time_stamps(self) -> Iterator[tuple[int, str]]:
        """Each recording step's (time stamp, comm), as the kernel printed it.

        Records nobody printed (overwritten, consumed unseen, cleared) get
        times evenly between their printed neighbours.
        """
        seen: dict[Line, None] = {}
        for step in self.steps:
            if step["op"] == "read":
                seen.update(dict.fromkeys(printed_lines(step["results"])))
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
        comm = known[0][1].comm
        out: list[int] = []
        for i, line in enumerate(assigned):
            if line is not None:
                out.append(self._ns(line.ts))
                continue
            before = [(j, self._ns(l.ts)) for j, l in known if j < i]
            after = [(j, self._ns(l.ts)) for j, l in known if j > i]
            lo_i, lo = before[-1] if before else (-1, stamps[0] - 1_000 * (len(assigned) + 1))
            hi_i, hi = after[0] if after else (len(assigned), stamps[-1] + 1_000 * len(assigned))
            out.append(lo + (hi - lo) * (i - lo_i) // (hi_i - lo_i))
        return iter([(ts, comm) for ts in out])

    @staticmethod
    def _ns(ts: str) -> int:
        if "." in ts:
            secs, usecs = ts.split(".")
            return int(secs) * 1_000_000_000 + int(usecs) * 1_000
        return int(ts)

    def task(self, cpu: int, comm: str) -> Task:
        # tgid 0: nothing recorded a tgid for the kernel (record-tgid shows "-------").
        return Task(pid=self.pid, tgid=Tgid(0), cpu=cpu, comm=comm)

    def _tick(self) -> str:
        ts, comm = next(self.times)
        if self.fs.buffer.clock.in_ns:
            self.clock.now = ts
        else:
            self.counter.value = ts - 1  # the write reads it once
        return comm

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
        comm = self._tick() if step["ret"] >= 0 else ""
        task = msgspec.structs.replace(self.client.task, cpu=step["cpu"], comm=comm)
        index = self.indices[step["index"]]
        payload = index.to_bytes(4, "little") + bytes.fromhex(step["payload"])
        assert self._result(lambda: self.data_file.write(payload, 0, task)) == step["ret"], where

    def _write(self, step: dict, where: str) -> None:
        path, data = step["path"], bytes.fromhex(step["data"])
        if path in ("trace_marker", "trace_marker_raw"):
            comm = self._tick() if step["ret"] >= 0 else ""
            task = self.task(step["cpu"], comm)
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
            task = self.task(0, "")
            assert self.fs.file(path).open(os.O_WRONLY, task).write(data, 0, task) == len(data)
        else:
            cpu = _PER_CPU.match(path)
            trunc = os.O_TRUNC if step["trunc"] else 0
            file = self.output.open_trace(os.O_WRONLY | trunc, int(cpu[1]) if cpu else None)
            assert file.write(data, 0, self.task(0, "")) == step["ret"], where
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
