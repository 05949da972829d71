"""Replay of the oracle captures in ``tests/data/synth-captures-6.12.117.json``.

The capture (``tests/oracle/synth/synth_capture.sh``) is one long sequence of
steps against a real 6.12.117 tracefs; every step that changes state is a
case with its ``op``, its ``result`` and what the files showed afterwards.
:class:`Replay` runs the same ops against an engine, in order, and returns
what the engine shows in the same shape, masked where the kernel's answer
depends on the machine (timestamps, event ids, pids):

* ``error_log`` time stamps become ``[T]``;
* ``ID: <n>`` in ``format`` becomes ``ID: <id>``;
* records compare with ``common_type`` and ``common_pid`` masked unless the
  op set them, and only the bytes the engine wrote (the ring buffer pads
  records to 4 bytes with whatever the page held).

Ops on files the engine does not have (``trace``, ``options/``, triggers) and
the hist-trigger section at the end are not replayable; :func:`replayable`
says which cases are.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._tree import Dir, File

from .fakes import FakeMemory
from .pagedecode import decode_page

GOLDEN = Path(__file__).parents[1] / "data" / "synth-captures-6.12.117.json"
ROOT = Task(pid=100, tgid=Tgid(100), perfmon=True, cpu=0, comm="tfctl")
_TS = re.compile(r"^\[\s*\d+\.\d{6}\]", re.M)
_ID = re.compile(r"^ID: \d+$", re.M)
#: TRACE_FLAG_NEED_RESCHED | TRACE_FLAG_PREEMPT_RESCHED: whatever the
#: scheduler had pending when the kernel recorded.
_RESCHED_FLAGS = 0x04 | 0x20
#: Ops the engine cannot replay: files it does not have.
_UNSUPPORTED = ("trace ", "options/", "per_cpu/")


def golden(variant: str) -> dict:
    """The cases of one kernel variant ("base" or "probes"), in capture order."""
    return json.loads(GOLDEN.read_text(encoding="utf-8"))["variants"][variant]["cases"]


def mask(text: str) -> str:
    return _ID.sub("ID: <id>", _TS.sub("[T]", text))


def new_tracefs(clock: ManualClock | None = None) -> Tracefs:
    clocks = TraceClocks.from_source(clock or ManualClock(1_000_000_000))
    return Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=clocks)


def unescape(text: str) -> bytes:
    """tfctl's escapes: ``\\n``, ``\\t``, ``\\v``, ``\\0``."""
    table = {"n": "\n", "t": "\t", "v": "\v", "0": "\0"}
    return re.sub(r"\\([ntv0])", lambda m: table[m.group(1)], text).encode("latin-1")


def replayable(case: str, parts: dict) -> bool:
    op = parts.get("op", "")
    return (not case.startswith("hist-") and "op" in parts
            and not any(op.split(" ", 1)[1].startswith(p) for p in _UNSUPPORTED)
            and not op.startswith("uwrite"))


class Replay:
    """An engine driven by the capture's ops."""

    def __init__(self) -> None:
        self.clock = ManualClock(1_000_000_000)
        self.tfs = new_tracefs(self.clock)
        self.records: list[bytes] = []
        record = self.tfs.top.record

        def keep(entry: bytes, task: Task) -> None:
            self.records.append(bytes(entry))
            record(entry, task)

        self.tfs.top.record = keep  # type: ignore[method-assign]

    def open(self, path: str, flags: int):  # noqa: ANN201 - an OpenFile
        node = self.tfs.lookup(path)
        if node is None or isinstance(node, Dir):
            raise TracefsError(2 if node is None else 21, path)
        assert isinstance(node, File)
        return node.open(flags, ROOT)

    def run(self, op: str) -> str:
        """One op; tfctl's one-line outcome (and a read's text)."""
        self.clock.advance(1000)
        verb, rest = op.rstrip("\n").split(" ", 1)
        path, _, text = rest.partition(" ")
        if verb == "trunc" and path == "trace":
            self.tfs.buffer.reset()
            self.records.clear()
            return "ok 0\n"
        flags = {"write": os.O_WRONLY, "append": os.O_WRONLY | os.O_APPEND,
                 "trunc": os.O_WRONLY | os.O_TRUNC, "read": os.O_RDONLY}[verb]
        try:
            handle = self.open(path, flags)
        except TracefsError as error:
            return f"open {_name(error.errno)}\n"
        if verb == "read":
            try:
                data = handle.read(0, 1 << 20)
            except TracefsError as error:
                return f"read {_name(error.errno)}\n"
            return f"ok {len(data)}\n" + data.decode("latin-1")
        if verb == "trunc" and not text:
            return "ok 0\n"
        try:
            return f"ok {handle.write(unescape(text), 0, ROOT)}\n"
        except TracefsError as error:
            return f"write {_name(error.errno)}\n"
        finally:
            handle.release()

    def error_log(self) -> str:
        """Read and clear, as the capture does after every step."""
        text = self.tfs.error_log.render()
        self.tfs.error_log.clear()
        return mask(text)

    def read(self, path: str) -> str:
        return mask(self.open(path, os.O_RDONLY).read(0, 1 << 20).decode("latin-1"))

    def take_records(self) -> list[bytes]:
        records, self.records = self.records, []
        return records


def _name(code: int) -> str:
    return "ENOTSUPP" if code == 524 else __import__("errno").errorcode[code]


def oracle_records(pages: list[dict]) -> list[bytes]:
    """The records in drained sub-buffers, in order."""
    out = []
    for page in pages:
        out.extend(e.data for e in decode_page(bytes.fromhex(page["page"]), zero_tail=False).events)
    return out


def same_record(ours: bytes, theirs: bytes, op: str) -> bool:
    """Equal but for the masked header fields and the 4-byte padding."""
    if len(theirs) != (len(ours) + 3) & ~3:
        return False
    a, b = bytearray(ours), bytearray(theirs[:len(ours)])
    if "common_flags" not in op and len(b) > 2:
        b[2] &= ~_RESCHED_FLAGS
    if "common_type" not in op:
        a[0:2] = b[0:2] = b"\0\0"
    if "common_pid" not in op:
        a[4:8] = b[4:8] = b"\0\0\0\0"
    return a == b


def replay(variant: str) -> dict[str, dict[str, tuple[object, object]]]:
    """Run a variant's replayable cases in order: ``{case: {part: (kernel, engine)}}``."""
    engine = Replay()
    out: dict[str, dict[str, tuple[object, object]]] = {}
    for case, parts in golden(variant).items():
        if case.startswith("hist-"):
            break  # the hist section ends the capture and is not emulated
        if "op" not in parts:
            continue
        if not replayable(case, parts):
            continue
        op = parts["op"]
        got: dict[str, tuple[object, object]] = {}
        got["result"] = (parts["result"], engine.run(op))
        if "error_log" in parts:
            got["error_log"] = (mask(parts["error_log"]), engine.error_log())
        for name, text in parts.items():
            if name.startswith("file:"):
                path = name[5:].split("#", 1)[0]
                if path == "trace":
                    continue
                got[name] = (mask(text), engine.read(path))
        if "raw" in parts:
            theirs = oracle_records(parts["raw"])
            ours = engine.take_records()
            got["raw"] = ([r.hex() for r in theirs],
                          [t.hex() if len(ours) == len(theirs) and same_record(o, t, op) else o.hex()
                           for o, t in zip(ours, theirs)] + [o.hex() for o in ours[len(theirs):]])
        out[case] = got
    return out
