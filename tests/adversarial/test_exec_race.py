"""Issue 11, item 2: a write into a setuid-root image, raced by an ordinary user.

An unprivileged member of the mount's group registers an event, then forks
children that exec a setuid-root copy of the same program at once, while root
toggles the event and two CPU hogs load the machine. The kernel drops a
child's enablers at exec; nothing may ever be written into the new image. The
target program checks its own enable word, which sits at the registered
address (``-no-pie``), for a millisecond and exits 1 if it ever changed.

Before the fix the daemon read the child's byte after the fork event and wrote
it back; a child exec'ing in between took the write (9 of 2000 children in the
report, 5 of 3000 with this client). The children exec 0-400 us after their
fork, the time the daemon takes to see a fork and act on it. Each fork source
runs ROUNDS rounds: 10,000 in all.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Mount, start_mount, stop_mount

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

ROUNDS = 5_000
GROUP = 4242
NOBODY = 65534


@pytest.fixture
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="tracefs-fuse-race-"))
    path.chmod(0o755)  # pytest's own temp dirs are 0700: not for the ordinary user
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def hogs() -> Iterator[None]:
    """Two CPU hogs: the race window widens when the daemon is preempted. They
    die with the test's process however it ends (a killed run left them spinning)."""
    procs = [subprocess.Popen(["setpriv", "--pdeathsig", "KILL", "sh", "-c",
                               "while :; do :; done"]) for _ in range(2)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _toggle(mount: Mount, event: str, stop: threading.Event, count: list[int]) -> None:
    path = mount.path / "events" / "user_events" / event / "enable"
    fd = os.open(path, os.O_WRONLY)
    try:
        while not stop.is_set():
            try:
                os.pwrite(fd, b"1" if count[0] % 2 == 0 else b"0", 0)
            except OSError as exc:
                if exc.errno == errno.ENODEV:
                    return  # the client exited: its event went with its enabler
                raise
            count[0] += 1
    finally:
        os.close(fd)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("source", ["connector", "procfs"])
def test_no_write_lands_in_an_image_exec_d_right_after_fork(
        source: str, scratch: Path, hogs: None, c_client: Callable[[str], Path]) -> None:
    exe = scratch / "ue_lineage"
    target = scratch / "ue_lineage_setuid"
    shutil.copy(c_client("ue_lineage"), exe)
    shutil.copy(c_client("ue_lineage"), target)
    os.chown(target, 0, 0)
    target.chmod(0o4755)
    as_member = dict(user=NOBODY, group=GROUP, extra_groups=[GROUP])
    euid = subprocess.run([str(target), "euid"], capture_output=True, text=True, check=True,
                          **as_member)  # type: ignore[arg-type]
    assert euid.stdout == "euid=0\n", "the setuid copy must run as root (nosuid mount?)"

    mount = start_mount(scratch / "tracing", scratch / "daemon.log", "--gid", str(GROUP),
                        "--mode", "750", "--process-source", source)
    try:
        (mount.path / "user_events_data").chmod(0o660)
        client = subprocess.Popen([str(exe), str(mount), "race", str(ROUNDS), str(target)],
                                  stdout=subprocess.PIPE, text=True,
                                  **as_member)  # type: ignore[arg-type]
        assert client.stdout is not None
        lines = []
        while not (line := client.stdout.readline()).startswith("event "):
            assert line, f"client ended early: {''.join(lines)}"
            lines.append(line)
        stop, toggles = threading.Event(), [0]
        toggler = threading.Thread(target=_toggle,
                                   args=(mount, line.split()[1], stop, toggles))
        toggler.start()
        try:
            out, _ = client.communicate(timeout=600)
        finally:
            stop.set()
            toggler.join()
        assert f"rounds={ROUNDS} written=0 failed=0\n" in out, out
        assert client.returncode == 0
        # The race was run: the event changed state all along. Each toggle
        # waits for its bits' worker (issue 19 item 3), and two hogs share the
        # 2 CPUs: under a CI run beside it, 175 toggles were seen over the
        # rounds; a toggler that failed early stops at a handful.
        assert toggles[0] > ROUNDS // 100
    finally:
        stop_mount(mount)
