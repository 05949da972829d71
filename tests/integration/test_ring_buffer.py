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


def test_refused_mappings_fault_where_the_kernel_fails_mmap(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    """The kernel refuses private and writable mappings of trace_pipe_raw in
    mmap() (EPERM, tests/data golden).  mmap() never reaches a FUSE daemon, so
    here the refusal arrives at the first touch (SIGBUS) and GET_READER says the
    buffer is not mapped (ENODEV, as the kernel says for an unmapped buffer);
    the accepted mapping behaves identically on both."""
    kernel = (DATA / "rb_mmap_refusals.linux-6.18.44.txt").read_text().splitlines()
    result = subprocess.run([str(c_client("rb_mmap_refusals")), str(tracefs)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    ours = result.stdout.splitlines()
    assert [line for line in kernel if line.startswith("shared_read:")] == \
        [line for line in ours if line.startswith("shared_read:")]
    assert [line for line in kernel if not line.startswith("shared_read:")] == [
        "private: mmap=EPERM", "shared_write: mmap=EPERM"]
    assert [line for line in ours if not line.startswith("shared_read:")] == [
        "private: mmap=0 touch=SIGBUS", "private: get_reader=ENODEV",
        "shared_write: mmap=0 touch=SIGBUS", "shared_write: get_reader=ENODEV"]
