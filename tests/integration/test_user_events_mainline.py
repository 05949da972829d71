"""The mainline (6.4+) user_events ABI through a real mount, driven by C clients."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..client_suite import UE_FLOW
from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

DATA = Path(__file__).parent.parent / "data"


def run(exe: Path, *args: str) -> str:
    result = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_full_flow(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    out = run(c_client("ue_flow"), str(tracefs))
    assert tuple(out.splitlines()) == UE_FLOW.expected


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
        "ok thread: bit set by enable", "ok thread: bit cleared by disable"]


def test_forked_child_sees_enable_changes(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    out = run(c_client("ue_procs"), str(tracefs), "fork").splitlines()
    assert sorted(out) == sorted([
        "ok parent: enabled seen", "ok child: enabled seen", "ok child: disabled seen",
        "ok parent: disabled seen", "ok parent: child exited 0"])


def test_exiting_processes_leave_no_enablers(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    assert run(c_client("ue_procs"), str(tracefs), "many", "50").splitlines() == [
        "ok many: 50 children registered and exited", "ok many: the parent's word untouched"]
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


def test_a_group_uses_user_events_without_root(c_client) -> None:  # type: ignore[no-untyped-def]
    """tracefs' gid=/mode= options, and chmod as admins use it.

    user_events_data is 0640 as in the kernel: the gid= group may read but not
    write it until an admin runs chmod g+w; then a non-root program of the
    group registers and writes while root enables its event.
    """
    import shutil
    import tempfile

    from .conftest import start_mount, stop_mount

    scratch = Path(tempfile.mkdtemp(prefix="tracefs-fuse-gid-"))
    try:
        scratch.chmod(0o755)  # pytest's own temp dirs are 0700: not for uid 65534
        exe = scratch / "ue_emit"
        shutil.copy(c_client("ue_emit"), exe)
        mount = start_mount(scratch / "tracing", scratch / "daemon.log",
                            "--gid", "4242", "--mode", "750")
        as_member = dict(user=65534, group=4242, extra_groups=[4242], capture_output=True,
                         text=True, timeout=60)
        try:
            denied = subprocess.run([str(exe), str(mount), "1"], **as_member)
            assert "Permission denied" in denied.stderr
            data = Path(mount.path) / "user_events_data"
            data.chmod(0o660)
            assert oct(data.stat().st_mode & 0o777) == "0o660"
            mount.write("dynamic_events", "u:emit u32 count; char[16] msg\n")
            mount.write("events/user_events/emit/enable", "1")
            member = subprocess.run([str(exe), str(mount), "3"], **as_member)
            assert member.stdout == "ue_emit: wrote 3\n", member.stderr
            assert mount.read("trace").count("emit: count=") == 3
            stranger = subprocess.run([str(exe), str(mount), "1"], user=65534, group=65534,
                                      extra_groups=[], capture_output=True, text=True,
                                      timeout=60)
            assert "Permission denied" in stranger.stderr  # the root dir is 0750
        finally:
            stop_mount(mount)
    finally:
        shutil.rmtree(scratch)


def test_bits_of_one_word_never_lose_an_update(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    """A control write's bit and a registration's bit in the same byte, written
    at once (the registration's in its caller's lane): neither update is lost,
    as the kernel's atomic set_bit/clear_bit never lose one (before: bit 0
    took back its old value within 500-2,500 toggles)."""
    out = run(c_client("ue_shared_word"), str(tracefs), "20000")
    assert out.splitlines() == ["ok bit 0 kept every value written beside other bits' registrations"]
