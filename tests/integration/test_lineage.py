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
#: The checks each ``ue_lineage`` scenario makes (each prints "ok <check>"; a wrong result
#: prints "FAIL" and exits 1): registration's three, then the scenario's own.
LINEAGE_CHECKS = {"fork": 3 + 9, "orphan": 3 + 6, "before": 3 + 5, "exec": 3 + 7,
                  "vfork": 3 + 8, "refs": 3 + 6, "execdrop": 3 + 3}
SCENARIOS = list(LINEAGE_CHECKS)

#: The checks of each ``ue_procs`` case, in the order a run prints them (``fork``: parent and
#: child interleave).
PROCS_CHECKS = {
    "thread": ["thread: bit set by enable", "thread: bit cleared by disable"],
    "fork": ["parent: enabled seen", "child: enabled seen", "child: disabled seen",
             "parent: disabled seen", "parent: child exited 0"],
    "many": ["many: 30 children registered and exited", "many: the parent's word untouched"],
}


def run_client(*argv: str | Path) -> str:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def checks(out: str) -> list[str]:
    """The checks a client printed as passed; any other line but a measurement is wrong."""
    lines = [line for line in out.splitlines() if not line.startswith("execdrop_ms=")]
    assert all(line.startswith("ok ") for line in lines), out
    return [line[3:] for line in lines]


@pytest.fixture(params=SOURCES)
def mount_options(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return ("--process-source", request.param)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lineage(tracefs: Mount, c_client: Callable[[str], Path], scenario: str) -> None:
    out = run_client(c_client("ue_lineage"), tracefs, scenario)
    assert len(checks(out)) == LINEAGE_CHECKS[scenario], out


@pytest.mark.parametrize("case", [["fork"], ["thread"], ["many", "30"]])
def test_procs(tracefs: Mount, c_client: Callable[[str], Path], case: list[str]) -> None:
    """``many``: siblings of one untracked parent share its image; one that
    registered and exited hands nothing to the next."""
    out = run_client(c_client("ue_procs"), tracefs, *case)
    assert sorted(checks(out)) == sorted(PROCS_CHECKS[case[0]])


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
    assert len(checks(result.stdout)) == LINEAGE_CHECKS[scenario], result.stdout
    assert "following forks through /proc" in result.stderr
