"""Environment checks, mountinfo and refused-request lines, without mounting."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from tracefs_fuse.engine._errors import TracefsError, WouldBlock
from tracefs_fuse.engine._uapi import DIAG_IOCSREG
from tracefs_fuse.fuse._errno import errno_of, request_name
from tracefs_fuse.host import _environment, _mountinfo
from tracefs_fuse.host._mountinfo import Mount

MOUNTINFO = [
    (b"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
     Mount(device=(98, 0), mount_point="/mnt2", fstype="ext3", source="/dev/root")),
    # white space and backslashes are octal escapes, in every field
    (b"42 27 0:42 / /tmp/a\\040b rw,nosuid - fuse.tracefs tracefs rw,user_id=0",
     Mount(device=(0, 42), mount_point="/tmp/a b", fstype="fuse.tracefs", source="tracefs")),
    (b"43 27 0:12 / /t/tab\\011nl\\012bs\\134040 rw shared:5 master:2 - tracefs no\\040dev rw",
     Mount(device=(0, 12), mount_point="/t/tab\tnl\nbs\\040", fstype="tracefs",
           source="no dev")),
    # not UTF-8: os.fsencode gives the bytes back
    (b"44 27 0:13 / /t/\\377x rw - tmpfs none rw",
     Mount(device=(0, 13), mount_point=os.fsdecode(b"/t/\xffx"), fstype="tmpfs", source="none")),
]


@pytest.mark.parametrize(("line", "mount"), MOUNTINFO)
def test_mountinfo_fields_are_unescaped(line: bytes, mount: Mount) -> None:
    assert _mountinfo.parse(line + b"\n") == [mount]


def test_mounted_at_lists_a_stack_bottom_first() -> None:
    text = (b"1 0 0:1 / / rw - ext4 /dev/vda rw\n"
            b"2 1 0:2 / /sys/kernel/tracing rw - tracefs nodev rw\n"
            b"3 2 0:3 / /sys/kernel/tracing rw - fuse.tracefs tracefs rw\n"
            b"4 1 0:4 / /sys/kernel/tracingX rw - tmpfs none rw\n")
    stack = _mountinfo.mounted_at("/sys/kernel/tracing", _mountinfo.parse(text))
    assert [m.fstype for m in stack] == ["tracefs", "fuse.tracefs"]


def fake_sysctls(root: Path, values: dict[str, int]) -> str:
    for name, value in values.items():
        path = root / name.replace(".", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
    return str(root)


USERNS_REFUSALS = [
    (errno.ENOSPC, {"user.max_user_namespaces": 0},
     "user namespaces are disabled (sysctl user.max_user_namespaces = 0): "
     "sudo sysctl -w user.max_user_namespaces=15000, or use sudo"),
    (errno.ENOSPC, {"user.max_user_namespaces": 5},
     "no more user namespaces may be created (sysctl user.max_user_namespaces = 5): "
     "raise it, or use sudo"),
    (errno.EPERM, {"kernel.unprivileged_userns_clone": 0},
     "unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone = 0):"
     " sudo sysctl -w kernel.unprivileged_userns_clone=1, or use sudo"),
    (errno.EPERM, {"kernel.unprivileged_userns_clone": 1, "kernel.userns_restrict": 1},
     "unprivileged user namespaces are disabled (sysctl kernel.userns_restrict = 1): "
     "sudo sysctl -w kernel.userns_restrict=0, or use sudo"),
    (errno.EPERM, {"kernel.unprivileged_userns_clone": 1},
     "creating a user namespace is not permitted here (a seccomp or security policy, as in "
     "a container): give the container CAP_SYS_ADMIN (--cap-add SYS_ADMIN), or use sudo"),
    (errno.EUSERS, {}, "user namespaces are nested too deeply here, or use sudo"),
]


@pytest.mark.parametrize(("err", "sysctls", "message"), USERNS_REFUSALS)
def test_userns_refusal_names_the_sysctl(tmp_path: Path, err: int, sysctls: dict[str, int],
                                         message: str) -> None:
    problem = _environment.userns_refused(OSError(err, os.strerror(err)),
                                          fake_sysctls(tmp_path, sysctls))
    assert str(problem) == message


def test_apparmor_restriction_is_named(tmp_path: Path) -> None:
    sysctl = "kernel.apparmor_restrict_unprivileged_userns"
    problem = _environment.userns_powerless(OSError(errno.EPERM, "Operation not permitted"),
                                            "mount", fake_sysctls(tmp_path, {sysctl: 1}))
    assert str(problem) == (
        f"AppArmor withholds capabilities in unprivileged user namespaces (sysctl {sysctl} = 1)"
        f": sudo sysctl -w {sysctl}=0, or use sudo")


@pytest.mark.parametrize(("text", "allowed"), [
    ("user_allow_other\n", True),
    ("# comment\n  user_allow_other  \nmount_max = 1000\n", True),
    ("#user_allow_other\n", False),
    ("", False),
])
def test_user_allow_other_read_as_fusermount3_does(tmp_path: Path, text: str,
                                                   allowed: bool) -> None:
    (tmp_path / "fuse.conf").write_text(text)
    assert _environment.user_allow_other(str(tmp_path / "fuse.conf")) is allowed


def test_mountpoint_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(_environment.EnvironmentProblem) as missing:
        _environment.check_mountpoint(str(tmp_path / "no such"))
    assert str(missing.value) == (
        f"{tmp_path}/no such does not exist: create it first (mkdir -p '{tmp_path}/no such')")
    (tmp_path / "file").touch()
    with pytest.raises(_environment.EnvironmentProblem) as not_dir:
        _environment.check_mountpoint(str(tmp_path / "file"))
    assert str(not_dir.value) == f"{tmp_path}/file is not a directory"
    _environment.check_mountpoint(str(tmp_path))


@pytest.mark.parametrize(("op", "path", "cmd", "name"), [
    ("ioctl", ("user_events_data",), DIAG_IOCSREG, "ioctl DIAG_IOCSREG"),
    ("ioctl", ("per_cpu", "cpu1", "trace_pipe_raw"), 0x5220,
     "ioctl TRACE_MMAP_IOCTL_GET_READER on per_cpu/cpu1/trace_pipe_raw"),
    ("ioctl", ("trace",), 0x5401, "ioctl 0x5401 on trace"),
    ("write", ("dynamic_events",), None, "write dynamic_events"),
    ("read", None, None, "read ?"),
])
def test_request_names(op: str, path: tuple[str, ...] | None, cmd: int | None,
                       name: str) -> None:
    assert request_name(op, path, cmd) == name


def test_a_refusal_is_one_line_naming_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "tracefs_fuse")
    refusal = TracefsError(errno.EADDRINUSE, "my_event exists with other fields")
    assert errno_of(refusal, "ioctl DIAG_IOCSREG", os.getpid()) == errno.EADDRINUSE
    comm = Path("/proc/self/comm").read_text().strip()
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, f"ioctl DIAG_IOCSREG from pid {os.getpid()} ({comm}): "
                       f"EADDRINUSE: my_event exists with other fields")]


@pytest.mark.parametrize(("exc", "what"), [
    (WouldBlock("empty"), "read trace_pipe"),
    (TracefsError(errno.ENOTTY, "unknown ioctl 0x5401"), "ioctl 0x5401 on trace"),
    (TracefsError(errno.ENOENT, "events/x"), "lookup"),
])
def test_routine_refusals_stay_at_debug(caplog: pytest.LogCaptureFixture, exc: TracefsError,
                                        what: str) -> None:
    caplog.set_level(logging.DEBUG, "tracefs_fuse")
    errno_of(exc, what, os.getpid())
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
