"""perf_event_open for our events inside ``tracefs-fuse run`` (docs/perf.md, issue 20).

The client does what the kernel's selftest user_events/perf_test.c checks
(perf_write, perf_empty_events); 22 checks, each printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..ordinary_user import User

pytestmark = pytest.mark.uses_fuse

TRACING = "/sys/kernel/tracing"
RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
#: perf_user_event: what the kernel's perf_test checks (perf_write, perf_empty_events).
CHECKS = 22


def assert_all_checks(returncode: int, out: str, err: str, expected: int = CHECKS) -> None:
    assert returncode == 0, out + err
    lines = out.splitlines()
    assert lines[-1] == f"checks {expected}", out + err
    assert sum(line.startswith("ok ") for line in lines) == expected


def test_perf_test_as_root(c_client) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run([*RUN, str(c_client("perf_user_event")), TRACING],
                            capture_output=True, text=True, timeout=60)
    assert_all_checks(result.returncode, result.stdout, result.stderr)


def test_other_perf_events_still_reach_the_kernel(c_client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Id 1 is never one of ours (ours start past the host's highest id): the
    # call continues to the kernel and gets the kernel's answer, whatever the
    # host has there; the same as outside run.
    (tmp_path / "id").write_text("1\n")
    argv = [str(c_client("perf_tracepoint")), str(tmp_path / "id")]
    inside = subprocess.run([*RUN, *argv], capture_output=True, text=True, timeout=60)
    outside = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout == outside.stdout


def test_perf_test_without_sudo(ordinary_user: User, c_client) -> None:  # type: ignore[no-untyped-def]
    home = Path(tempfile.mkdtemp(prefix="tfuse-perf-"))
    try:
        os.chown(home, ordinary_user.uid, ordinary_user.gid)
        home.chmod(0o755)
        exe = shutil.copy(c_client("perf_user_event"), home / "perf_user_event")
        result = ordinary_user.run([*ordinary_user.tracefs_fuse(), "run", "--", exe, TRACING])
    finally:
        shutil.rmtree(home)
    assert_all_checks(result.returncode, result.stdout, result.stderr)


def run_client(exe: Path, as_root: bool, user: User) -> subprocess.CompletedProcess[str]:
    """``exe TRACEFS`` under run, as root or as an ordinary user (a copy it can run)."""
    if as_root:
        return subprocess.run([*RUN, str(exe), TRACING], capture_output=True, text=True,
                              timeout=60)
    home = Path(tempfile.mkdtemp(prefix="tfuse-perf-"))
    try:
        os.chown(home, user.uid, user.gid)
        home.chmod(0o755)
        copy = shutil.copy(exe, home / exe.name)
        return user.run([*user.tracefs_fuse(), "run", "--", copy, TRACING])
    finally:
        shutil.rmtree(home)


#: Client -> its checks, each a consumer's way with the perf fd:
CLIENTS = {
    # OpenTelemetry's exporter tests (one_collect): per-CPU inert dummy leaders, the
    # tracepoints redirected into them, ids from read(), rings read without poll.
    "perf_one_collect": 15,
    # A non-overwrite ring: unread records stay, the rest is counted and reported
    # by PERF_RECORD_LOST once the reader moves data_tail.
    "perf_data_tail": 15,
    # perf record -- CMD: a disabled event of a waiting child, enabled by its exec.
    "perf_enable_on_exec": 11,
    # LinuxTracepoints' TracepointSession (perf-collect): per-CPU leaders with a second
    # event SET_OUTPUT into them; realtime (ppoll, data_tail) and circular
    # (write_backward, read-only rings, PAUSE_OUTPUT, PERF_RECORD_LOST for paused writes).
    "perf_tracepoint_session": 34,
    # A perf consumer joins an event ftrace records already: every write from the open
    # on is a sample (the fast path hands the event's writes to the engine at once).
    "perf_with_ftrace": 7,
    # inherit: children, an exec'd child and a thread made after the open are
    # followed (one made before is not), with FORK, COMM and EXIT records in
    # order; a per-task event of a child (its ring mapped) says POLLHUP once the child is gone.
    "perf_inherit": 32,
    # Every field of the samples the fast path writes natively, through the cases it
    # leaves to the engine (a full ring, PERF_RECORD_LOST, an invalid dynamic field).
    "perf_native": 15,
    # Two threads' writes into one CPU-wide ring, a reader and a thread toggling the event
    # meanwhile: the fast path writes some samples while the engine writes others or
    # changes the ring; every record stays whole and read() counts exactly.
    "perf_native_race": 11,
}


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "without_sudo"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_perf_client(client: str, as_root: bool, ordinary_user: User, c_client) -> None:  # type: ignore[no-untyped-def]
    result = run_client(c_client(client), as_root, ordinary_user)
    assert_all_checks(result.returncode, result.stdout, result.stderr, CLIENTS[client])


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast_path", "no_fast_path"])
def test_native_samples_are_the_engines(fast_path: bool, c_client) -> None:  # type: ignore[no-untyped-def]
    # The same exact checks whichever writes the samples: under the fast path most
    # are written natively (the debug log names each write's path), with
    # --no-fast-path the engine writes all.
    mode = [] if fast_path else ["--no-fast-path"]
    result = subprocess.run([sys.executable, "-m", "tracefs_fuse", "run", *mode, "--log-level",
                             "debug", "--", str(c_client("perf_native")), TRACING],
                            capture_output=True, text=True, timeout=60)
    assert_all_checks(result.returncode, result.stdout, result.stderr, CLIENTS["perf_native"])
    native = result.stderr.count("served natively")
    # 181 writes that record: all but the first (its writer not yet known), those
    # due a wakeup and those that found the ring full are natively written.
    assert native >= 100 if fast_path else native == 0, result.stderr[-2000:]
