"""One client's slow memory stalls only that client (issue 19, item 3).

The kernel never makes one process wait for another's memory: a registration
faults in its own enable word, and ``user_event_enabler_write`` writes every
other process's bit with ``FOLL_NOFAULT``, queuing a work item to fault in
the pages that are not there. Here an attacker puts its enable word on a
userfaultfd page it never resolves (``tests/clients/adv_uffd.c``; root, as
the userfaultfd must catch the faults the kernel takes for others), and
bystanders go on: ``cat tracing_on`` and a register, enable, write, disable
round trip, each bounded. Before, the daemon's one thread waited in
``handle_userfault`` for as long as the attacker liked, and so did everyone.

The longest bystander wait of each attack is reported (``fuzz_report``) for
docs/reliability.md; the bound here only tells a stall from a slow machine.
A step that overruns it aborts the mount's connection (the only way to free
a client stuck in a FUSE request, and the daemon with the attacker's fault
pending) and fails.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import Mount, stop_mount
from .conftest import assert_serves, expect_line, fuzz_report, spawn_as, wait_in_request
from .fault_abort import abort, connection

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

#: A bystander's step that takes longer waits for the attacker (the attack
#: lasts until the test ends it; each step takes milliseconds).
STEP_BOUND_S = 5.0
#: ``cat tracing_on`` in a row, then round trips, while the attacker waits.
READS = 20
ROUNDS = 5


def bounded(mount: Mount, *argv: object) -> tuple[float, str]:
    """Run a bystander's command as root; its time and output.

    Raises:
        AssertionError: it waited :data:`STEP_BOUND_S` (the connection is
            aborted, so that it and the attackers end), or it failed.
    """
    conn = connection(mount.path)
    start = time.monotonic()
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=STEP_BOUND_S)
    except subprocess.TimeoutExpired:
        abort(conn)
        proc.communicate()
        raise AssertionError(f"{argv} waited {STEP_BOUND_S} s for an attacker") from None
    assert proc.returncode == 0, err
    return time.monotonic() - start, out


def bystanders(mount: Mount, round_client: Path) -> float:
    """Each bystander step, bounded; the longest wait in seconds."""
    waits = []
    for _ in range(READS):
        took, out = bounded(mount, "cat", mount / "tracing_on")
        waits.append(took)
        assert out == "1\n"
    for n in range(ROUNDS):
        took, out = bounded(mount, round_client, "round", mount, f"bystander{n}")
        waits.append(took)
        assert out == "round ok\n"
    assert len(waits) == READS + ROUNDS
    return max(waits)


def stuck(proc: subprocess.Popen[str]) -> None:
    """The attacker still waits for its registration's reply."""
    assert proc.poll() is None
    wait_in_request(proc.pid)


def end(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate(timeout=STEP_BOUND_S)


def test_an_enable_word_that_never_faults_in_stalls_only_its_owner(
        killable_mount: Mount, client_as: Callable[[str], Path]) -> None:
    """Two attackers: one registers with its enable word on the page (its
    registration's first write waits there), the other arms the page after
    registering (an enable writes its bit there). Bystanders meanwhile: an
    ``echo 1 > enable`` of the second's event, then ``cat tracing_on`` and
    round trips."""
    mount = killable_mount
    uffd = client_as("adv_uffd")
    later = spawn_as(None, uffd, "later", mount, "armed_later")
    registrant = spawn_as(None, uffd, "reg", mount, "stalled")
    try:
        expect_line(later, "armed")
        expect_line(registrant, "armed")
        wait_in_request(registrant.pid)
        enable = mount / "events/user_events/armed_later/enable"
        # The kernel answers at once and faults the page in later (through
        # /proc/<pid>/mem a userfaultfd page fails at once: EIO).
        enabling, _ = bounded(mount, "sh", "-c", f'echo 1 > "{enable}"')
        longest = max(enabling, bystanders(mount, uffd))
        assert mount.read("events/user_events/armed_later/enable") == "1\n"
        assert later.poll() is None
        stuck(registrant)
    finally:
        end(registrant)
        end(later)
    fuzz_report("uffd-enable", enabling_ms=round(enabling * 1000, 1),
                longest_bystander_ms=round(longest * 1000, 1))
    assert_serves(mount)
    stop_mount(mount)  # a clean exit, no error logged
