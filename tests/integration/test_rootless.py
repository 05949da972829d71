"""tracefs-fuse for an ordinary user, without sudo (issue 10, "Rootless").

``run`` makes a user namespace in which the command is root; ``mount`` goes
through fusermount3, as sshfs does. Each test runs as a user created for the
session (see :mod:`.users`; ``/dev/fuse`` is a private 0666 node there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from ..ordinary_user import User, wait_for_no_processes

pytestmark = pytest.mark.uses_fuse

TRACING = "/sys/kernel/tracing"


@pytest.fixture
def user_dir(ordinary_user: User) -> Iterator[Path]:
    """A directory of the user's own (pytest's tmp_path is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="tfuse-cli-"))
    os.chown(path, ordinary_user.uid, ordinary_user.gid)
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def client(c_client, user_dir: Path):  # type: ignore[no-untyped-def]
    """A C client the user may execute."""

    def copy(name: str) -> str:
        return shutil.copy(c_client(name), user_dir / name)

    return copy


def run_as_user(user: User, *argv: str) -> tuple[int, str, str]:
    result = user.run([*user.tracefs_fuse(), "run", "--", *argv])
    return result.returncode, result.stdout, result.stderr


def test_run_without_sudo_makes_the_command_root(
        ordinary_user: User, user_dir: Path) -> None:
    rc, out, err = run_as_user(
        ordinary_user, "sh", "-c",
        f"id -u; cat {TRACING}/user_events_status; touch {user_dir}/made-inside; "
        f"grep -E ' {TRACING} ' /proc/mounts | cut -d' ' -f3")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[:4] == ["0", "", "Active: 0", "Busy: 0"]  # root of the user namespace
    # Ours on top; beneath it, the host's tracefs if it has one there, or else
    # (tracefs cannot be mounted in a user namespace) one that /proc/mounts
    # lists for the tools' sake: as under sudo, and nothing to warn about.
    assert lines[4:] == ["tracefs", "fuse.tracefs"]
    assert err == ""
    # Outside, what the command made is the user's.
    assert (user_dir / "made-inside").stat().st_uid == ordinary_user.uid


@pytest.mark.parametrize("mode", [0o755, 0o700], ids=["reachable", "closed"])
def test_run_without_sudo_lists_ours_before_a_host_tracefs_elsewhere(
        ordinary_user: User, mode: int) -> None:
    """A tracefs the host mounted somewhere else is locked in the user
    namespace (it cannot be detached there; under root's 0700 directory the
    user cannot even reach it): run still starts, and tools that take the
    first tracefs line of /proc/mounts (perf, libtracefs) find ours. Before,
    they found the host's (perf: "No permissions to read …"), and a closed
    one made run fail (EACCES from its umount)."""
    parent = Path(tempfile.mkdtemp(prefix="tfuse-host-"))
    parent.chmod(mode)
    elsewhere = parent / "tracing"
    elsewhere.mkdir()
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(elsewhere)], check=True)
    try:
        rc, out, err = run_as_user(
            ordinary_user, "sh", "-c", "awk '$3 == \"tracefs\" { print $2 }' /proc/mounts")
    finally:
        subprocess.run(["umount", str(elsewhere)], check=True)
        shutil.rmtree(parent)
    assert rc == 0, err
    listed = out.splitlines()
    assert listed[0] == TRACING  # others' tracefs (other tests' too) may follow
    assert str(elsewhere) in listed[1:]


def test_run_without_sudo_serves_the_mainline_flow(
        ordinary_user: User, client) -> None:  # type: ignore[no-untyped-def]
    flow = client("ue_flow")
    rc, out, err = run_as_user(ordinary_user, flow, TRACING)
    assert rc == 0, out + err
    # Exactly what it does under sudo (test_user_events_mainline pins that).
    as_root = subprocess.run([sys.executable, "-m", "tracefs_fuse", "run", "--", flow, TRACING],
                             capture_output=True, text=True, timeout=60)
    assert as_root.returncode == 0, as_root.stdout + as_root.stderr
    assert out == as_root.stdout
    assert out.splitlines()[-1] == "after close: deleted"


def test_run_without_sudo_registers_from_threads_and_children(
        ordinary_user: User, client) -> None:  # type: ignore[no-untyped-def]
    procs = client("ue_procs")
    rc, out, err = run_as_user(ordinary_user, "sh", "-c",
                               f"{procs} {TRACING} thread && {procs} {TRACING} many 20 && "
                               f"cat {TRACING}/user_events_status")
    assert rc == 0, out + err
    assert out.splitlines()[:4] == ["ok thread: bit set by enable", "ok thread: bit cleared by disable",
                                    "ok many: 20 children registered and exited",
                                    "ok many: the parent's word untouched"]


def test_run_without_sudo_forked_children_inherit_enablers(
        ordinary_user: User, client) -> None:  # type: ignore[no-untyped-def]
    # Needs fork/exec/exit without the process connector (issue 10 part 1):
    # in a user namespace the connector cannot be joined.
    rc, out, err = run_as_user(ordinary_user, client("ue_procs"), TRACING, "fork")
    assert rc == 0, out + err
    assert sorted(out.splitlines()) == sorted([
        "ok parent: enabled seen", "ok child: enabled seen", "ok child: disabled seen",
        "ok parent: disabled seen", "ok parent: child exited 0"])


def test_mount_without_sudo_goes_through_fusermount3(
        ordinary_user: User, user_dir: Path) -> None:
    mnt = user_dir / "tracing"
    mnt.mkdir()
    os.chown(mnt, ordinary_user.uid, ordinary_user.gid)
    result = ordinary_user.shell(
        f'$TRACEFS_FUSE mount {mnt} || exit\n'
        f'grep " {mnt} " /proc/self/mounts\n'
        f'stat -c "%u %a" {mnt}\n'
        f'cat {mnt}/user_events_status\n'
        f'$TRACEFS_FUSE umount {mnt}\n'
        f'grep -c " {mnt} " /proc/self/mounts\n')
    assert result.returncode == 1, result.stdout + result.stderr  # grep -c found none
    lines = result.stdout.splitlines()
    fields = lines[0].split()
    assert fields[1:3] == [str(mnt), "fuse.tracefs"]
    # fusermount3 records the user; allow_other is not granted without user_allow_other.
    assert f"user_id={ordinary_user.uid}" in fields[3] and "allow_other" not in fields[3]
    assert lines[1] == f"{ordinary_user.uid} 700"  # the files are the user's
    assert lines[2:5] == ["", "Active: 0", "Busy: 0"]
    assert lines[5] == "0"
    assert wait_for_no_processes(ordinary_user, 10) == []  # the daemon exited
    assert result.stderr == (
        f"tracefs-fuse mount: note: only your own processes (uid {ordinary_user.uid}) may "
        f"use this mount, not even root's: other users need user_allow_other in "
        f"/etc/fuse.conf\n")


def test_the_readme_s_trace_cmd_example_works_without_sudo(
        ordinary_user: User, user_dir: Path) -> None:
    # The README's example, word for word but for the program, in the user's directory.
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert ("trace-cmd record -e user_events:my_event ./my-instrumented-program'\n"
            "trace-cmd report") in readme
    program = "echo 1 > /dev/null"  # my_event exists; nothing needs to emit it
    result = ordinary_user.shell(
        f"cd {user_dir} && $TRACEFS_FUSE run -- sh -c '\n"
        f'    echo "u:my_event u32 count; char[16] msg" >> /sys/kernel/tracing/dynamic_events\n'
        f"    trace-cmd record -e user_events:my_event {program}' && trace-cmd report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Bad address" not in result.stderr and "WARNING" not in result.stderr
    assert (user_dir / "trace.dat").stat().st_uid == ordinary_user.uid
    assert "cpus=" in result.stdout  # trace-cmd report read the user's trace.dat
