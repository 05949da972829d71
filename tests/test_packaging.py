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


# -- a package as people expect one (issue 23) --------------------------------------------

def test_share_is_generated_from_the_command_line_and_up_to_date() -> None:
    """share/ (man page, bash and zsh completion) is what ``make share`` writes now."""
    sys.path.insert(0, str(ROOT / "share"))
    try:
        import generate  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(ROOT / "share"))
    stale = [str(path.relative_to(ROOT)) for path, text in generate.generate().items()
             if not path.exists() or path.read_text() != text]
    assert stale == [], f"run 'make share': {stale} differ from the command line"
    page = generate.MAN_PAGE.read_text()
    for words in ("tracefs-fuse run", "--record", "--follow", "--format",
                  "--user-events-max"):
        assert words.replace("-", "\\-") in page  # roff spells a hyphen \-


def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    script = (f"source {ROOT / 'share/bash-completion/completions/tracefs-fuse'}\n"
              "COMP_WORDS=(tracefs-fuse sh); COMP_CWORD=1; COMP_LINE='tracefs-fuse sh'\n"
              "COMP_POINT=${#COMP_LINE}; _shtab_tracefs_fuse; echo \"${COMPREPLY[@]}\"\n"
              "COMP_WORDS=(tracefs-fuse show --fo); COMP_CWORD=2\n"
              "COMP_LINE='tracefs-fuse show --fo'; COMP_POINT=${#COMP_LINE}\n"
              "_shtab_tracefs_fuse; echo \"${COMPREPLY[@]}\"\n")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    assert result.stdout.split("\n")[:2] == ["show", "--follow --format"], result.stderr


def test_license_file_and_spdx_expression_agree(tmp_path: Path) -> None:
    assert (ROOT / "LICENSE").read_text().split("\n")[:2] == [
        " " * 20 + "GNU GENERAL PUBLIC LICENSE", " " * 23 + "Version 2, June 1991"]
    result = setup_py("-q", "egg_info", "--egg-base", str(tmp_path), env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert "warn" not in result.stderr.lower(), result.stderr
    metadata = (tmp_path / "tracefs_fuse.egg-info" / "PKG-INFO").read_text()
    assert "License-Expression: GPL-2.0-only\n" in metadata
    assert "License-File: LICENSE\n" in metadata
    assert "Classifier: Operating System :: POSIX :: Linux\n" in metadata


def test_mountscripts_are_shellcheck_clean() -> None:
    scripts = sorted(p for p in (ROOT / "mountscripts").iterdir()
                     if p.suffix == ".sh" or p.read_text().startswith("#!/usr/bin/env bash"))
    assert len(scripts) == 4
    result = subprocess.run(["shellcheck", "-x", *map(str, scripts)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
