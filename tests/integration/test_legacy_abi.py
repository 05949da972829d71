"""The status-page ABIs (5.18 byte page, 6.1 bit page) through a real mount.

The clients follow each era's samples/user_events/example.c: open
user_events_status, mmap one page, close the file, register, and watch the
event's byte/bit in the mapping while the event is enabled through its
``enable`` file.
"""

from __future__ import annotations

import mmap
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

FLOW = "check\nenable 1\ncheck\nenable 0\ncheck\nwrite\ntext\nquit\n"


def run(exe: Path, tracefs: Mount | str, stdin: str, *args: str,
        timeout: float = 60) -> list[str]:
    result = subprocess.run([str(exe), str(tracefs), *args], input=stdin, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("mount_options", [("--abi", "5.18")])
def test_5_18_flow(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    assert run(c_client("legacy_5_18"), tracefs, FLOW) == [
        "registered index=1 write_index=0",
        "status=0x00", "enable=0", "status=0x01", "wrote=8 count=0", "enable=0", "status=0x00",
        "write=8",  # 5.18: a disabled write is a silent no-op
        r"text=1:test\n\nActive: 1\nBusy: 0\nMax: 4096\n",
    ]


@pytest.mark.parametrize("mount_options", [("--abi", "6.1")])
def test_6_1_flow(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    assert run(c_client("legacy_6_1"), tracefs, FLOW) == [
        "registered bit=1 write_index=0",
        "enabled=0", "enable=0", "enabled=1", "wrote=8 count=0", "enable=0", "enabled=0",
        "write=EBADF",  # 6.1.192 (the 6.4 fix was backported)
        r"text=1:test\n\nActive: 1\nBusy: 0\nMax: 32768\n",
    ]


def test_all_eras_side_by_side_in_one_default_mount(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    old = run(c_client("legacy_5_18"), tracefs, "check\nenable 1\ncheck\nquit\n", "a u32 x")
    mid = run(c_client("legacy_6_1"), tracefs, "check\nenable 1\ncheck\nquit\n", "b u32 x")
    assert old == ["registered index=1 write_index=0", "status=0x00", "enable=0", "status=0x01",
                   "wrote=8 count=0"]
    # 6.1 bits come from the top of the page the byte slots share.
    assert mid == ["registered bit=32767 write_index=0", "enabled=0", "enable=0", "enabled=1",
                   "wrote=8 count=0"]
    new = subprocess.run([str(c_client("ue_flow")), str(tracefs)], capture_output=True,
                         text=True, timeout=60)
    assert new.returncode == 0 and new.stdout.endswith("after close: deleted\n")


@pytest.mark.parametrize("mount_options", [("--abi", "mainline")])
def test_pinned_mainline_refuses_old_structs(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run([str(c_client("legacy_6_1")), str(tracefs)], input="quit\n",
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines() == ["register=EINVAL"]


def test_text_and_page_from_one_open_file(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    with subprocess.Popen([str(c_client("legacy_6_1")), str(tracefs)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "registered bit=32767 write_index=0\n"
        tracefs.write("events/user_events/test/enable", "1")
        fd = os.open(tracefs / "user_events_status", os.O_RDONLY)
        try:
            with mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ) as page:
                assert os.read(fd, 4096) == b"test # Used by ftrace\n\nActive: 1\nBusy: 1\n"
                assert page[4095] == 0x80  # bit 32767
                tracefs.write("events/user_events/test/enable", "0")
                assert page[4095] == 0  # flipped before the write returned
        finally:
            os.close(fd)
            proc.communicate("quit\n", timeout=30)


@pytest.mark.parametrize("mount_options", [("--abi", "6.1")])
def test_two_processes_see_the_same_page(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    procs = [subprocess.Popen([str(c_client("legacy_6_1")), str(tracefs)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "registered bit=1 write_index=0\n"
        tracefs.write("events/user_events/test/enable", "1")
        for proc in procs:
            out, _ = proc.communicate("check\nquit\n", timeout=30)
            assert out.splitlines() == ["enabled=1", "wrote=8 count=0"]
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate()


@pytest.mark.slow
@pytest.mark.parametrize(("mount_options", "era", "room"), [
    (("--abi", "5.18"), "5.18", 4095), (("--abi", "6.1"), "6.1", 32767)])
def test_full_page_is_emfile(tracefs: Mount, c_client, era: str, room: int) -> None:  # type: ignore[no-untyped-def]
    # Up to 32,777 registrations, each through its caller's lane (about
    # 1 ms each, docs/reliability.md): a hang guard, not a measurement.
    assert run(c_client("legacy_fill"), tracefs, "", era, str(room + 10), timeout=240) == [
        f"registered={room} stopped=EMFILE"]
