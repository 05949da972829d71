"""A bug in the daemon is said in one line naming its traceback's file.

A fake daemon (a real exception in place of the real daemon's run, in a
child process) stands for a bug, before the mount is ready and after: the
command line must not call a crash after the mount served a failed mount,
must not write twice to the ready pipe, and must not hide the traceback (nor
spill it over the terminal) unless ``--debug``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

FAKE_DAEMON = """
import sys, trio
from tracefs_fuse.daemon import _daemon, _run_serving

class BuggyDaemon(_daemon.Daemon):
    async def run(self, stop_on_signals=True, *, task_status=trio.TASK_STATUS_IGNORED):
        if {when!r} == "ready":
            task_status.started(self)
            await trio.sleep(0)
        raise KeyError("no such slot")

_daemon.Daemon = _run_serving.Daemon = BuggyDaemon
from tracefs_fuse.cli import main
sys.exit(main(sys.argv[1:]))
"""

TRACEBACK_LINE = re.compile(r"a bug in tracefs-fuse: KeyError: 'no such slot' "
                            r"\(traceback in (/\S+\.traceback)\)$")


def run_buggy(when: str, *argv: str,
              pass_fds: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", FAKE_DAEMON.format(when=when), *argv],
                          capture_output=True, text=True, timeout=60, pass_fds=pass_fds)


def the_traceback(line: str) -> str:
    match = TRACEBACK_LINE.search(line)
    assert match, line
    path = Path(match.group(1))
    text = path.read_text()
    path.unlink()
    assert "Traceback (most recent call last)" in text, text
    assert "KeyError: 'no such slot'" in text
    return text


@pytest.mark.parametrize("when", ["starting", "ready"])
def test_mount_says_a_bug_in_one_line_with_its_traceback_file(tmp_path: Path, when: str) -> None:
    read_fd, write_fd = os.pipe()
    result = run_buggy(when, "mount", "--foreground", "--ready-fd", str(write_fd),
                       "--config-json", json.dumps({"mountpoint": str(tmp_path)}), str(tmp_path),
                       pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        answer = ready.read().decode()
    assert result.returncode == 1
    # With --ready-fd (as `mount` starts it) the daemon's stderr is its log, on stdout.
    assert result.stderr == ""
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout  # no traceback, no EBADF
    if when == "ready":
        assert answer == "ok"  # said once: the crash is not told as a failed mount
        assert f"ERROR tracefs_fuse: stopped serving {tmp_path}: a bug" in lines[0]
    else:
        assert "ERROR tracefs_fuse: mount failed: a bug" in lines[0]
        assert lines[0].endswith(answer)  # the parent says the same line
    the_traceback(lines[0])


def test_run_says_a_bug_in_one_line_with_its_traceback_file() -> None:
    result = run_buggy("starting", "run", "--", "true")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tracefs-fuse run: a bug in tracefs-fuse: KeyError")
    the_traceback(lines[0])
