"""``tracefs-fuse show``: filters, streams, --follow, trace.dat, and the Trace Event Format."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tracefs_fuse.cli import _main as cli
from tracefs_fuse.cli._chrome import CPU_PROCESS, chrome_trace
from tracefs_fuse.decode import Event, Lost, encode_lines

SHOW = [sys.executable, "-P", "-m", "tracefs_fuse", "show"]

EVENTS = [
    Event(system="user_events", name="hello", id=1000, cpu=0, timestamp=1_000_001_500, pid=7,
          tgid=7, comm="hello", fields={"who": "world", "times": 2}),
    Lost(cpu=1, timestamp=1_000_002_000, count=3),
    Event(system="ftrace", name="print", id=5, cpu=1, timestamp=1_000_003_000, pid=8,
          fields={"ip": 0, "buf": "mark\n"}),
    Event(system="user_events", name="bye", id=1001, cpu=1, timestamp=1_000_004_000, pid=9,
          tgid=7, comm="worker", fields={}, error="its format does not parse"),
]


def show(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(["show", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(encode_lines(EVENTS))
    return path


@pytest.mark.parametrize(("globs", "names"), [
    (["hello"], ["user_events:hello"]),
    (["user_events:*"], ["user_events:hello", "user_events:bye"]),
    (["ftrace:print", "bye"], ["ftrace:print", "user_events:bye"]),
    (["nothing"], []),
])
def test_show_event_keeps_what_the_globs_name(recording: Path, globs: list[str], names: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = show([str(recording), *(a for g in globs for a in ("--event", g))], capsys)
    assert status == 0
    lines = out.splitlines()
    assert [line for line in lines if "lost 3 events" in line] == [
        "# [001]     1.000002: lost 3 events"]  # losses always show
    assert [line.split(": ", 1)[1].split()[0] for line in lines if "lost" not in line] == names


def test_show_points_a_trace_dat_at_trace_cmd_report(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    trace_dat = tmp_path / "trace.dat"
    trace_dat.write_bytes(b"\x17\x08\x44tracing6\x00\x00\x00\x00\x10\x00\x00\n\x00\xff")
    assert show([str(trace_dat)], capsys) == (2, "", (
        f"tracefs-fuse show: {trace_dat}: a trace-cmd recording (trace.dat), not JSON Lines: "
        "read it with trace-cmd report\n"))


def test_show_names_the_line_that_is_not_a_record(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(encode_lines(EVENTS[:1]) + b"\n{\"kind\": \"nope\"}\n")
    status, out, err = show([str(bad)], capsys)
    assert status == 2 and err.startswith(f"tracefs-fuse show: {bad}: line 3: ")


def read_line(stream: object, fd: int) -> str:
    """The next line the child prints (it must print it within 30 s)."""
    assert select.select([fd], [], [], 30)[0], "show printed nothing"
    return stream.readline()  # type: ignore[attr-defined, no-any-return]


def test_show_dash_shows_each_event_as_its_line_arrives() -> None:
    with subprocess.Popen([*SHOW, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
        assert child.stdin is not None and child.stdout is not None
        for event in (EVENTS[0], EVENTS[2]):
            child.stdin.write(encode_lines([event]))
            child.stdin.flush()  # and keep standard input open
            line = read_line(child.stdout, child.stdout.fileno()).decode()
            assert f" {event.full_name}" in line  # type: ignore[union-attr]
        child.stdin.close()
        assert child.wait(timeout=30) == 0


def test_show_follow_shows_what_is_appended(tmp_path: Path) -> None:
    path = tmp_path / "growing.jsonl"
    path.write_bytes(encode_lines(EVENTS[:1]))
    with subprocess.Popen([*SHOW, "--follow", str(path)], stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        follow(child, path)


def follow(child: subprocess.Popen[bytes], path: Path) -> None:
    assert child.stdout is not None
    try:
        assert "user_events:hello" in read_line(child.stdout, child.stdout.fileno()).decode()
        with open(path, "ab") as f:
            line = encode_lines(EVENTS[2:3])
            f.write(line[:10])  # half a line first: nothing is shown of it yet
            f.flush()
            f.write(line[10:])
        assert "ftrace:print" in read_line(child.stdout, child.stdout.fileno()).decode()
    finally:
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 130


# -- the Trace Event Format -------------------------------------------------------------

#: What every event of the format has ("Trace Event Format", Google's spec), and an
#: instant event's scope.
REQUIRED = {"name", "ph", "ts", "pid", "tid"}


def check_trace(trace: dict[str, object], recording: list[Event | Lost]) -> None:
    """Every record is there: each event on its thread's and its CPU's track."""
    assert set(trace) == {"traceEvents", "displayTimeUnit"}
    events = trace["traceEvents"]
    assert isinstance(events, list)
    for entry in events:
        assert REQUIRED <= set(entry), entry
        assert entry["ph"] in ("i", "M")
        if entry["ph"] == "i":
            assert entry["s"] == "t" and isinstance(entry["ts"], float)
    instants = [e for e in events if e["ph"] == "i"]
    expected = []
    for record in recording:
        cpu_track = (CPU_PROCESS, CPU_PROCESS + 1 + record.cpu)
        if isinstance(record, Lost):
            expected.append(("lost events", record.timestamp / 1000, cpu_track))
            continue
        thread_track = (record.tgid if record.tgid is not None else record.pid, record.pid)
        expected.append((record.full_name, record.timestamp / 1000, thread_track))
        expected.append((record.full_name, record.timestamp / 1000, cpu_track))
    assert [(e["name"], e["ts"], (e["pid"], e["tid"])) for e in instants] == expected
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["name"] == "thread_name"}
    assert all(track in names for _, _, track in expected)


def test_chrome_format_holds_every_record_with_the_required_keys() -> None:
    trace = chrome_trace(EVENTS)
    check_trace(trace, EVENTS)
    hello = next(e for e in trace["traceEvents"] if e["name"] == "user_events:hello")
    assert hello == {"name": "user_events:hello", "cat": "user_events", "ph": "i", "s": "t",
                     "ts": 1_000_001.5, "pid": 7, "tid": 7,
                     "args": {"who": "world", "times": 2}}
    bye = next(e for e in trace["traceEvents"] if e["name"] == "user_events:bye")
    assert bye["args"] == {"error": "its format does not parse"}
    lost = next(e for e in trace["traceEvents"] if e["name"] == "lost events")
    assert lost["args"] == {"count": 3}


def test_show_format_chrome_writes_one_json_object(recording: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = show(["--format", "chrome", str(recording)], capsys)
    assert status == 0
    check_trace(json.loads(out), EVENTS)


def test_show_follow_is_not_for_streams_or_chrome(recording: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--follow", "-"], ["--follow", "--format", "chrome", str(recording)]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["show", *argv])
        assert exit_.value.code == 2
        assert "error: argument --follow: not with FILE '-'" in capsys.readouterr().err
