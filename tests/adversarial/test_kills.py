"""Killing clients and the daemon in the middle of a request.

A client killed while the daemon works for it (a blocked read, a write, an
ioctl) dies at once and leaves nothing behind that hinders anyone else. A
daemon killed while clients wait leaves them a clean error and no hang: the
kernel aborts the connection (``fuse_abort_conn``), so a request in flight
ends with ECONNABORTED and anything later with ENOTCONN
(fs/fuse/dev.c, ``fuse_request_end`` after ``end_requests``; ``fuse_get_req``).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import Mount
from .conftest import CLIENT_TIMEOUT_S, assert_serves, expect_line, kill_daemon, spawn_as, \
    wait_in_request

pytestmark = pytest.mark.uses_fuse

LOOPS = {
    "blocked read": ["read", "trace_pipe"],
    "blocked read of trace_pipe_raw": ["read", "per_cpu/cpu0/trace_pipe_raw"],
    "write": ["write"],
    "ioctl": ["ioctl"],
    "marker": ["marker"],
}


def start_loop(client: Path, mount: Mount, args: list[str]) -> subprocess.Popen[str]:
    proc = spawn_as(None, client, mount, *args)
    expect_line(proc, "ready")
    wait_in_request(proc.pid)
    return proc


def enable_loop_event(mount: Mount) -> None:
    mount.write("dynamic_events", "u:adv_loop u32 n\n")
    mount.write("events/user_events/adv_loop/enable", "1")


@pytest.mark.parametrize("what", LOOPS)
def test_a_client_killed_mid_request_dies_and_harms_nobody(
        what: str, open_mount: Mount, client_as: Callable[[str], Path]) -> None:
    enable_loop_event(open_mount)
    proc = start_loop(client_as("adv_loop"), open_mount, LOOPS[what])
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=CLIENT_TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL
    assert_serves(open_mount)
    # Its registrations went with its descriptor: the event is deletable
    # (user_event_match: a field-less "-:name" matches only field-less events).
    open_mount.write("events/user_events/adv_loop/enable", "0")
    open_mount.write("dynamic_events", "-:adv_loop u32 n\n")
    assert "adv_loop" not in open_mount.read("dynamic_events")


def test_killing_the_daemon_mid_request_frees_every_client(
        killable_mount: Mount, client_as: Callable[[str], Path]) -> None:
    enable_loop_event(killable_mount)
    # Nothing recorded: the blocked readers stay blocked (markers get EBADF,
    # user_events writes go through unrecorded; both keep requests coming).
    killable_mount.write("tracing_on", "0")
    client = client_as("adv_loop")
    procs = {what: start_loop(client, killable_mount, args) for what, args in LOOPS.items()}
    kill_daemon(killable_mount)
    last = {}
    for what, proc in procs.items():
        out, err = proc.communicate(timeout=CLIENT_TIMEOUT_S)
        assert proc.returncode == 0, (what, err)
        last[what] = out.splitlines()[-2:]
    # A request in flight ends ECONNABORTED (the blocked reads certainly
    # were); one sent after the abort ENOTCONN; so does any later open().
    assert last.pop("blocked read") == ["read: ECONNABORTED", "reopen: ENOTCONN"]
    assert last.pop("blocked read of trace_pipe_raw") == ["read: ECONNABORTED",
                                                          "reopen: ENOTCONN"]
    for what, (failure, reopen) in last.items():
        assert failure.split(": ")[1] in ("ECONNABORTED", "ENOTCONN"), (what, failure)
        assert reopen == "reopen: ENOTCONN", what
