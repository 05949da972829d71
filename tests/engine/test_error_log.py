"""``error_log``: text, rotation, clearing; compared with the kernel's capture."""

from __future__ import annotations

import os

import pytest

from tracefs_fuse.engine._clock import ManualClock
from tracefs_fuse.engine._error_log import TRACING_LOG_ERRS_MAX, ErrorLog, err_pos, error_log_node
from tracefs_fuse.engine._tree import TRACE_MODE_WRITE

from .synth_oracle import ROOT, golden, mask

CASES = golden("base")


@pytest.mark.parametrize(("ts", "stamp"), [
    (0, "[    0.000000]"),
    (3_385_805_999, "[    3.385805]"),  # microseconds truncated, not rounded
    (123_456_789_012_345, "[123456.789012]"),
])
def test_timestamp(ts: int, stamp: str) -> None:
    log = ErrorLog(now=ManualClock(ts))
    log.log("synthetic_events", "bar u64", "Illegal name", 4)
    assert log.render() == (f"{stamp} synthetic_events: error: Illegal name\n"
                            "  Command: bar u64\n"
                            "               ^\n")


def test_matches_kernel_text() -> None:
    """One entry as the kernel printed it (capture case syn-4: ``foo u64``)."""
    log = ErrorLog(now=ManualClock(0))
    log.log("synthetic_events", "foo u64",
            "Command must be of the form: <name> field[;field] ...", 0)
    assert CASES["syn-4"]["op"] == "write synthetic_events foo u64\n"
    assert mask(log.render()) == mask(CASES["syn-4"]["error_log"])


def test_keeps_last_eight() -> None:
    clock = ManualClock(0)
    log = ErrorLog(now=clock)
    for n in range(1, 11):
        clock.advance(1000)
        log.log("synthetic_events", f"bad{n} x",
                "Command must be of the form: <name> field[;field] ...", 0)
    assert len(log.entries) == TRACING_LOG_ERRS_MAX
    # The kernel's own rotation, from the capture: bad3 .. bad10.
    assert mask(log.render()) == mask(CASES["elog-bad-10"]["file:error_log"])


def test_loc_is_cut_to_127_characters() -> None:
    log = ErrorLog(now=ManualClock(0))
    log.log("x" * 200, "cmd", "message", 0)
    first = log.render().splitlines()[0]
    assert first == "[    0.000000] " + ("x" * 200 + ": error: ")[:127] + "message"


@pytest.mark.parametrize(("command", "part", "pos"), [
    ("foo u64 a; u64 b[2]", "u64", 4),  # the first occurrence, even if not the culprit
    ("foo bar", "baz", 0),              # not found: 0
    ("s:synthetic/x u64 a", "x", 12),
])
def test_err_pos(command: str, part: str, pos: int) -> None:
    assert err_pos(command, part) == pos


def test_file_write_is_ignored_and_trunc_clears() -> None:
    log = ErrorLog(now=ManualClock(0))
    log.log("synthetic_events", "c", "m", 0)
    node = error_log_node(log)
    assert node.mode & 0o777 == TRACE_MODE_WRITE
    assert node.open(os.O_WRONLY, ROOT).write(b"anything", 0, ROOT) == 8
    node.open(os.O_WRONLY | os.O_APPEND, ROOT)
    assert len(log.entries) == 1
    node.open(os.O_WRONLY | os.O_TRUNC, ROOT)
    assert not log.entries and log.render() == ""
    node.open(os.O_RDONLY | os.O_TRUNC, ROOT)  # a read-only open never clears
    assert node.open(os.O_RDONLY, ROOT).read(0, 100) == b""


def test_mode_matches_kernel() -> None:
    line = next(li for li in CASES["elog-trunc"]["mode"].splitlines() if li.endswith(" error_log"))
    assert line.startswith("-rw-r-----")
