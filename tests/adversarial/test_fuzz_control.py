"""Fuzzing control files through a mount, against this machine's own tracefs.

Random writes go to the same file of our mount and of a private instance of
the real tracefs; each must get the same answer (a count or an errno), and
the files read back the same afterwards. Files whose real counterpart would
load the host (``buffer_size_kb``: memory; ``set_event``/``events/enable``:
every kernel event) or that only a top-level tracefs has are written on our
side only, where any answer but EIO (our daemon's "bug" errno) and any
logged error is a finding.

Budget: ``TFUSE_FUZZ_SCALE`` × EXAMPLES hypothesis examples (see conftest).
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ..integration.conftest import Mount
from .conftest import fuzz_budget, fuzz_report, fuzz_settings

pytestmark = pytest.mark.uses_fuse

EXAMPLES = 150

#: In both our mount and a tracefs instance, and safe to write at random there.
SHARED = ["tracing_on", "buffer_percent", "trace_clock", "tracing_cpumask", "current_tracer",
          "trace", "trace_marker", "trace_marker_raw", "error_log", "trace_options",
          "options/overwrite", "options/record-tgid", "options/markers", "options/raw",
          "options/hex", "options/bin", "options/event-fork", "options/irq-info",
          "options/latency-format", "options/sym-offset", "per_cpu/cpu0/trace"]
#: Read back after they were written (the rest change what they read like
#: on purpose: markers, buffers, logs).
COMPARED = ["tracing_on", "buffer_percent", "trace_clock", "tracing_cpumask", "current_tracer",
            "options/overwrite", "options/record-tgid", "options/markers", "options/raw",
            "options/hex", "options/bin", "options/event-fork", "options/irq-info",
            "options/latency-format", "options/sym-offset"]
#: Ours only.
OURS_ONLY = ["buffer_size_kb", "buffer_subbuf_size_kb", "set_event", "events/enable",
             "dynamic_events", "synthetic_events", "kprobe_events", "saved_cmdlines_size",
             "user_events_data", "events/ftrace/print/enable", "events/ftrace/print/filter",
             "events/ftrace/print/trigger", "options/record-cmd", "options/printk-msg-only"]

TEXTS = st.one_of(
    st.binary(max_size=48),
    st.sampled_from([b"0", b"1", b"0\n", b"1\n", b" 1 ", b"-1", b"2", b"100", b"101", b"0x10",
                     b"99999999999999999999", b"nop", b"nop\n", b"local", b"[local]", b"global",
                     b"mono\n", b"x86-tsc", b"ff", b"3", b"0,1", b"\x00", b"1\x00junk", b"\n",
                     b"overwrite", b"nooverwrite", b"raw", b"noraw", b"", b"  ", b"\t1\t",
                     b"u:fz u32 a", b"s:fz u64 b", b"-:fz", b"fz:fz", b"*:*"]))


def attempt(path: Path, data: bytes) -> str:
    """One write() on a fresh descriptor: the count, or the errno's name."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        return f"open {errno.errorcode[exc.errno or 0]}"
    try:
        return str(os.write(fd, data))
    except OSError as exc:
        return errno.errorcode[exc.errno or 0]
    finally:
        os.close(fd)


def contents(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_fuzz_control_files_against_the_kernel(open_mount: Mount, kernel_instance: Path) -> None:
    differences: list[tuple[str, bytes, str, str]] = []
    tried = 0

    @fuzz_settings(EXAMPLES)
    @given(st.lists(st.tuples(st.sampled_from(SHARED), TEXTS), min_size=1, max_size=4))
    def writes(batch: list[tuple[str, bytes]]) -> None:
        nonlocal tried
        for name, data in batch:
            tried += 1
            kernel, ours = attempt(kernel_instance / name, data), attempt(open_mount / name, data)
            if not data and ours == "0":
                continue  # FUSE answers an empty write itself (docs/emulation.md)
            if kernel != ours:
                differences.append((name, data, kernel, ours))
        for name in sorted({name for name, _ in batch} & set(COMPARED)):
            if contents(kernel_instance / name) != contents(open_mount / name):
                differences.append((name, b"<read back>", contents(kernel_instance / name).decode(),
                                    contents(open_mount / name).decode()))
                # Resynchronise, so that one difference is reported once.
                attempt(open_mount / name, contents(kernel_instance / name))

    started = time.monotonic()
    # tracing_cpumask is among the files written: a trace_marker write is refused
    # (EBADF) on a CPU outside it, on the kernel's CPU at the syscall and on the
    # CPU our daemon reads for the writer. Both must be the same CPU, so the
    # writer stays on one (on a busy machine it moved between the two writes).
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})
    try:
        writes()
    finally:
        os.sched_setaffinity(0, affinity)
    fuzz_report("mount: control files vs the kernel", tried=tried,
                seconds=round(time.monotonic() - started, 1), wrong_errnos=len(differences),
                crashes=0 if open_mount.proc.poll() is None else 1)
    assert not differences, differences[:20]


def test_fuzz_control_files_without_a_counterpart(open_mount: Mount) -> None:
    seen: dict[str, set[str]] = {}

    @fuzz_settings(EXAMPLES)
    @given(st.sampled_from(OURS_ONLY), TEXTS)
    def write(name: str, data: bytes) -> None:
        if name == "events/enable" and data.strip().startswith(b"1"):
            data = b"0"  # enabling everything is legal and slow: keep the budget for the rest
        answer = attempt(open_mount / name, data)
        seen.setdefault(name, set()).add(answer)
        assert answer not in ("EIO", "open EIO"), (name, data)

    started = time.monotonic()
    write()
    fuzz_report("mount: control files (ours only)",
                tried=EXAMPLES * len(fuzz_budget()), seconds=round(time.monotonic() - started, 1),
                answers={name: sorted(answers) for name, answers in sorted(seen.items())})
    assert open_mount.proc.poll() is None
