"""Differential tests against a real kernel: the same static program, twice.

``make oracle-test`` runs these. Each test builds a C client statically, runs
it on a real Linux with CONFIG_USER_EVENTS booted in QEMU (``tests/oracle/
kernel``: built from Debian's packages on first use, a few minutes per
kernel; ``make oracle-test`` builds both before pytest starts) and against a
tracefs-fuse mount, and compares what the two printed. They are kept out of
``make test`` (building kernels takes minutes); ``.ci/run`` runs them after it,
with the kernels cached between runs.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .kernel import Oracle, OracleError

CLIENTS = Path(__file__).parents[1] / "clients"
ORACLE_CLIENTS = Path(__file__).parent / "clients"


class Kernel:
    """One oracle kernel as the tests use it: a command's output, or a failure."""

    def __init__(self, version: str) -> None:
        try:
            self.oracle = Oracle(version)
        except OracleError as exc:
            pytest.fail(f"the {version} oracle cannot be built: {exc}", pytrace=False)
        self.version = self.oracle.version
        self.selftests = self.oracle.selftests

    def run(self, files: list[Path], command: str) -> str:
        """``command``'s output; fails the test unless it exits with 0."""
        result = self.oracle.run(files, command)
        assert result.status == 0, f"`{command}` exited with {result.status}:\n{result.output}"
        return result.output

    def status_and_output(self, files: list[Path], command: str) -> tuple[int | None, str]:
        result = self.oracle.run(files, command)
        return result.status, result.output


@pytest.fixture(scope="session")
def kernels() -> Callable[[str], Kernel]:
    """The oracle kernels by version, each made ready when first asked for."""
    ready: dict[str, Kernel] = {}

    def kernel(version: str) -> Kernel:
        if version not in ready:
            ready[version] = Kernel(version)
        return ready[version]

    return kernel


@pytest.fixture(scope="session")
def oracle_6_12(kernels: Callable[[str], Kernel]) -> Kernel:
    return kernels("6.12")


@pytest.fixture(scope="session")
def oracle_6_1(kernels: Callable[[str], Kernel]) -> Kernel:
    return kernels("6.1")


@pytest.fixture(scope="session")
def static_client(tmp_path_factory: pytest.TempPathFactory, oracle_6_12: Kernel):  # type: ignore[no-untyped-def]
    """Compile a client statically (the oracle's initramfs has only busybox)."""
    outdir = tmp_path_factory.mktemp("static")

    def build(name: str) -> Path:
        src = CLIENTS / f"{name}.c"
        if not src.exists():
            src = ORACLE_CLIENTS / f"{name}.c"
        exe = outdir / name
        if not exe.exists():
            subprocess.run(["cc", "-static", "-O1", "-D_GNU_SOURCE", "-isystem",
                            str(oracle_6_12.oracle.include), "-o", str(exe), str(src),
                            "-lpthread"], check=True)
        return exe

    return build


#: (kernel, selftest, mode) -> (outcome on the kernel, outcome here), filled
#: by test_selftests.py and printed at the end of the session.
SELFTEST_RESULTS = pytest.StashKey[dict]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    results = terminalreporter.config.stash.get(SELFTEST_RESULTS, None)
    if not results:
        return
    terminalreporter.section("user_events selftests: cases passed (kernel | tracefs-fuse per mode)")
    for (kernel, test, mode), (theirs, ours) in sorted(results.items()):
        total = len(theirs.cases)
        status = "" if ours.finished else " (did not finish)"
        terminalreporter.write_line(
            f"Linux {kernel:<5} {test:<12} kernel {theirs.passed}/{total}   "
            f"--abi {mode:<9} {ours.passed}/{total}{status}")


def run_here(exe: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, f"{shlex.join([str(exe), *args])}:\n{result.stdout}{result.stderr}"
    return result.stdout


# The mounting fixtures of the integration tests, for the "ours" side.
from ..integration.conftest import mount_options, tracefs  # noqa: E402,F401
