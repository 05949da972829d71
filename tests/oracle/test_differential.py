"""Our tracefs against real kernels, program by program (``make oracle-test``)."""

from __future__ import annotations

import errno
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ..integration.conftest import Mount, start_mount, stop_mount
from .conftest import Kernel, run_here

pytestmark = [pytest.mark.oracle, pytest.mark.uses_fuse]

TRACING = "/sys/kernel/tracing"


def test_user_events_errnos_match_linux_6_12(oracle_6_12: Kernel, static_client,  # type: ignore[no-untyped-def]
                                             tracefs: Mount) -> None:
    exe = static_client("ue_cases")
    kernel = oracle_6_12.run([exe], f"./ue_cases {TRACING}").splitlines()
    ours = run_here(exe, str(tracefs)).splitlines()
    # FUSE answers a write() of 0 bytes itself, with 0, before the daemon
    # could say EFAULT (tests/integration/test_user_events_mainline.py).
    kernel = ["write 0 bytes: 0" if line == "write 0 bytes: EFAULT" else line for line in kernel]
    assert ours == kernel


def test_user_events_flow_matches_linux_6_12(oracle_6_12: Kernel, static_client,  # type: ignore[no-untyped-def]
                                             tracefs: Mount) -> None:
    exe = static_client("ue_flow")
    assert (run_here(exe, str(tracefs)).splitlines()
            == oracle_6_12.run([exe], f"./ue_flow {TRACING}").splitlines())


def test_forks_and_threads_match_linux_6_12(oracle_6_12: Kernel, static_client,  # type: ignore[no-untyped-def]
                                            tracefs: Mount) -> None:
    exe = static_client("ue_procs")
    kernel = oracle_6_12.run([exe], f"./ue_procs {TRACING} fork").splitlines()
    assert sorted(run_here(exe, str(tracefs), "fork").splitlines()) == sorted(kernel)


def test_thread_registration_is_per_process_here_per_thread_in_linux(  # type: ignore[no-untyped-def]
        oracle_6_12: Kernel, static_client, tracefs: Mount) -> None:
    """A documented divergence (docs/emulation.md).

    The kernel attaches enabler state to the *thread* that registered first
    and drops it when that thread exits, so a bit registered by a joined
    worker thread is never set again. FUSE's process events cannot tell which
    thread created which, so tracefs-fuse keeps enablers per process.
    """
    exe = static_client("ue_procs")
    # ue_procs checks what tracefs-fuse promises, so the kernel fails its first check.
    assert oracle_6_12.status_and_output([exe], f"./ue_procs {TRACING} thread") == (
        1, "FAIL thread: bit set by enable: not as expected\n")
    assert run_here(exe, str(tracefs), "thread").splitlines() == [
        "ok thread: bit set by enable", "ok thread: bit cleared by disable"]


def test_mmap_abi_matches_linux_6_12(oracle_6_12: Kernel, static_client,  # type: ignore[no-untyped-def]
                                     tracefs: Mount) -> None:
    exe = static_client("rb_mmap")
    # A fresh instance has the default buffer size of a new tracefs-fuse mount.
    kernel = oracle_6_12.run(
        [exe], f"mkdir {TRACING}/instances/cmp && ./rb_mmap {TRACING}/instances/cmp 1 10")
    assert run_here(exe, str(tracefs), "1", "10") == kernel


def without_known_divergences(lines: list[str]) -> list[str]:
    """What legacy_status_page prints, minus what FUSE or our design cannot match.

    * ``mmap()`` never reaches a FUSE daemon, so a two-page mapping cannot be
      refused (its second page faults instead).
    * Event ids are whatever each implementation allocated.
    * perf cannot attach to an emulated tracepoint (``perf_event_open`` goes
      to the host kernel, which does not know it: our ids are ones the host
      does not use, so it fails there; the callers pin that).
    """
    out = []
    for line in lines:
        if (line.startswith(("mmap.two_pages=", "flow.perf_open_b="))
                or "_perf=" in line):
            continue
        line = re.sub(r"\\nID: \d+\\n", r"\\nID: N\\n", line).replace(" perf\\n", "\\n")
        out.append(line)
    return out


@pytest.mark.parametrize("mount_options", [("--abi", "6.1")])
def test_status_page_abi_matches_linux_6_1(oracle_6_1: Kernel, static_client,  # type: ignore[no-untyped-def]
                                           tracefs: Mount) -> None:
    exe = static_client("legacy_status_page")
    kernel = oracle_6_1.run([exe], f"./legacy_status_page {TRACING}").splitlines()
    ours = run_here(exe, str(tracefs)).splitlines()
    assert without_known_divergences(ours) == without_known_divergences(kernel)
    # 6.1 prints a fixed array's length from a member user_events never sets: zeroed memory
    # (Oracle.BOOT_PARAMETERS) gives "[]", which we print too; garbage gives any number.
    format_b = next(line for line in kernel if line.startswith("flow.format_b="))  # char[8] s
    assert "\\tfield:char s[];\\t" in format_b, format_b
    assert "flow.perf_open_b=0" in kernel
    assert "flow.perf_open_b=EINVAL" in ours  # the host refuses our id (not one of its own)


def test_status_page_abi_in_auto_mount_matches_linux_6_1(oracle_6_1: Kernel, static_client,  # type: ignore[no-untyped-def]
                                                          tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The 6.1 example flow runs unchanged in a default (auto) mount too.

    Only the bit differs: an auto mount hands 6.1 bits out from the top of
    the page shared with the 5.18 byte slots (docs/emulation.md).
    """
    exe = static_client("legacy_6_1")
    script = "check\nenable 1\ncheck\nwrite\nenable 0\ncheck\nquit\n"
    kernel = oracle_6_1.run([exe], f"printf '{script}' | ./legacy_6_1 {TRACING}")
    mount = start_mount(tmp_path / "t", tmp_path / "log")
    try:
        ours = subprocess.run([str(exe), str(mount)], input=script.replace("\\n", "\n"),
                              capture_output=True, text=True, timeout=60).stdout
    finally:
        stop_mount(mount)
    assert re.sub(r"bit=\d+", "bit=N", ours) == re.sub(r"bit=\d+", "bit=N", kernel)


@pytest.fixture(scope="session")
def tfctl(oracle_6_12: Kernel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file operation per call, errno by name (tests/oracle/synth/tfctl.c)."""
    exe = tmp_path_factory.mktemp("tfctl") / "tfctl"
    subprocess.run(["cc", "-static", "-O2", "-isystem", str(oracle_6_12.oracle.include),
                    str(Path(__file__).parent / "synth" / "tfctl.c"), "-o", str(exe)], check=True)
    return exe


def dynamic_events_answers(kernel: Kernel, tfctl: Path, steps: list[tuple[list[str], str]]
                           ) -> list[object]:
    """Per step: clear dynamic_events, write the setup lines, answer the command."""
    dyn = f"{TRACING}/dynamic_events"
    script = []
    for before, command in steps:
        script.append(f"./tfctl trunc {dyn} >/dev/null")
        script += [f"./tfctl append {dyn} {shlex.quote(line)} >/dev/null" for line in before]
        script.append(f"./tfctl append {dyn} {shlex.quote(command)} || true")
    out = kernel.run([tfctl], "\n".join(script)).splitlines()
    return ["ok" if line.startswith("ok ") else getattr(errno, line.split()[1]) for line in out]


def test_dynamic_events_rows_per_era_are_the_kernels(oracle_6_12: Kernel, oracle_6_1: Kernel,  # type: ignore[no-untyped-def]
                                                     tfctl: Path) -> None:
    """The mainline and 6.1 columns the engine's auto rule is checked against
    (tests/engine/test_dynamic_events.py) are what those kernels answer."""
    from ..engine.test_dynamic_events import DELETE_ROWS

    steps = [(before, command) for before, command, *_ in DELETE_ROWS]
    assert dynamic_events_answers(oracle_6_12, tfctl, steps) == [row[2] for row in DELETE_ROWS]
    assert dynamic_events_answers(oracle_6_1, tfctl, steps) == [row[3] for row in DELETE_ROWS]


def test_6_1_dyn_test_lines_are_linux_6_1s(oracle_6_1: Kernel, tfctl: Path) -> None:
    """The 6.1 dyn_test sequence tests/integration replays on our mounts, on Linux 6.1."""
    from ..integration.test_dynamic_events_eras import DYN_TEST_6_1

    dyn = f"{TRACING}/dynamic_events"
    script = "\n".join(f"./tfctl append {dyn} {shlex.quote(line)} || true"
                       for line, _ in DYN_TEST_6_1)
    out = oracle_6_1.run([tfctl], script).splitlines()
    answers = [0 if line.startswith("ok ") else getattr(errno, line.split()[1]) for line in out]
    assert list(zip([line for line, _ in DYN_TEST_6_1], answers)) == DYN_TEST_6_1
