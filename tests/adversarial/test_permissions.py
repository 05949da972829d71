"""An ordinary member of the mount's group, and a stranger, against a ``--gid`` mount.

tracefs' rules: the root directory has ``mode=`` (750 here) and every file
the ``gid=`` group; files keep the kernel's modes (``TRACE_MODE_WRITE`` 0640,
``TRACE_MODE_READ`` 0440), so the group reads and never writes until an
admin changes a mode; only the owner may chmod. Past the VFS, user_events
adds its own: ioctls need only an open descriptor (a read-only one
registers), writes need a writable one (EBADF), ``USER_EVENT_REG_PERSIST``
and deleting a persistent event need CAP_PERFMON (``user_event_capable``:
EPERM).
"""

from __future__ import annotations

from typing import Callable

import pytest

from ..integration.conftest import Mount
from .conftest import HardUsers, assert_serves, run_as

pytestmark = pytest.mark.uses_fuse

PERSISTENT = "adv_root_persist"

MEMBER = {
    "readdir": "ok", "read_tracing_on": "ok", "read_trace": "ok", "read_status": "ok",
    "write_tracing_on": "EACCES", "write_buffer_size_kb": "EACCES",
    "write_dynamic_events": "EACCES", "open_data_rw": "EACCES", "open_data_ro": "ok",
    "register": "ok", "write_event": "EBADF", "unregister": "ok",
    "register_persist": "EPERM", "delete_persistent": "EPERM",
    "open_trace_pipe_raw": "ok", "mmap_trace_pipe_raw": "ok",
    "stat_data": "ok", "chmod_data": "EPERM",
}
#: Everything is behind the root directory's 750.
STRANGER = {
    "readdir": "EACCES", "read_tracing_on": "EACCES", "read_trace": "EACCES",
    "read_status": "EACCES", "write_tracing_on": "EACCES", "write_buffer_size_kb": "EACCES",
    "write_dynamic_events": "EACCES", "open_data_rw": "EACCES", "open_data_ro": "EACCES",
    "open_trace_pipe_raw": "EACCES", "stat_data": "EACCES", "chmod_data": "EACCES",
}


def prepare(mount: Mount, users: HardUsers) -> None:
    """Root's side: a persistent event to refuse deleting, and the member's
    own event enabled, so that a refused write is the descriptor's EBADF and
    not a disabled event's (``user_events_write_core``)."""
    mount.write("dynamic_events", f"u:{PERSISTENT} u32 x\n")  # persistent, as in the kernel
    mount.write("dynamic_events", f"u:adv_perm_{users.member.uid} u32 x\n")
    mount.write(f"events/user_events/adv_perm_{users.member.uid}/enable", "1")


def attempts(user: object, client: object, mount: Mount) -> dict[str, str]:
    result = run_as(user, client, mount, PERSISTENT)  # type: ignore[arg-type]
    assert result.returncode == 0, result.stderr
    return dict(line.split(": ", 1) for line in result.stdout.splitlines())


def test_a_member_and_a_stranger_get_tracefs_permissions(
        gid_mount: Mount, hard_users: HardUsers, client_as: Callable[[str], object]) -> None:
    prepare(gid_mount, hard_users)
    client = client_as("adv_perms")
    assert attempts(hard_users.member, client, gid_mount) == MEMBER
    assert attempts(hard_users.stranger, client, gid_mount) == STRANGER
    assert f"{PERSISTENT} u32 x" in gid_mount.read("dynamic_events")
    assert gid_mount.read("user_events_status").endswith("Active: 2\nBusy: 1\n")
    assert "adv_perm_" not in gid_mount.read("trace")
    assert_serves(gid_mount)


def test_chmod_g_w_lets_the_member_write_and_nothing_more(
        gid_mount: Mount, hard_users: HardUsers, client_as: Callable[[str], object]) -> None:
    """An admin's ``chmod g+w user_events_data``: the member registers and
    writes; every other refusal stands."""
    prepare(gid_mount, hard_users)
    (gid_mount / "user_events_data").chmod(0o660)
    got = attempts(hard_users.member, client_as("adv_perms"), gid_mount)
    assert got == MEMBER | {"open_data_rw": "ok", "write_event": "ok"}
    assert f"adv_perm_{hard_users.member.uid}: x=0x7 (7)" in gid_mount.read("trace")
