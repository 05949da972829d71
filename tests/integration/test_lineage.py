"""Forks, orphans, execs and vforks of registered processes, with each fork source.

The kernel copies a process's enablers into a forked child and drops them at
exec and exit. ``tests/clients/ue_lineage.c`` checks each case from the
processes' side; ``ue_procs.c`` adds threads and many short-lived siblings.
Every case runs with the netlink process connector and with ``/proc``
(``--process-source``), and ``tracefs-fuse run`` runs them in new pid and
network namespaces, where only ``/proc`` is available.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

SOURCES = ["connector", "procfs"]
SCENARIOS = ["fork", "orphan", "before", "exec", "vfork", "refs", "execdrop"]


def run_client(*argv: str | Path) -> str:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    return result.stdout


@pytest.fixture(params=SOURCES)
def mount_options(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return ("--process-source", request.param)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lineage(tracefs: Mount, c_client: Callable[[str], Path], scenario: str) -> None:
    out = run_client(c_client("ue_lineage"), tracefs, scenario)
    assert out.count("ok ") >= (3 if scenario == "execdrop" else 8)


@pytest.mark.parametrize("case", [["fork"], ["thread"], ["many", "30"]])
def test_procs(tracefs: Mount, c_client: Callable[[str], Path], case: list[str]) -> None:
    """``many``: siblings of one untracked parent share its image; one that
    registered and exited hands nothing to the next."""
    run_client(c_client("ue_procs"), tracefs, *case)


@pytest.mark.parametrize("unshare", [["--pid", "--fork", "--mount-proc"], ["--net"]],
                         ids=["pid-namespace", "net-namespace"])
@pytest.mark.parametrize("scenario", ["fork", "orphan", "exec", "refs"])
def test_lineage_in_a_new_namespace(c_client: Callable[[str], Path], unshare: list[str],
                                    scenario: str) -> None:
    """Where containers run: the connector cannot be joined, /proc is used."""
    result = subprocess.run(
        ["unshare", *unshare, sys.executable, "-m", "tracefs_fuse", "run", "--log-level",
         "info", "--log", "-", "--", str(c_client("ue_lineage")), "/sys/kernel/tracing",
         scenario], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    assert "following forks through /proc" in result.stderr
