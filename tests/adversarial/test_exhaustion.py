"""Descriptors: a daemon that keeps one per client it has seen dies after a thousand (issue 19, items 1, 2).

The usual soft ``RLIMIT_NOFILE`` is 1024 (a login shell's, a systemd unit's, a
CI runner's). The daemon here runs under ``ulimit -n 1024`` (soft and hard, so
it cannot raise it): whatever it keeps per client must be bounded, and a
budget one client exhausts must refuse that client (the kernel's errno), never
every client. After each attack root's ``cat tracing_on`` still works.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import Mount
from .conftest import HardUsers, assert_serves, expect_line, run_as, spawn_as

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

#: ``ulimit -n``: a login shell's, a systemd unit's, a CI runner's.
FD_LIMIT = 1024
#: Clients in a row: more than the limit, so one fd kept per client kills the mount.
CLIENTS = 1100


def limit_fds(mount: Mount) -> int:
    """Put the daemon under ``ulimit -n FD_LIMIT`` (soft and hard); its fds now."""
    resource.prlimit(mount.proc.pid, resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
    return held_fds(mount)


def held_fds(mount: Mount) -> int:
    return len(os.listdir(f"/proc/{mount.proc.pid}/fd"))


def records(mount: Mount) -> int:
    return mount.read("trace").count(" adv_fds: n=")


def enable(mount: Mount) -> None:
    mount.write("dynamic_events", "u:adv_fds u32 n\n")
    mount.write("events/user_events/adv_fds/enable", "1")


@pytest.mark.parametrize("what", ["procs", "threads"])
def test_a_thousand_clients_in_a_row_leave_the_mount_serving(
        what: str, open_mount: Mount, client_as: Callable[[str], Path]) -> None:
    """Item 1: 1,100 short-lived processes (or threads), each writing once."""
    enable(open_mount)
    before = limit_fds(open_mount)
    result = run_as(None, client_as("adv_fds"), open_mount, what, CLIENTS, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"{what}: {CLIENTS}"]
    assert records(open_mount) == CLIENTS
    assert open_mount.read("tracing_on") == "1\n"
    assert_serves(open_mount)
    # What is left of them: a bounded cache, not one fd per client seen.
    assert held_fds(open_mount) - before <= 64


def test_one_user_holding_many_children_refuses_only_that_user(
        gid_mount: Mount, hard_users: HardUsers, client_as: Callable[[str], Path]) -> None:
    """Item 2: children that register and stay; the owner's budget runs out,
    its next registrations get ENOMEM (``user_event_mm_alloc``), and everybody
    else is served as before."""
    enable(gid_mount)
    limit_fds(gid_mount)
    client = client_as("adv_fds")
    holder = spawn_as(hard_users.member, client, gid_mount, "hold", 400)
    try:
        lines = expect_line(holder, "ready")
        ok, refused = map(int, lines[0].split()[1:])
        assert ok + refused == 400
        assert refused > 0, lines  # the budget ran out, for that user only
        assert gid_mount.read("tracing_on") == "1\n"
        assert_serves(gid_mount)
        # Root's own clients still register and write.
        other = run_as(None, client, gid_mount, "procs", 20)
        assert other.stdout.splitlines() == ["procs: 20"], other.stdout + other.stderr
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    # With the holder gone, its budget is free again.
    again = run_as(hard_users.member, client, gid_mount, "hold", 20, stdin="\n")
    assert again.stdout.splitlines() == ["held: 20 0", "ready"], again.stdout + again.stderr
