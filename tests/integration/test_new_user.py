"""What a new user tripped over (issue 23, part 2), each fixed and held here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracefs_fuse.cli import _main as cli
from tracefs_fuse.decode import read_lines
from tracefs_fuse.testing import run

pytestmark = pytest.mark.uses_fuse

#: The installed command, as a user runs it.
COMMAND = str(Path(sys.executable).parent / "tracefs-fuse")
#: What importing a checkout's unbuilt source tree ends with.
SHADOW_ERROR = "ImportError: cannot import name '_bridge' (an unbuilt source tree)"


@pytest.fixture
def shadow(tmp_path: Path) -> Path:
    """A directory holding a ``tracefs_fuse`` that cannot be imported, as a
    checkout of this project is for a package installed non-editable."""
    package = tmp_path / "checkout" / "tracefs_fuse"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "raise ImportError(\"cannot import name '_bridge' (an unbuilt source tree)\")\n")
    return package.parent


def unmount(path: Path) -> None:
    subprocess.run(["fusermount3", "-u", str(path)], check=True, timeout=30)


def test_mount_from_a_checkout_runs_the_installed_package(shadow: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "tracing"
    mountpoint.mkdir()
    result = subprocess.run([COMMAND, "mount", str(mountpoint)], cwd=shadow,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    try:
        assert (mountpoint / "user_events_status").exists()
    finally:
        unmount(mountpoint)


def test_a_daemon_that_dies_at_start_is_quoted(
        shadow: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    mountpoint = tmp_path / "tracing"
    mountpoint.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(shadow))  # -P does not protect from this
    status = cli.main(["mount", str(mountpoint)])
    if os.path.ismount(mountpoint):
        unmount(mountpoint)
    assert status == 1
    assert capsys.readouterr().err == (
        f"tracefs-fuse mount: the daemon exited with 1: {SHADOW_ERROR}\n")


def test_the_fixture_runs_the_installed_package_from_a_checkout(shadow: Path) -> None:
    assert run(["true"], cwd=shadow).returncode == 0


# -- the fixture where tracefs-fuse cannot start ----------------------------------------

USER_TEST = '''
def test_hello(user_events):
    user_events.run(["true"])
'''


def pytest_without_fuse(directory: Path, *args: str, ini: str = "") -> subprocess.CompletedProcess[str]:
    """pytest on a test of the fixture, where /dev/fuse is a plain file (in a
    private mount namespace): tracefs-fuse cannot start there."""
    (directory / "test_user.py").write_text(USER_TEST)
    (directory / "pytest.ini").write_text(f"[pytest]\n{ini}")
    (directory / "not-fuse").touch()
    script = (f"mount --bind {directory / 'not-fuse'} /dev/fuse && exec "
              f"{sys.executable} -m pytest -p no:cacheprovider -rs {' '.join(args)} test_user.py")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          cwd=directory, capture_output=True, text=True, timeout=120)


REASON = "/dev/fuse is not a character device: it is not FUSE's"


def test_the_fixture_without_fuse_says_tracefs_fuse_could_not_start(tmp_path: Path) -> None:
    result = pytest_without_fuse(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (f"TracefsFuseUnavailable: tracefs-fuse could not "
            f"start: {REASON}\n") in result.stdout
    assert "exited with 1" not in result.stdout


@pytest.mark.parametrize(("args", "ini"), [
    (("--user-events-skip-unavailable",), ""),
    ((), "user_events_skip_unavailable = true"),
])
def test_the_fixture_without_fuse_skips_when_asked(tmp_path: Path, args: tuple[str, ...],
                                                   ini: str) -> None:
    result = pytest_without_fuse(tmp_path, *args, ini=ini)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SKIPPED [1] test_user.py:2: tracefs-fuse could not start: {REASON}" in result.stdout
    assert "1 skipped" in result.stdout


# -- run --record - and show ----------------------------------------------------------

MARKS = "for n in 1 2 3; do echo mark-$n > /sys/kernel/tracing/trace_marker; done"


def test_run_record_dash_writes_standard_output(tmp_path: Path) -> None:
    result = subprocess.run([COMMAND, "run", "--record", "-", "--", "sh", "-c", MARKS],
                            cwd=tmp_path, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []  # no file named '-'
    events = list(read_lines(result.stdout))
    assert [e.fields["buf"] for e in events] == ["mark-1\n", "mark-2\n", "mark-3\n"]
    assert result.stderr.decode().splitlines()[-1] == (
        "tracefs-fuse: recorded 3 events to standard output")


def test_run_record_dash_streams_into_show_dash() -> None:
    record = subprocess.Popen([COMMAND, "run", "--record", "-", "--", "sh", "-c", MARKS],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    shown = subprocess.run([COMMAND, "show", "-"], stdin=record.stdout, capture_output=True,
                           text=True, timeout=60)
    assert record.stdout is not None
    record.stdout.close()
    assert record.wait(timeout=60) == 0 and shown.returncode == 0
    assert [line.split(" buf=")[1] for line in shown.stdout.splitlines()] == [
        f'"mark-{n}\\n"' for n in (1, 2, 3)]


def test_chrome_format_of_a_recording_holds_every_event(tmp_path: Path) -> None:
    from tests.test_show import check_trace

    record = tmp_path / "events.jsonl"
    subprocess.run([COMMAND, "run", "--record", str(record), "--", "sh", "-c",
                    f"{MARKS}; ( {MARKS} ) & wait"], check=True, capture_output=True, timeout=60)
    events = list(read_lines(record.read_bytes()))
    assert len(events) == 6
    shown = subprocess.run([COMMAND, "show", "--format", "chrome", str(record)], check=True,
                           capture_output=True, timeout=60)
    check_trace(json.loads(shown.stdout), events)


# -- run's summary ------------------------------------------------------------------

DYNAMIC_EVENTS = "/sys/kernel/tracing/dynamic_events"


def test_run_names_refused_registrations_and_patterns_that_matched_nothing(
        tmp_path: Path) -> None:
    # Pre-registered with other fields than the program's: the easiest mistake.
    script = "; ".join(f'echo "u:my_event {field} count" >> {DYNAMIC_EVENTS} 2>/dev/null'
                       for field in ("u32", "u64", "u64"))
    result = subprocess.run(
        [COMMAND, "run", "--record", str(tmp_path / "r.jsonl"), "--events", "my_*",
         "--events", "nope*", "--events", "!other:*", "--", "sh", "-c", f"{script}; exit 3"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    lines = result.stderr.splitlines()
    assert lines[0] == f"tracefs-fuse: recorded 0 events to {tmp_path / 'r.jsonl'}"
    assert re.fullmatch(r"tracefs-fuse: refused write dynamic_events from pid \d+ \(sh\): "
                        r"EADDRINUSE: my_event exists with other fields \(2 times\)", lines[1])
    assert lines[2:] == ["tracefs-fuse: --events 'nope*' matched no user event",
                         "tracefs-fuse: --events '!other:*' matched no user event"]


def test_run_summary_says_nothing_when_all_went_well() -> None:
    result = subprocess.run(
        [COMMAND, "run", "--events", "my_*", "--", "sh", "-c",
         f'echo "u:my_event u32 count" >> {DYNAMIC_EVENTS}'],
        capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
