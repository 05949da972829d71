"""mountscripts/: the wrappers for containers and CI work as documented."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.uses_fuse

SCRIPTS = Path(__file__).parents[2] / "mountscripts"


def test_with_tracefs_runs_a_command_and_returns_its_status() -> None:
    result = subprocess.run(
        [SCRIPTS / "with-tracefs", "sh", "-c",
         "cat /sys/kernel/tracing/user_events_status; exit 3"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "\nActive: 0\nBusy: 0\n"


def test_mount_and_umount_tracefs(tmp_path: Path) -> None:
    # $(...) must return: the background daemon may not keep our stdout.
    mounted = subprocess.run([SCRIPTS / "mount-tracefs", str(tmp_path / "t")],
                             capture_output=True, text=True, timeout=60)
    assert mounted.returncode == 0, mounted.stderr
    assert mounted.stdout == f"{tmp_path / 't'}\n"
    try:
        assert (tmp_path / "t" / "user_events_data").exists()
    finally:
        assert subprocess.run([SCRIPTS / "umount-tracefs", str(tmp_path / "t")],
                              timeout=60).returncode == 0


def test_scripts_explain_missing_arguments() -> None:
    result = subprocess.run([SCRIPTS / "with-tracefs"], capture_output=True, text=True)
    assert result.returncode == 1 and "usage:" in result.stderr
