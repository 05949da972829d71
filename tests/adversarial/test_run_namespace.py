"""What ``tracefs-fuse run``'s namespace holds, and what outlives it (issue 19, items 9 and 7).

Item 9: a mount namespace copies every mount that exists when it is made; a
copy of another tracefs-fuse mount keeps that FUSE connection, and its daemon,
alive after ``tracefs-fuse umount`` outside (it returns 0). Item 7: the real
tracefs mounted beneath ours is the host's kernel tracing; a process the
command leaves behind must not keep a view of it once ``run`` returned.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..integration.conftest import Mount
from .conftest import CLIENT_TIMEOUT_S, expect_line

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
UMOUNT = [sys.executable, "-m", "tracefs_fuse", "umount"]


def test_umount_of_an_earlier_mount_ends_its_daemon_while_run_runs(
        killable_mount: Mount) -> None:
    """Item 9: the namespace made after a mount does not pin it."""
    runner = subprocess.Popen([*RUN, "sh", "-c", "echo ready; read line"], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        expect_line(runner, "ready")
        result = subprocess.run([*UMOUNT, str(killable_mount.path)], capture_output=True,
                                text=True, timeout=CLIENT_TIMEOUT_S)
        assert result.returncode == 0, result.stderr
        # The daemon ends once its connection is gone from every namespace.
        assert killable_mount.proc.wait(timeout=CLIENT_TIMEOUT_S) == 0
    finally:
        runner.communicate("\n", timeout=CLIENT_TIMEOUT_S)
    assert runner.returncode == 0, runner.stderr


def _sees_real_tracefs(pid: int) -> bool:
    """Does ``pid``'s mount namespace hold a real (kernel) tracefs?"""
    with open(f"/proc/{pid}/mountinfo") as f:
        return any(line.split(" - ", 1)[1].startswith("tracefs ") for line in f)


def test_nothing_the_command_leaves_behind_keeps_the_hosts_tracefs(tmp_path: Path) -> None:
    """Item 7: a daemonized leftover (double fork, own session) is ended with ``run``."""
    pidfile = tmp_path / "leftover"
    script = (f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; "
              f"exec sleep 600' </dev/null >/dev/null 2>&1 & "
              f"while [ ! -e {pidfile} ]; do sleep 0.01; done")
    result = subprocess.run([*RUN, "sh", "-c", script], capture_output=True, text=True,
                            timeout=CLIENT_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    pid = int(pidfile.read_text())
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # ended with run: nothing left to look at
    try:
        # Still there: then it must not see the host's kernel tracing.
        assert not _sees_real_tracefs(pid), "a leftover of run sees the host's tracefs"
    finally:
        os.kill(pid, 9)
        os.close(pidfd)
