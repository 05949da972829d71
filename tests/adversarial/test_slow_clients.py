"""One client's slow memory stalls only that client (issue 19, item 3).

The kernel never makes one process wait for another's memory: a registration
reads its struct and name and faults in its own enable word in the caller's
context, and ``user_event_enabler_write`` writes every other process's bit
with ``FOLL_NOFAULT``, queuing a work item to fault in the pages that are not
there. The attacks, while bystanders go on (``cat tracing_on``, and a
register, enable, write, disable round trip, each bounded):

* an enable word on a userfaultfd page its owner never resolves
  (``tests/clients/adv_uffd.c``; root, as the userfaultfd must catch the
  faults the kernel takes for others), or the rest of a write FUSE split
  on such a page. Before, the daemon's one thread waited in
  ``handle_userfault`` for as long as the attacker liked, and so did
  everyone;
* K registrations whose names lie on pages of FUSE filesystems that never
  answer (``tests/clients/stall_fs.c``). Before, each held the daemon's one
  thread until the watchdog aborted that connection, 1 s: everyone waited
  K seconds;
* K processes whose enable words are moved onto such pages after they
  registered, and an ``echo 1 > enable`` that writes all K bits. Before,
  each write held the daemon's one thread for 1 s too.

The longest bystander wait of each attack is reported (``fuzz_report``) for
docs/reliability.md; the bound here only tells a stall from a slow machine.
A step that overruns it aborts the mount's connection (the only way to free
a client stuck in a FUSE request, and the daemon with the attacker's fault
pending) and fails.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import Mount, stop_mount
from .conftest import assert_serves, expect_line, fuzz_report, spawn_as, wait_in_request
from .fault_abort import abort, connection, waiting

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


def test_a_split_write_whose_rest_never_faults_in_stalls_only_writers(
        killable_mount: Mount, client_as: Callable[[str], Path]) -> None:
    """A ``writev`` of 300 iovecs, the last on the page: FUSE sends the first
    256 (its page limit), and the look at the whole write reads the last.

    The writer holds ``user_events_data``'s inode lock meanwhile (FUSE takes
    it for a direct write past the file's size, 0): other writes to that
    file wait for it in the kernel, whatever the daemon does. The rest of the
    mount does not; and a signal frees the writer (EINTR), and the others
    with it."""
    mount = killable_mount
    uffd = client_as("adv_uffd")
    writer = spawn_as(None, uffd, "writev", mount, "split")
    try:
        expect_line(writer, "armed")
        wait_in_request(writer.pid)
        waits = [bounded(mount, "cat", mount / "tracing_on")[0] for _ in range(READS)]
        assert len(waits) == READS
        stuck(writer)
    finally:
        end(writer)
    assert writer.returncode == -signal.SIGKILL  # freed by its signal
    after = bystanders(mount, uffd)  # writers too, once it is gone
    fuzz_report("uffd-split-write", longest_bystander_ms=round(max(waits) * 1000, 1),
                longest_after_ms=round(after * 1000, 1))
    assert_serves(mount)
    stop_mount(mount)


#: Registrations whose names stall, in parallel.
STALLED = 8


@contextlib.contextmanager
def stall_servers(scratch: Path, c_client: Callable[[str], Path],
                  count: int) -> Iterator[list[Path]]:
    """``count`` FUSE filesystems whose reads never end, a page of each."""
    servers = []
    try:
        for _ in range(count):
            where = Path(tempfile.mkdtemp(dir=scratch))
            server = subprocess.Popen([str(c_client("stall_fs")), str(where)],
                                      stdout=subprocess.PIPE, text=True)
            servers.append((where, server))
            assert server.stdout is not None and server.stdout.readline() == "ready\n"
        yield [where / "page" for where, _ in servers]
        for _, server in servers:  # each was aborted by the watchdog, after 1 s
            assert server.communicate(timeout=STEP_BOUND_S)[0] == "ended\n"
    finally:
        for where, server in servers:
            if server.poll() is None:
                abort(connection(where))
                server.communicate(timeout=STEP_BOUND_S)
            # libfuse leaves an aborted connection's mount in place.
            subprocess.run(["fusermount3", "-u", "-z", str(where)], check=True)


@pytest.fixture
def stalling_pages(scratch: Path, c_client: Callable[[str], Path]) -> Iterator[list[Path]]:
    """:data:`STALLED` FUSE filesystems whose reads never end, a page of each."""
    with stall_servers(scratch, c_client, STALLED) as pages:
        yield pages


def test_registrations_whose_names_stall_stall_only_themselves(
        killable_mount: Mount, client_as: Callable[[str], Path],
        c_client: Callable[[str], Path], stalling_pages: list[Path]) -> None:
    mount = killable_mount
    registrants = [spawn_as(None, c_client("fault_mem"), "reg-name", mount, page)
                   for page in stalling_pages]
    try:
        for registrant in registrants:
            wait_in_request(registrant.pid)
        longest = bystanders(mount, client_as("adv_uffd"))
        # Each waits as long as its page: until the watchdog aborts that
        # filesystem's connection (1 s), then EFAULT.
        for registrant in registrants:
            out, err = registrant.communicate(timeout=STEP_BOUND_S * STALLED)
            assert out == "reg-name rc=-1 errno=EFAULT\n", err
    finally:
        for registrant in registrants:
            if registrant.poll() is None:
                end(registrant)
    assert len(registrants) == STALLED
    fuzz_report("stalled-names", registrations=STALLED,
                longest_bystander_ms=round(longest * 1000, 1))
    assert_serves(mount)
    stop_mount(mount)


def test_enable_words_that_stall_stall_only_their_writers(
        killable_mount: Mount, client_as: Callable[[str], Path],
        c_client: Callable[[str], Path], stalling_pages: list[Path]) -> None:
    """The enable reaches every holder's page later, as the kernel's work
    item does for a page that is not there; its reply waits for them only
    briefly, and nobody else waits at all."""
    mount = killable_mount
    holders = [spawn_as(None, c_client("fault_mem"), "remap", mount, page, "fanout_stall u32 a")
               for page in stalling_pages]
    try:
        for holder in holders:
            assert expect_line(holder, "ready") == ["reg rc=0 errno=0", "ready"]
        enable = mount / "events/user_events/fanout_stall/enable"
        # Its reply waits for the bits, bounded: here until the watchdog's
        # aborts (1 s) end the writes. Bystanders meanwhile wait for none of it.
        start = time.monotonic()
        enabler = spawn_as(None, "sh", "-c", f'echo 1 > "{enable}"')
        wait_in_request(enabler.pid)
        longest = bystanders(mount, client_as("adv_uffd"))
        enabler.communicate(timeout=STEP_BOUND_S)
        enabling = time.monotonic() - start
        assert enabler.returncode == 0
        assert mount.read("events/user_events/fanout_stall/enable") == "1\n"
        # Each holder's page waited until the watchdog aborted its
        # filesystem (1 s): its unregistration's clear faults there then.
        for holder in holders:
            out, err = holder.communicate("\n", timeout=STEP_BOUND_S * STALLED)
            assert out == "unreg rc=-1 errno=EFAULT\n", err
    finally:
        for holder in holders:
            if holder.poll() is None:
                end(holder)
    assert len(holders) == STALLED
    fuzz_report("stalled-enable-words", holders=STALLED, enabling_ms=round(enabling * 1000, 1),
                longest_bystander_ms=round(longest * 1000, 1))
    assert_serves(mount)
    stop_mount(mount)


#: A bystander that waits longer waited for the perf reader's stalled page
#: (before: the first waited out most of the watchdog's 1 s abort).
PERF_BYSTANDER_BOUND_S = 0.5
#: adv_perf_tail's checks: 8 before the attack, 3 after.
PERF_TAIL_CHECKS = 11


def test_a_perf_ring_whose_reader_page_stalls_stalls_only_its_writer(
        scratch: Path, c_client: Callable[[str], Path]) -> None:
    """A perf reader under ``run`` fills its writable ring, maps a page of a
    FUSE filesystem that never answers over the ring's first page (where
    it writes ``data_tail``) and writes its event on: each write needs the
    tail. The reads of it wait in the reader's lane (until the watchdog
    aborts that filesystem, 1 s); bystanders' ``cat tracing_on`` meanwhile
    wait for none of it, and the writer waits, bounded."""
    with stall_servers(scratch, c_client, 1) as (page,):
        attacker = spawn_as(None, sys.executable, "-m", "tracefs_fuse", "run", "--",
                            c_client("adv_perf_tail"), "/sys/kernel/tracing", page)
        try:
            before = expect_line(attacker, "armed ", prefix=True)
            pid = int(before[-1].split()[1])
            wait_in_request(pid)
            # The bystanders start while the page's read waits (the watchdog
            # ends it 1 s after it began).
            read_waits(connection(page.parent))
            # The same mount, through the attacker's namespace.
            tracing_on = f"/proc/{pid}/root/sys/kernel/tracing/tracing_on"
            waits = []
            for _ in range(READS):
                start = time.monotonic()
                out = subprocess.run(["cat", tracing_on], capture_output=True, text=True,
                                     timeout=STEP_BOUND_S, check=True).stdout
                waits.append(time.monotonic() - start)
                assert out == "1\n"
            assert len(waits) == READS
            assert max(waits) < PERF_BYSTANDER_BOUND_S, waits
            out, err = attacker.communicate("\n", timeout=STEP_BOUND_S * 2)
        finally:
            if attacker.poll() is None:
                end(attacker)
    assert attacker.returncode == 0, out + err
    lines = before + out.splitlines()
    assert lines[-1] == f"checks {PERF_TAIL_CHECKS}", out + err
    assert sum(line.startswith("ok ") for line in lines) == PERF_TAIL_CHECKS
    writes, longest_write_ms = lines[-2].split()[1::2]
    assert float(longest_write_ms) < STEP_BOUND_S * 1000
    fuzz_report("perf-tail-stall", longest_bystander_ms=round(max(waits) * 1000, 1),
                writes=int(writes), longest_write_ms=float(longest_write_ms))


def read_waits(conn: int) -> None:
    """Until a request of FUSE connection ``conn`` waits for its answer.

    There is no event to wait for: fusectl is polled, briefly and bounded.

    Raises:
        AssertionError: not within :data:`STEP_BOUND_S`.
    """
    deadline = time.monotonic() + STEP_BOUND_S
    while waiting(conn) != 1:
        assert time.monotonic() < deadline, f"no request of connection {conn} waits"
        time.sleep(0.002)
