"""The kernel's own user_events selftests, on the real kernel and on our mount.

Each selftest of ``tools/testing/selftests/user_events`` (built statically
from the same Debian source package as the oracle kernel) runs once on that
kernel, in a fresh VM, and once per mount mode inside ``tracefs-fuse run``
(which provides ``/sys/kernel/tracing`` and 6.1's ``/sys/kernel/debug/
tracing``): ``--abi auto`` and the kernel's own era pinned. Every test case
must end as it does on the kernel, except the known differences below, each
with its reason and each pinned on both sides. The pass counts are printed
at the end of the session (docs/oracle.md keeps the latest).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import SELFTEST_RESULTS, Kernel

pytestmark = [pytest.mark.oracle, pytest.mark.uses_fuse, pytest.mark.timeout(900)]

SELFTESTS = {"6.12": ("ftrace_test", "dyn_test", "abi_test", "perf_test"),
             "6.1": ("ftrace_test", "dyn_test", "perf_test")}
MODES = {"6.12": ("auto", "mainline"), "6.1": ("auto", "6.1")}
#: Longer than any selftest takes here; a run that outlives it never finished
#: (6.1's dyn_test under ``auto`` before the name-only delete rule).
RUN_TIMEOUT_S = 240

RCU_DEFERRED_PUT = (
    "6.12.97's stable fix 'tracing/user_events: Fix use-after-free in user_event_mm_dup()' "
    "drops an enabler's reference after an RCU grace period, so DIAG_IOCSDEL right after "
    "DIAG_IOCSUNREG says EBUSY; we release at once, the kernel's intended semantics "
    "(docs/emulation.md)")
STRUCT_SIZE_MATCH = ("6.1 matches a struct field with its size, so '!u:__test_event struct "
                     "custom a' does not delete 'struct custom a 20' (ENOENT): a 6.1 bug we keep")
DISABLED_WRITE = ("a write to an event nobody enabled fails with EBADF, on the kernel and here; "
                  "the test expects it to succeed")


@dataclass(frozen=True)
class Known:
    """A case that ends differently from what the kernel's test expects, on purpose."""

    kernel: str | None  # "pass"/"fail" on the kernel; None: either (timing-dependent there)
    ours: str
    why: str


KNOWN: dict[tuple[str, str, str], Known] = {
    ("6.12", "dyn_test", "basic_types"): Known("fail", "pass", RCU_DEFERRED_PUT),
    ("6.12", "dyn_test", "loc_types"): Known("fail", "pass", RCU_DEFERRED_PUT),
    ("6.12", "dyn_test", "size_types"): Known(None, "pass", RCU_DEFERRED_PUT),
    ("6.12", "dyn_test", "matching"): Known(None, "pass", RCU_DEFERRED_PUT),
    ("6.12", "abi_test", "flags"): Known("fail", "pass", RCU_DEFERRED_PUT),
    ("6.12", "perf_test", "perf_empty_events"): Known(None, "pass", RCU_DEFERRED_PUT),
    ("6.1", "ftrace_test", "write_fault"): Known("fail", "fail", DISABLED_WRITE),
    ("6.1", "dyn_test", "matching"): Known("fail", "fail", STRUCT_SIZE_MATCH),
}

#: kselftest_harness.h's TAP lines: "ok 3 user.size_types", "not ok 1 user.x",
#: "ok 2 user.y # SKIP reason".
TAP = re.compile(r"^(not )?ok \d+ [^.\s]+\.(\S+)(?: # (SKIP)\b.*)?$")


@dataclass(frozen=True)
class Outcome:
    cases: dict[str, str]  # case -> "pass" | "fail" | "skip"
    finished: bool
    output: str

    @property
    def passed(self) -> int:
        return sum(result == "pass" for result in self.cases.values())


def parse(output: str, finished: bool) -> Outcome:
    cases = {}
    for line in output.splitlines():
        if m := TAP.match(line):
            cases[m[2]] = "skip" if m[3] else "fail" if m[1] else "pass"
    return Outcome(cases, finished, output)


def planned(output: str) -> int:
    m = re.search(r"^1\.\.(\d+)$", output, re.M)
    return int(m[1]) if m else 0


@pytest.fixture(scope="session")
def on_kernel(kernels: Callable[[str], Kernel]) -> Callable[[str, str], Outcome]:
    """Each selftest's outcome on its kernel (one fresh VM each, once per session)."""
    seen: dict[tuple[str, str], Outcome] = {}

    def outcome(kernel: str, test: str) -> Outcome:
        if (kernel, test) not in seen:
            oracle = kernels(kernel)
            status, output = oracle.status_and_output([oracle.selftests / test], f"./{test}")
            seen[kernel, test] = parse(output, finished=status is not None)
        return seen[kernel, test]

    return outcome


def on_ours(binary: Path, mode: str) -> Outcome:
    argv = [sys.executable, "-m", "tracefs_fuse", "run", "--abi", mode, "--", str(binary)]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                errors="surrogateescape")
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="surrogateescape") if isinstance(exc.stdout, bytes) \
            else exc.stdout or ""
        return parse(out, finished=False)
    return parse(result.stdout + result.stderr, finished=True)


CASES = [(kernel, test, mode) for kernel, tests in SELFTESTS.items()
         for test in tests for mode in MODES[kernel]]


@pytest.mark.parametrize(("kernel", "test", "mode"), CASES,
                         ids=[f"{k}-{t}-{m}" for k, t, m in CASES])
def test_selftest_ends_as_on_the_kernel(kernel: str, test: str, mode: str,
                                        on_kernel: Callable[[str, str], Outcome],
                                        kernels: Callable[[str], Kernel],
                                        request: pytest.FixtureRequest) -> None:
    oracle = kernels(kernel)
    theirs = on_kernel(kernel, test)
    ours = on_ours(oracle.selftests / test, mode)
    request.config.stash.setdefault(SELFTEST_RESULTS, {})[kernel, test, mode] = (theirs, ours)

    assert ours.finished, f"{test} did not finish in {RUN_TIMEOUT_S}s:\n{ours.output}"
    assert theirs.cases and len(theirs.cases) == planned(theirs.output), theirs.output
    assert set(ours.cases) == set(theirs.cases), ours.output
    assert "skip" not in ours.cases.values(), ours.output
    for case, result in theirs.cases.items():
        known = KNOWN.get((kernel, test, case))
        if known is None:
            assert ours.cases[case] == result, f"{case}: kernel {result}\n{ours.output}"
            continue
        if known.kernel is not None:
            assert result == known.kernel, (
                f"{case} now {result}s on Linux {oracle.version}: update KNOWN ({known.why})")
        assert ours.cases[case] == known.ours, f"{case} ({known.why}):\n{ours.output}"

