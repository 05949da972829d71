"""Ring-buffer files through a real mount: mmap ABI, blocking reads, wakeups."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

DATA = Path(__file__).parent.parent / "data"


def test_mmap_abi_matches_the_kernel(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    """rb_mmap.c gives the same output here as on Linux 6.18 (tests/data golden):
    ENODEV without a mapping, the meta page, EBUSY resizing while mapped,
    GET_READER swapping in the reader page, read() while mapped taking the copy
    path without touching the meta page."""
    golden = (DATA / "rb_mmap.linux-6.18.44.txt").read_text()
    result = subprocess.run([str(c_client("rb_mmap")), str(tracefs), "1", "10"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == golden
