"""Synthetic events through a real mount: from a shell (dynamic_events, enable,
inject, trace) and from Python in the daemon's own process (tracefs_fuse.synth)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import trio

import tracefs_fuse
from tracefs_fuse import synth as S
from tracefs_fuse.daemon._config import MountConfig

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

LINE = re.compile(r"^\s*\S+-\d+\s+\[\d{3}\] \S{5}\s+[\d.]+: (.*)$")


def events_of(trace: str) -> list[str]:
    return [m.group(1) for line in trace.splitlines() if (m := LINE.match(line))]


def sh(tracefs: Mount, script: str) -> str:
    result = subprocess.run(["sh", "-ec", script], cwd=tracefs, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_shell_creates_enables_injects_and_reads_back(tracefs: Mount) -> None:
    out = sh(tracefs, """
        echo 's:wakeup_lat pid_t pid; u64 lat; char comm[16]' >> dynamic_events
        cat synthetic_events
        echo 1 > events/synthetic/wakeup_lat/enable
        echo 'pid=42 lat=1234 comm="worker"' > events/synthetic/wakeup_lat/inject
        cat trace
    """)
    # synth_events_seq_show: a tab after the name, arrays as "char[16] comm".
    assert out.splitlines()[0] == "wakeup_lat\tpid_t pid; u64 lat; char[16] comm"
    assert events_of(out) == ["wakeup_lat: pid=42 lat=1234 comm=worker"]
    fmt = tracefs.read("events/synthetic/wakeup_lat/format")
    # As Linux 6.12 prints it (tests/data/synth-captures-6.12.117.json): the
    # array length is not recorded for synthetic fields.
    assert "\tfield:char comm[];\toffset:24;\tsize:16;\tsigned:1;\n" in fmt


def test_busy_synthetic_event_cannot_be_deleted(tracefs: Mount) -> None:
    tracefs.write("dynamic_events", "s:busy u64 x\n")
    tracefs.write("events/synthetic/busy/enable", "1")
    with pytest.raises(OSError) as info:
        tracefs.write("dynamic_events", "!s:busy\n")
    assert info.value.errno == 16  # EBUSY
    tracefs.write("events/synthetic/busy/enable", "0")
    tracefs.write("dynamic_events", "!s:busy\n")
    assert tracefs.read("synthetic_events") == ""


def test_inject_into_a_user_event(tracefs: Mount) -> None:
    out = sh(tracefs, """
        echo 'u:shell_ev u32 count; char[8] tag' >> dynamic_events
        echo 1 > events/user_events/shell_ev/enable
        echo 'count=7 tag="hi"' > events/user_events/shell_ev/inject
        cat trace
    """)
    assert events_of(out) == ["shell_ev: count=0x7 (7) tag=hi"]


def test_bad_synthetic_command_is_logged(tracefs: Mount) -> None:
    with pytest.raises(OSError) as info:
        tracefs.write("synthetic_events", "bad_ev u64 x; nosuchtype y\n")
    assert info.value.errno == 22  # EINVAL
    log = tracefs.read("error_log").splitlines()
    assert re.fullmatch(r"\[ *\d+\.\d{6}\] synthetic_events: error: Invalid type", log[0])
    assert log[1:] == ["  Command: bad_ev u64 x; nosuchtype y",
                       "                         ^"]


async def test_python_api_in_the_daemons_process(tmp_path: Path) -> None:
    """The in-kernel API's Python twin, driving the engine of a live mount."""
    mnt = tmp_path / "t"
    mnt.mkdir()
    async with trio.open_nursery() as nursery:
        daemon = await nursery.start(tracefs_fuse.serve, MountConfig(mountpoint=str(mnt)))
        fs = daemon.tracefs
        S.synth_event_create(fs, "api_event", [("u64", "value"), ("char[16]", "name")])
        S.trace_array_set_clr_event(fs, "synthetic", "api_event", True)
        with S.trace_get_event_file(fs, None, "synthetic", "api_event") as file:
            S.synth_event_trace(file, 41, b"first")
            state = S.synth_event_trace_start(file)
            S.synth_event_add_next_val(42, state)
            S.synth_event_add_next_val(b"second", state)
            S.synth_event_trace_end(state)
        daemon.engine_changed()
        # Read the mount from a worker thread: this thread serves it.
        trace = await trio.to_thread.run_sync((mnt / "trace").read_text)
        nursery.cancel_scope.cancel()
    assert events_of(trace) == ["api_event: value=41 name=first",
                                "api_event: value=42 name=second"]
