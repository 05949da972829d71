"""What a new user tripped over (issue 23, part 2), each fixed and held here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracefs_fuse.cli import _main as cli
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
    assert cli.main(["mount", str(mountpoint)]) == 1
    assert capsys.readouterr().err == (
        f"tracefs-fuse mount: the daemon exited with 1: {SHADOW_ERROR}\n")
    assert not os.path.ismount(mountpoint)


def test_the_fixture_runs_the_installed_package_from_a_checkout(shadow: Path) -> None:
    assert run(["true"], cwd=shadow).returncode == 0
