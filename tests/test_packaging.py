"""What installing the package needs and ships (issue 13, "The package")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tracefs_fuse

ROOT = Path(__file__).parents[1]


def setup_py(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_missing_pkg_config_is_named(tmp_path: Path) -> None:
    (tmp_path / "python3").symlink_to(sys.executable)  # a PATH without pkg-config
    result = setup_py("--version", env={**os.environ, "PATH": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "tracefs-fuse: building the FUSE bridge needs pkg-config, which is not installed; "
        "install libfuse3-dev and pkg-config (Debian: apt-get install libfuse3-dev pkg-config)")


def test_missing_libfuse3_dev_is_named(tmp_path: Path) -> None:
    result = setup_py("--version", env={**os.environ, "PKG_CONFIG_LIBDIR": str(tmp_path)})
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "CalledProcessError" not in result.stderr
    assert result.stderr.strip().startswith("tracefs-fuse: pkg-config finds no fuse3")
    assert "install libfuse3-dev and pkg-config" in result.stderr


def test_the_package_ships_py_typed(tmp_path: Path) -> None:
    """``py.typed`` goes into what gets installed, not just the source tree."""
    result = setup_py("-q", "build_py", "--build-lib", str(tmp_path), env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tracefs_fuse" / "py.typed").is_file()


def test_public_names_are_the_documented_ones() -> None:
    assert set(tracefs_fuse.__all__) == {"BridgeInactiveError", "MountConfig", "serve"}
    for name in tracefs_fuse.__all__:
        assert getattr(tracefs_fuse, name).__name__ == name
    assert issubclass(tracefs_fuse.BridgeInactiveError, RuntimeError)
