"""Tests that share the fixture's run server see nothing of each other (issue 21 item 1).

A pytest session of the fixture's users (``INNER``) runs, in each test: a check
that its tracefs is fresh, a command that leaves state behind (a registered,
enabled event with its bit in memory, a ``dynamic_events`` line, ``tracing_on``
0, ``buffer_size_kb`` 7, a mapped ``trace_pipe_raw``) and holds it, the same
fresh check *while* that command holds it, then stops it. Every test of a
worker must get its runs from one server, the same for all of them; as root,
as an ordinary user, and under pytest-xdist.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from ..ordinary_user import User

pytestmark = pytest.mark.uses_fuse

INNER = textwrap.dedent('''
    import os
    import select
    import pytest
    from tracefs_fuse.testing._forks import ServedProcess

    CLIENT = os.path.join(os.path.dirname(__file__), "iso_state")
    TRACING = "/sys/kernel/tracing"
    # Nothing enabled by the fixture: what is enabled, the test enables.
    EVENTS = ["ftrace:print"]
    FRESH = "checks 7\\n"


    def fresh(user_events):
        run = user_events.run([CLIENT, "fresh", TRACING], events=EVENTS)
        assert run.stdout == FRESH, run.stdout + run.stderr


    @pytest.mark.parametrize("round", range(int(os.environ["ROUNDS"])))
    def test_round(user_events, user_events_server, tmp_path, round):
        with open(os.environ["SERVERS"], "a") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} "
                    f"{user_events_server.process.pid}\\n")
        fresh(user_events)
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        left = user_events.start([CLIENT, "leave", TRACING, str(fifo)], events=EVENTS)
        assert isinstance(left.process, ServedProcess)
        ready, _, _ = select.select([reader, left.process.pidfd], [], [], 60)
        assert reader in ready, left.stop()
        assert os.read(reader, 16) == b"left\\n"
        fresh(user_events)  # beside a run that holds all of it
        done = left.stop()
        assert done.stdout == "checks 7\\n", done.stdout + done.stderr
''')


def _session(home: Path, c_client, rounds: int, owner: User | None) -> Path:  # type: ignore[no-untyped-def]
    shutil.copy(c_client("iso_state"), home / "iso_state")
    (home / "test_inner.py").write_text(INNER)
    servers = home / "servers"
    servers.write_text("")
    if owner is not None:
        for path in (home, home / "iso_state", home / "test_inner.py", servers):
            os.chown(path, owner.uid, owner.gid)
    return servers


def _check(result: subprocess.CompletedProcess[str], servers: Path, rounds: int,
           workers: int) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{rounds} passed" in result.stdout, result.stdout
    seen: dict[str, set[str]] = {}
    for line in servers.read_text().splitlines():
        worker, pid = line.split()
        seen.setdefault(worker, set()).add(pid)
    assert sum(1 for _ in servers.read_text().splitlines()) == rounds
    # One server per worker, each serving every test of its worker.
    assert all(len(pids) == 1 for pids in seen.values()), seen
    assert len(seen) == workers and len(set().union(*seen.values())) == workers, seen


def _pytest_args(home: Path, xdist: bool) -> list[str]:
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(home / "t"),
            *(["-p", "xdist", "-n", "2"] if xdist else []), "test_inner.py"]


@pytest.mark.parametrize("xdist", [False, True], ids=["one-worker", "xdist"])
def test_tests_sharing_a_server_are_isolated_as_root(xdist: bool, c_client,  # type: ignore[no-untyped-def]
                                                     tmp_path: Path) -> None:
    rounds = 4
    servers = _session(tmp_path, c_client, rounds, None)
    result = subprocess.run([sys.executable, *_pytest_args(tmp_path, xdist)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "ROUNDS": str(rounds), "SERVERS": str(servers)})
    _check(result, servers, rounds, 2 if xdist else 1)


@pytest.mark.parametrize("xdist", [False, True], ids=["one-worker", "xdist"])
def test_tests_sharing_a_server_are_isolated_as_an_ordinary_user(
        xdist: bool, c_client, ordinary_user: User) -> None:  # type: ignore[no-untyped-def]
    rounds = 4
    home = Path(tempfile.mkdtemp(prefix="tfuse-shared-"))
    try:
        home.chmod(0o755)
        servers = _session(home, c_client, rounds, ordinary_user)
        python = shlex.join(ordinary_user.tracefs_fuse()[:-2])
        result = ordinary_user.run(
            ["sh", "-c", f"cd {shlex.quote(str(home))} && ROUNDS={rounds} "
                         f"SERVERS={shlex.quote(str(servers))} exec {python} "
                         + shlex.join(_pytest_args(home, xdist))], timeout=300)
        _check(result, servers, rounds, 2 if xdist else 1)
    finally:
        shutil.rmtree(home)
