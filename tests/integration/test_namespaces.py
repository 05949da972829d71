"""The C clients where containers and CI jobs put them: new pid, network and user namespaces.

Each case starts ``tracefs-fuse run -- sh -c SCRIPT`` under ``unshare`` the way a container
runtime sets up its namespaces, and SCRIPT runs every client of tests/client_suite.py; every line
each client prints is checked. The cases:

* ``pid``, ``net``: root in a new pid namespace (``--pid --fork --mount-proc``), or in a new
  network namespace: the process connector serves neither.
* ``user``: an ordinary user (created for the test) runs ``tracefs-fuse run`` itself: the rootless
  run, its own user and mount namespaces.
* ``user+pid``, ``user+net``: the same user as root of a new user namespace
  (``--map-root-user``) with a new pid or network namespace: what rootless podman gives.

All cases run at once, each in one daemon (a case is about a second of Python start-up); the
slow-container variant of the same checks is ``make container-test`` (tests/containers).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest


from .. import client_suite
from ..ordinary_user import ordinary_user

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]


@dataclass(frozen=True)
class Case:
    unshare: tuple[str, ...]
    as_user: bool


CASES = {
    "pid": Case(("unshare", "--pid", "--fork", "--mount-proc"), as_user=False),
    "net": Case(("unshare", "--net"), as_user=False),
    "user": Case((), as_user=True),
    "user+pid": Case(("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"),
                     as_user=True),
    "user+net": Case(("unshare", "--user", "--map-root-user", "--net"), as_user=True),
}


@dataclass(frozen=True)
class Outcome:
    printed: dict[str, client_suite.Printed]
    status: int
    log: str


@pytest.fixture(scope="module")
def outcomes(c_client) -> Iterator[dict[str, Outcome]]:  # type: ignore[no-untyped-def]
    with ExitStack() as stack:
        scratch = Path(tempfile.mkdtemp(prefix="tracefs-fuse-ns-"))
        stack.callback(shutil.rmtree, scratch)
        scratch.chmod(0o755)  # for the ordinary user; pytest's temp dirs are 0700
        bindir = scratch / "clients"
        bindir.mkdir()
        for name in client_suite.CLIENTS:
            shutil.copy(c_client(name), bindir / name)
        script = client_suite.script(client_suite.CLIENT_SECTIONS, str(bindir))
        command = [*RUN, "sh", "-c", script]
        user = stack.enter_context(ordinary_user("ns"))
        procs = {}
        for name, case in CASES.items():
            argv = [*case.unshare, *command]
            if case.as_user:
                argv = user.argv(argv, fuse_mode=0o666)
            with open(scratch / f"{name}.out", "wb") as out, \
                    open(scratch / f"{name}.err", "wb") as err:
                procs[name] = subprocess.Popen(argv, cwd=scratch, stdin=subprocess.DEVNULL,
                                               stdout=out, stderr=err)
        results = {}
        for name, proc in procs.items():
            try:
                status = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                status = proc.wait()
            results[name] = Outcome(
                client_suite.parse((scratch / f"{name}.out").read_text(errors="replace")),
                status, (scratch / f"{name}.err").read_text(errors="replace"))
        stack.close()  # the device mode, the user and the scratch directory, at once
        yield results


@pytest.mark.parametrize("section", client_suite.CLIENT_SECTIONS, ids=lambda s: s.name)
@pytest.mark.parametrize("case", CASES)
def test_client(outcomes: dict[str, Outcome], case: str,
                section: client_suite.Section) -> None:
    outcome = outcomes[case]
    client_suite.check(section, outcome.printed, outcome.log)


@pytest.mark.parametrize("case", CASES)
def test_run_exits_cleanly(outcomes: dict[str, Outcome], case: str) -> None:
    outcome = outcomes[case]
    assert outcome.status == 0, outcome.log
    assert client_suite.daemon_errors(outcome.log) == []
