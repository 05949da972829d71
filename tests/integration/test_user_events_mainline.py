"""The mainline (6.4+) user_events ABI through a real mount, driven by C clients."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

DATA = Path(__file__).parent.parent / "data"


def run(exe: Path, *args: str) -> str:
    result = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_full_flow(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    out = run(c_client("ue_flow"), str(tracefs))
    assert out.splitlines() == [
        "registered index=0 size=28 bit=31 enabled=0x5a5a0000",
        "enabled=0xda5a0000",
        "writev=24",
        "disabled enabled=0x5a5a0000",
        "writev disabled=-1 errno=9",
        "unregistered enabled=0x5a5a0000",
        "after close: deleted",
    ]


def test_errno_table_matches_the_kernel(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    """Every case of ue_cases.c answers as Linux 6.12 did (tests/data golden).

    One divergence is FUSE's own: a write() of 0 bytes never reaches a FUSE
    daemon (the kernel's FUSE returns 0 before sending a request), while the
    kernel's user_events_data says EFAULT.
    """
    golden = (DATA / "ue_cases.linux-6.12.117.txt").read_text().splitlines()
    ours = run(c_client("ue_cases"), str(tracefs)).splitlines()
    expected = ["write 0 bytes: 0" if line == "write 0 bytes: EFAULT" else line
                for line in golden]
    assert ours == expected
