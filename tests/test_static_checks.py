"""The type check and the linter, as part of ``make test``.

The package ships ``py.typed``, so ``mypy --strict`` must pass on it (the
settings live in pyproject.toml's ``[tool.mypy]``); the native bridge has a
stub, ``fuse/_bridge.pyi``, which ``mypy.stubtest`` holds to the built
extension (a function added, renamed or dropped in ``_bridge.c`` fails here);
ruff (``[tool.ruff]``: pycodestyle, pyflakes, bugbear) must pass on the
package, the tests and the benchmarks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def run(*argv: str) -> None:
    result = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stdout}{result.stderr}"


def test_mypy_strict_is_clean_on_the_package() -> None:
    run("mypy")  # strict, on tracefs_fuse/: pyproject.toml


def test_the_bridge_stub_matches_the_extension() -> None:
    run("mypy.stubtest", "tracefs_fuse.fuse._bridge")


def test_ruff_is_clean() -> None:
    run("ruff", "check", "tracefs_fuse", "tests", "bench")
