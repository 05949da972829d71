"""What the CLI says when the machine is not ready (issue 10 part 4, issue 13).

Each problem is set up for real (a private /dev without fuse, a device of mode
0600, user namespaces disabled by their sysctl, a root without CAP_SYS_ADMIN,
a dead mount) and must come out as exactly one line, ``tracefs-fuse COMMAND:
what: how to fix``, with exit status 1: never a traceback, never "Exceptions
from Trio nursery".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tracefs_fuse.host import _mountinfo

from ..ordinary_user import User
from .conftest import Mount, start_mount

pytestmark = pytest.mark.uses_fuse

CLI = [sys.executable, "-m", "tracefs_fuse"]


def one_line(result: subprocess.CompletedProcess[str], command: str) -> str:
    """The single line a failed command printed, without its prefix."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    prefix = f"tracefs-fuse {command}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def run(*argv: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=60)


def test_missing_mount_point(tmp_path: Path) -> None:
    missing = tmp_path / "no such"
    assert one_line(run(*CLI, "mount", str(missing)), "mount") == (
        f"{missing} does not exist: create it first (mkdir -p '{missing}')")


def test_a_second_mount_on_ours_is_refused(tracefs: Mount) -> None:
    said = one_line(run(*CLI, "mount", str(tracefs)), "mount")
    assert said == (f"{tracefs} already has a tracefs-fuse mount, which a second one would "
                    f"hide: unmount it first (tracefs-fuse umount {tracefs})")
    assert [m.fstype for m in _mountinfo.mounted_at(str(tracefs))] == ["fuse.tracefs"]
    assert tracefs.read("user_events_status") == "\nActive: 0\nBusy: 0\n"


def test_a_dead_mount_is_named(tmp_path: Path) -> None:
    mount = start_mount(tmp_path / "t", tmp_path / "log")
    mount.proc.send_signal(signal.SIGKILL)
    mount.proc.wait()
    try:
        said = one_line(run(*CLI, "mount", str(mount)), "mount")
        assert said == (f"{mount} is a dead FUSE mount (its daemon is gone): unmount it "
                        f"first (fusermount3 -u {mount})")
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mount)], check=True)


NO_DEV_FUSE = ("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               "mount -t tmpfs -o mode=755 none /dev && mknod -m 666 /dev/null c 1 3 && "
               "exec \"$@\"", "sh")
NO_DEV_FUSE_SAID = ("/dev/fuse does not exist: load the FUSE module (modprobe fuse); "
                    "in a container, pass the device in (--device /dev/fuse)")


def test_no_dev_fuse(tmp_path: Path) -> None:
    assert one_line(run(*CLI, "mount", str(tmp_path), prefix=NO_DEV_FUSE),
                    "mount") == NO_DEV_FUSE_SAID
    assert one_line(run(*CLI, "run", "--", "true", prefix=NO_DEV_FUSE),
                    "run") == NO_DEV_FUSE_SAID


def test_dev_fuse_not_accessible(ordinary_user: User) -> None:
    said = (f"/dev/fuse (mode 0600) cannot be opened by uid {ordinary_user.uid}: give it its "
            f"usual mode 0666 (sudo chmod 0666 /dev/fuse), or use sudo")
    cli = ordinary_user.tracefs_fuse()
    assert one_line(ordinary_user.run([*cli, "run", "--", "true"], fuse_mode=0o600),
                    "run") == said
    assert one_line(ordinary_user.run([*cli, "mount", "/tmp"], fuse_mode=0o600),
                    "mount") == said


# Root of a user namespace whose user.max_user_namespaces is 0, without
# capabilities: an ordinary user where the sysctl disables user namespaces.
NO_USER_NAMESPACES = ("unshare", "--user", "--map-root-user", "--", "sh", "-c",
                      "echo 0 > /proc/sys/user/max_user_namespaces && "
                      "exec setpriv --inh-caps=-all --bounding-set=-all -- \"$@\"", "sh")


def test_user_namespaces_disabled() -> None:
    assert one_line(run(*CLI, "run", "--", "true", prefix=NO_USER_NAMESPACES), "run") == (
        "user namespaces are disabled (sysctl user.max_user_namespaces = 0): "
        "sudo sysctl -w user.max_user_namespaces=15000, or use sudo")


# Root with a container's default capabilities: no CAP_SYS_ADMIN.
WITHOUT_SYS_ADMIN = ("setpriv", "--inh-caps=-all", "--bounding-set=-sys_admin", "--")
WITHOUT_CAPS = ("setpriv", "--inh-caps=-all", "--bounding-set=-all", "--")


def test_root_without_cap_sys_admin(tmp_path: Path) -> None:
    # No mount(2), and fusermount3 can do no more ...
    assert one_line(run(*CLI, "mount", str(tmp_path), prefix=WITHOUT_SYS_ADMIN), "mount") == (
        "mounting needs CAP_SYS_ADMIN, which this root lacks (a container?): give it "
        "--cap-add SYS_ADMIN, or use 'tracefs-fuse run', which needs neither")
    # ... but run makes a user namespace, where it is root with every capability.
    result = run(*CLI, "run", "--", "cat", "/sys/kernel/tracing/user_events_status",
                 prefix=WITHOUT_SYS_ADMIN)
    assert (result.returncode, result.stdout) == (0, "\nActive: 0\nBusy: 0\n"), result.stderr
    # Mapping root into it takes CAP_SETFCAP.
    assert one_line(run(*CLI, "run", "--", "true", prefix=WITHOUT_CAPS), "run") == (
        "root without CAP_SYS_ADMIN needs CAP_SETFCAP to map itself into a user namespace: "
        "give it CAP_SYS_ADMIN (--cap-add SYS_ADMIN) or keep CAP_SETFCAP")


def test_umount_of_something_else(tmp_path: Path) -> None:
    assert one_line(run(*CLI, "umount", str(tmp_path)), "umount") == (
        f"{tmp_path} is not a tracefs-fuse mount")


def test_umount_of_a_mount_in_use(tracefs: Mount) -> None:
    fd = os.open(tracefs / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert one_line(run(*CLI, "umount", str(tracefs)), "umount") == (
            f"failed to unmount {tracefs}: Device or resource busy")
    finally:
        os.close(fd)


def test_a_mount_failing_after_the_checks_says_libfuse_s_reason(tmp_path: Path) -> None:
    # The background daemon's side (its parent has checked the mount point,
    # which has gone since): libfuse's own words, not an exception group.
    gone = tmp_path / "gone"
    read_fd, write_fd = os.pipe()
    daemon = subprocess.Popen(
        [*CLI, "mount", "--ready-fd", str(write_fd), "--config-json",
         f'{{"mountpoint": "{gone}"}}', str(gone)],
        # As _serve_background starts it: its log is stdout (stderr too, once it runs).
        pass_fds=(write_fd,), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        answer = ready.read().decode()
    stderr, _ = daemon.communicate(timeout=60)
    assert daemon.returncode == 1
    assert answer == f"fuse: failed to access mountpoint {gone}: No such file or directory"
    assert stderr.splitlines()[-1].endswith(f"ERROR tracefs_fuse: mount failed: {answer}")
    assert "Trio" not in stderr and "Traceback" not in stderr
