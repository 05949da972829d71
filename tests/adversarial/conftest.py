"""The adversarial suite's fixtures: hostile users, killed clients, killed daemons.

Small and generic on purpose (several authors add tests here):

* ``scratch``: a world-traversable directory (pytest's own are 0700), so
  mounts and client binaries in it are reachable by unprivileged users;
* ``hard_users``: a group and two ordinary users (``tests/ordinary_user.py``)
  for the session, one in the group (``member``) and one not (``stranger``);
* ``gid_mount``: a mount with ``--gid`` of that group and ``--mode 750``
  (root may do everything, the group what tracefs' modes allow it, others
  nothing); ``open_mount``: a plain mount in ``scratch``;
  ``kernel_instance``: a private instance of the machine's real tracefs;
* ``client_as``: a C client from ``tests/clients`` copied where every user
  can run it; :func:`run_as` / :func:`spawn_as` run it as a user;
* :func:`wait_in_request`: until a process is blocked in a FUSE request
  (so a kill lands mid-request); ``killable_mount`` and :func:`kill_daemon`;
  :func:`assert_serves`: the daemon still answers another client;
* :func:`fuzz_budget` / :func:`fuzz_report`: how much a fuzzer runs
  (``TFUSE_FUZZ_SCALE``, ``TFUSE_FUZZ_SEED``: ``make test`` runs scale 1,
  ``make fuzz`` more) and where it reports its figures
  (``TFUSE_FUZZ_REPORT``, JSON lines, for docs/reliability.md).

Rules: every wait is bounded; whatever a fixture creates (users, mounts,
files) is removed at its end, also after a failure.
"""

from __future__ import annotations

import grp
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import msgspec
import pytest
from hypothesis import HealthCheck, settings

from ..integration.conftest import Mount, start_mount, stop_mount
from ..fuse.test_bridge import testfs  # noqa: F401  (fixture, for test_fault_bridge.py)
from ..ordinary_user import User, ordinary_user

#: How long a client may take to do what a test asks of it: never reached
#: unless something hangs (then the test fails instead of wedging CI).
CLIENT_TIMEOUT_S = 30.0


class HardUsers(msgspec.Struct, frozen=True):
    group: str
    gid: int
    member: User
    stranger: User


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="tfuse-hard-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def hard_users() -> Iterator[HardUsers]:
    """A group ``tfuse-hard-<pid>``, a user in it (``member``) and one not (``stranger``).

    Named after this session's pid: suites in other worktrees may run at the
    same time.
    """
    group = f"tfuse-hard-{os.getpid()}"
    subprocess.run(["groupadd", group], check=True)
    try:
        with ordinary_user("hard", group=group) as member, ordinary_user("hard") as stranger:
            yield HardUsers(group=group, gid=grp.getgrnam(group).gr_gid, member=member,
                            stranger=stranger)
    finally:
        subprocess.run(["groupdel", group], capture_output=True)


def _home(scratch: Path) -> Path:
    """A fresh world-traversable directory for one mount and its log."""
    home = Path(tempfile.mkdtemp(dir=scratch))
    home.chmod(0o755)
    return home


@pytest.fixture
def open_mount(scratch: Path) -> Iterator[Mount]:
    """A mount (root's defaults) in a world-traversable directory."""
    home = _home(scratch)
    mount = start_mount(home / "tracing", home / "daemon.log")
    try:
        yield mount
    finally:
        stop_mount(mount)


@pytest.fixture
def gid_mount(scratch: Path, hard_users: HardUsers) -> Iterator[Mount]:
    """A mount with tracefs' ``gid=`` (our ``--gid``) of the suite's group, ``mode=750``."""
    home = _home(scratch)
    mount = start_mount(home / "tracing", home / "daemon.log",
                        "--gid", str(hard_users.gid), "--mode", "750")
    try:
        yield mount
    finally:
        stop_mount(mount)


@pytest.fixture
def killable_mount(scratch: Path) -> Iterator[Mount]:
    """A mount whose daemon the test may kill: torn down with a lazy unmount,
    without the clean-exit checks."""
    home = _home(scratch)
    mount = start_mount(home / "tracing", home / "daemon.log")
    try:
        yield mount
    finally:
        if mount.proc.poll() is None:
            kill_daemon(mount)
        subprocess.run(["fusermount3", "-u", "-z", str(mount.path)], capture_output=True)


@pytest.fixture
def kernel_instance(real_tracefs_root: Path) -> Iterator[Path]:
    """A private instance of this machine's tracefs, removed afterwards."""
    path = real_tracefs_root / "instances" / f"tfuse-hard-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        path.rmdir()


@pytest.fixture(scope="session")
def client_as(c_client: Callable[[str], Path], scratch: Path) -> Callable[[str], Path]:
    """``tests/clients/<name>.c`` built, at a path every user may execute."""
    bindir = scratch / "bin"
    bindir.mkdir(mode=0o755, exist_ok=True)
    bindir.chmod(0o755)

    def build(name: str) -> Path:
        exe = bindir / name
        if not exe.exists():
            shutil.copy(c_client(name), exe)
            exe.chmod(0o755)
        return exe

    return build


def _identity(user: User | None) -> dict[str, object]:
    if user is None:
        return {}
    return {"user": user.uid, "group": user.gid, "extra_groups": list(user.groups)}


def run_as(user: User | None, *argv: object, stdin: str | None = None,
           timeout: float = CLIENT_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run a command as ``user`` (None: root) to completion, bounded in time."""
    return subprocess.run([str(a) for a in argv], **_identity(user), input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def spawn_as(user: User | None, *argv: object) -> subprocess.Popen[str]:
    """Start a command as ``user`` (None: root), stdin/stdout as pipes, text mode."""
    return subprocess.Popen([str(a) for a in argv], **_identity(user),  # type: ignore[call-overload]
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def expect_line(proc: subprocess.Popen[str], wanted: str, *, prefix: bool = False) -> list[str]:
    """Read ``proc``'s output up to the line ``wanted`` (with ``prefix``: a
    line that starts with it); all lines read.

    Raises:
        AssertionError: the output ended first (the process died).
    """
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line.rstrip("\n"))
        if seen[-1] == wanted or prefix and seen[-1].startswith(wanted):
            return seen
    raise AssertionError(f"no {wanted!r} line; got {seen}, stderr {proc.stderr and proc.stderr.read()}")


def wait_in_request(pid: int, timeout: float = CLIENT_TIMEOUT_S) -> None:
    """Until some thread of ``pid`` waits for a FUSE reply (``request_wait_answer``).

    There is no event to wait for: /proc is polled, briefly and bounded.

    Raises:
        AssertionError: not within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            raise AssertionError(f"{pid} exited before blocking in a request") from None
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                    wchan = f.read()
                if wchan == "request_wait_answer" or wchan.startswith("fuse_"):
                    return
            except OSError:
                pass
        time.sleep(0.002)
    raise AssertionError(f"{pid} never blocked in a FUSE request")


def kill_daemon(mount: Mount) -> None:
    """SIGKILL the daemon and reap it. The mount stays, dead (ENOTCONN), until
    unmounted (``killable_mount`` does that)."""
    mount.proc.send_signal(signal.SIGKILL)
    mount.proc.wait(timeout=CLIENT_TIMEOUT_S)


def fuzz_budget() -> range:
    """The seeds a fuzzer runs: ``TFUSE_FUZZ_SCALE`` of them from ``TFUSE_FUZZ_SEED``."""
    scale = int(os.environ.get("TFUSE_FUZZ_SCALE", "1"))
    first = int(os.environ.get("TFUSE_FUZZ_SEED", "1"))
    return range(first, first + scale)


def fuzz_settings(examples: int, **extra: object) -> settings:
    """Hypothesis settings for a fuzzer: ``examples`` per seed of the budget;
    the same inputs every run unless a budget was asked for (CI stays
    deterministic, ``make fuzz`` explores)."""
    asked = "TFUSE_FUZZ_SCALE" in os.environ or "TFUSE_FUZZ_SEED" in os.environ
    return settings(max_examples=examples * len(fuzz_budget()), deadline=None, database=None,
                    derandomize=not asked, suppress_health_check=list(HealthCheck),
                    **extra)  # type: ignore[arg-type]


def fuzz_report(name: str, **figures: object) -> None:
    """Append one fuzzer's figures to ``$TFUSE_FUZZ_REPORT`` (if set)."""
    path = os.environ.get("TFUSE_FUZZ_REPORT")
    if path:
        with open(path, "ab") as f:
            f.write(msgspec.json.encode({"fuzzer": name, **figures}) + b"\n")


def assert_serves(mount: Mount) -> None:
    """Another client still gets answers: a read, a write, and the write's effect.

    Done from a child process with a time limit, so a wedged daemon fails
    the test instead of hanging it.
    """
    marker = f"still-serving-{time.monotonic_ns()}"
    script = (f"import os\n"
              f"fd = os.open({str(mount / 'trace_marker')!r}, os.O_WRONLY)\n"
              f"os.write(fd, b{marker!r})\n"
              f"print(open({str(mount / 'tracing_on')!r}).read().strip())\n"
              f"print({marker!r} in open({str(mount / 'trace')!r}, errors='replace').read())\n")
    result = run_as(None, "python3", "-c", script, timeout=CLIENT_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True"], result.stdout
