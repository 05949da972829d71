"""The ``user_events`` fixture and tracefs_fuse.testing: live waits, callables, cleanup."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tracefs_fuse.testing import RunFailed, run
from tracefs_fuse.testing.pytest_plugin import UserEvents

pytestmark = pytest.mark.uses_fuse

MARK = "/sys/kernel/tracing/trace_marker"


def mark(*texts: str) -> str:
    """A shell command writing each text to trace_marker (recorded as ftrace:print)."""
    return "; ".join(f"echo {t} > {MARK}" for t in texts)


def in_private_tracefs(note: str) -> dict[str, object]:
    """Runs in the child: proves where it is and leaves a marker."""
    with open("/proc/self/mounts") as f:
        ours = [line.split()[2] for line in f if line.split()[1] == "/sys/kernel/tracing"]
    with open(MARK, "w") as f:
        f.write(note)
    return {"mounts": ours, "pid": os.getpid()}


def raises() -> None:
    raise ValueError("from the child")


def test_callable_runs_in_a_child_under_the_tracefs(user_events: UserEvents) -> None:
    result = user_events.run(functools.partial(in_private_tracefs, "from-python"))
    assert result.result["mounts"][-1] == "fuse.tracefs"
    assert result.result["pid"] != os.getpid()
    marker = result.events.one("ftrace:print")
    assert (marker.fields["buf"], marker.pid) == ("from-python\n", result.result["pid"])


def test_callable_that_raises_fails_with_its_traceback(user_events: UserEvents) -> None:
    with pytest.raises(RunFailed, match="(?s)exited with 1.*ValueError: from the child"):
        user_events.run(raises)
    finished = user_events.run(raises, check=False)
    assert finished.returncode == 1 and finished.result is None


def test_callable_must_be_importable(user_events: UserEvents) -> None:
    with pytest.raises(TypeError, match="module-level function"):
        user_events.run(lambda: None)


def test_wait_for_follows_a_running_command(user_events: UserEvents, tmp_path: Path) -> None:
    go = tmp_path / "go"
    os.mkfifo(go)
    # The command marks "ready", then waits for us to let it finish.
    command = ["sh", "-c", f"{mark('ready')}; read x < {go}; {mark('done')}"]
    with user_events.start(command) as running:
        ready = running.wait_for("print", buf="ready\n", timeout=10)
        assert [e.fields["buf"] for e in running.events] == ["ready\n"]
        with open(go, "w") as fifo:
            fifo.write("go\n")
        done = running.wait_for("print", buf="done\n", timeout=10)
        assert done.timestamp > ready.timestamp
        finished = running.wait(30)
    assert finished.returncode == 0
    assert [e.fields["buf"] for e in finished.events] == ["ready\n", "done\n"]


def test_wait_for_sees_the_fast_paths_writes_of_a_waiting_command(
        user_events: UserEvents, tmp_path: Path, c_client: Callable[[str], Path]) -> None:
    """Writes the native fast path staged reach a recording while their writer
    waits and makes no further request (they once stayed staged until the next
    request, and a program's last ones could miss the recording altogether)."""
    go = tmp_path / "go"
    os.mkfifo(go)
    command = [str(c_client("emit_and_wait")), "/sys/kernel/tracing", "5", str(go)]
    with user_events.start(command) as running:
        running.wait_for("held", n=5, timeout=10)
        with open(go, "w") as fifo:
            fifo.write("go\n")
        finished = running.wait(30)
    assert [e.fields["n"] for e in finished.events.named("held")] == [1, 2, 3, 4, 5]


def test_wait_for_times_out_showing_what_arrived(user_events: UserEvents) -> None:
    with user_events.start(["sh", "-c", f"{mark('one')}; exec sleep 60"]) as running:
        running.wait_for("print", timeout=10)
        started = time.monotonic()
        with pytest.raises(AssertionError) as info:
            running.wait_for("print", buf="two\n", timeout=0.5)
        assert 0.5 <= time.monotonic() - started < 10
        stopped = running.stop()
    message = str(info.value)
    assert message.startswith("no event print with buf='two\\n' within 0.5 s\n1 event recorded:")
    assert "-> buf='one\\n', not 'two\\n'" in message
    assert stopped.returncode == 128 + signal.SIGTERM


def test_wait_for_fails_at_once_when_the_command_ends(user_events: UserEvents) -> None:
    running = user_events.start(["sh", "-c", mark("only")])
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"exited \(0\) without an event never"):
        running.wait_for("never", timeout=60)
    assert time.monotonic() - started < 30
    assert running.wait().events.one("print").fields["buf"] == "only\n"


def test_run_times_out_and_stops_the_command(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run(["sleep", "60"], timeout=1, workdir=tmp_path)


def test_run_failures_show_stderr_and_events(user_events: UserEvents) -> None:
    with pytest.raises(RunFailed) as info:
        user_events.run(["sh", "-c", f"{mark('before')}; echo oops >&2; exit 3"])
    assert "exited with 3" in str(info.value)
    assert "--- stderr ---\noops\n" in str(info.value)
    assert 'ftrace:print ip=' in str(info.value) and 'buf="before\\n"' in str(info.value)


def test_fixture_stops_what_a_test_left_running(tmp_path: Path) -> None:
    (tmp_path / "test_left.py").write_text(textwrap.dedent("""
        def test_leaves_it_running(user_events):
            user_events.start(["sh", "-c", "echo $$ > sleeper.pid; exec sleep 600"],
                              cwd=".")
            import os, time
            for _ in range(1000):
                if os.path.exists("sleeper.pid") and open("sleeper.pid").read().strip():
                    return
                time.sleep(0.01)
            raise AssertionError("never started")
    """))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--basetemp", str(tmp_path / "tmp"), "test_left.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    pid = int((tmp_path / "sleeper.pid").read_text())
    # sleep ran in the runner's namespace but is an ordinary process of ours.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
