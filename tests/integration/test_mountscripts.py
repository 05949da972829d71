"""mountscripts/: the wrappers for containers and CI work as documented."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.uses_fuse

SCRIPTS = Path(__file__).parents[2] / "mountscripts"


def test_with_tracefs_runs_a_command_and_returns_its_status() -> None:
    result = subprocess.run(
        [SCRIPTS / "with-tracefs", "sh", "-c",
         "cat /sys/kernel/tracing/user_events_status; exit 3"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "\nActive: 0\nBusy: 0\n"


def test_mount_and_umount_tracefs(tmp_path: Path) -> None:
    # $(...) must return: the background daemon may not keep our stdout.
    mounted = subprocess.run([SCRIPTS / "mount-tracefs", str(tmp_path / "t")],
                             capture_output=True, text=True, timeout=60)
    assert mounted.returncode == 0, mounted.stderr
    assert mounted.stdout == f"{tmp_path / 't'}\n"
    try:
        assert (tmp_path / "t" / "user_events_data").exists()
    finally:
        assert subprocess.run([SCRIPTS / "umount-tracefs", str(tmp_path / "t")],
                              timeout=60).returncode == 0


def test_scripts_explain_missing_arguments() -> None:
    result = subprocess.run([SCRIPTS / "with-tracefs"], capture_output=True, text=True)
    assert result.returncode == 1 and "usage:" in result.stderr


def tracefs_fuse_on_the_search_path(tmp_path: Path) -> str:
    """A shell line putting ``tracefs-fuse`` where mount(8) and systemd look
    (/usr/local/bin), in the private mount namespace the test runs in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tracefs-fuse"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m tracefs_fuse \"$@\"\n")
    wrapper.chmod(0o755)
    return f"mount --bind {bin_dir} /usr/local/bin"


def in_private_namespace(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                           "set -eu\n" + script], capture_output=True, text=True, timeout=60)


def test_mount_t_fuse_tracefs_fuse_and_fstab(tmp_path: Path) -> None:
    # Debian's mount.fuse3 runs `tracefs-fuse SOURCE DIR -o OPTIONS` for type
    # fuse.tracefs-fuse, from the command line and from /etc/fstab alike.
    by_type, by_fstab = tmp_path / "by-type", tmp_path / "by-fstab"
    by_type.mkdir()
    by_fstab.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text(f"tracefs {by_fstab} fuse.tracefs-fuse mode=750,gid=100,abi=6.1,noauto"
                     f" 0 0\n")
    result = in_private_namespace(f"""
        trap 'umount -l {by_type} {by_fstab} 2>/dev/null || true' EXIT
        {tracefs_fuse_on_the_search_path(tmp_path)}
        mount --bind {fstab} /etc/fstab
        mount -t fuse.tracefs-fuse tracefs {by_type} -o mode=711,ro
        mount {by_fstab}
        for dir in {by_type} {by_fstab}; do
            grep " $dir " /proc/self/mounts | cut -d' ' -f3,4 | cut -d, -f1
            stat -c '%a %g' $dir
            tail -n1 $dir/user_events_status
        done
        umount {by_type}
        umount {by_fstab}
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "fuse.tracefs ro", "711 0", "Busy: 0",
        "fuse.tracefs rw", "750 100", "Max: 32768",  # the 6.1 era's status file
    ]


def test_foreground_mount_tells_systemd_when_it_serves(tmp_path: Path) -> None:
    mnt = tmp_path / "t"
    mnt.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(tmp_path / "notify"))
        notify.settimeout(30)
        with open(tmp_path / "stderr", "wb") as stderr:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "tracefs_fuse", "mount", "--foreground", str(mnt)],
                env={**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")}, stderr=stderr)
        try:
            assert notify.recv(4096).decode().split("\n") == ["READY=1", f"STATUS=serving {mnt}"]
            assert (mnt / "user_events_status").read_text() == "\nActive: 0\nBusy: 0\n"
            daemon.send_signal(signal.SIGTERM)
            assert notify.recv(4096) == b"STOPPING=1"
            assert daemon.wait(timeout=30) == 0
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
                subprocess.run(["fusermount3", "-u", "-z", str(mnt)])
    assert not os.path.ismount(mnt)
    assert (tmp_path / "stderr").read_text() == ""


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    instance = tmp_path / "tracefs-fuse@mnt-tracing.service"
    instance.symlink_to(SCRIPTS / "tracefs-fuse@.service")
    result = in_private_namespace(f"""
        {tracefs_fuse_on_the_search_path(tmp_path)}
        systemd-analyze verify --man=no {instance}
        """)
    assert (result.returncode, result.stderr) == (0, "")
    unit = (SCRIPTS / "tracefs-fuse@.service").read_text()
    for line in ("Type=notify", "Restart=on-failure",
                 "ExecStart=tracefs-fuse mount --foreground $TRACEFS_FUSE_OPTS %f"):
        assert line in unit.splitlines()
