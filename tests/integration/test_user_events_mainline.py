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


def test_register_from_a_second_thread(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    assert run(c_client("ue_procs"), str(tracefs), "thread").splitlines() == [
        "thread: bit set", "thread: bit clear"]


def test_forked_child_sees_enable_changes(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    out = run(c_client("ue_procs"), str(tracefs), "fork").splitlines()
    assert sorted(out) == sorted([
        "parent: enabled seen", "child: enabled seen", "child: disabled seen",
        "parent: disabled seen, child exit 0"])


def test_exiting_processes_leave_no_enablers(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    run(c_client("ue_procs"), str(tracefs), "many", "50")
    # Exits reach the daemon asynchronously (so do the kernel's own deferred
    # deletions); the events go once the last enabler is dropped.
    assert wait_until(lambda: tracefs.read("user_events_status") == "\nActive: 0\nBusy: 0\n")


def wait_until(predicate, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
