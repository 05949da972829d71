"""Benchmark 10: perf consumers of our events, inside ``tracefs-fuse run`` (issue 20).

* Writes: one process registers an event and writes it for a while with, in
  turn, one ftrace consumer (its ``enable`` file), one perf consumer (the
  tracepoint of the writing thread, its ring mapped read-only: both
  consumers overwrite, nobody reads) and both at once; the three back to back
  in one ``run`` per repetition, in an order that rotates. Rows are the time
  per write, and perf ÷ ftrace (issue 20's goal: ≤ 1.5×).
* ``perf_event_open`` + ``close`` latency under ``run``: of our tracepoint
  (the supervisor answers it with a file of ours), and of a kernel software
  counter (continued to the kernel), against that counter without ``run``.
* What the seccomp filter costs a program's own perf use: ioctls on a real
  task-clock counter under ``run`` (every ``'$'`` ioctl stops in the
  supervisor, which finds the fd is not ours and continues it) and without
  it; an ioctl of another type and a ``read()``, which the filter lets
  through at once, as controls.

Each ``run`` and each client outside it is one process; a repetition measures
every target once, inside and outside alternating first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ._results import Recorder
from ._servers import BENCH_DIR, CLIENT_TIMEOUT_S

TRACEFS = "/sys/kernel/tracing"
CONSUMERS = ("ftrace", "perf", "both")
OPENS = 500
IOCTLS = 20_000

WRITES = "10. Perf consumers: one enabled write under run, by consumer"
OPEN = "10. perf_event_open + close latency, median"
FILTER = ("10. The seccomp filter's cost to a program's own perf use: a real task-clock "
          "counter, median")
RUN_COLUMN, BARE_COLUMN = "under run", "without run"
IOCTL_ROWS = {
    "enable_ns": "PERF_EVENT_IOC_ENABLE + DISABLE",
    "id_ns": "PERF_EVENT_IOC_ID",
    "other_ns": "control: FIONREAD on a pipe (not '$': let through)",
    "read_ns": "control: read() of the counter (not filtered)",
}


def _client(workdir: Path) -> Path:
    exe = workdir / "perf_client"
    if not exe.exists():
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                        str(BENCH_DIR / "perf_client.c")], check=True)
    return exe


def _values(argv: list[str]) -> dict[str, float]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    if out.returncode:
        raise RuntimeError(f"{argv} failed ({out.returncode}): {out.stderr}")
    return {key: float(value) for key, _, value in
            (line.partition("=") for line in out.stdout.split()) if value}


def perf_consumers(workdir: Path, rec: Recorder, repeats: int, seconds: float) -> None:
    client = str(_client(workdir))
    run = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
    for rep in range(repeats):
        order = CONSUMERS[rep % 3:] + CONSUMERS[:rep % 3]
        rates = _values([*run, client, "writes", TRACEFS, str(seconds), ",".join(order)])
        for consumer in CONSUMERS:
            rec.add(WRITES, f"{consumer} consumer" if consumer != "both" else "both consumers",
                    "1 writer", "µs", 1e6 / rates[f"rate_{consumer}"])
        inside_first = rep % 2 == 0
        for inside in (inside_first, not inside_first):
            if inside:
                opens = _values([*run, client, "opens", TRACEFS, str(OPENS)])
                rec.add(OPEN, "our tracepoint", RUN_COLUMN, "µs", opens["ours_ns"] / 1e3)
                rec.add(OPEN, "a kernel software counter", RUN_COLUMN, "µs",
                        opens["kernel_ns"] / 1e3)
                ioctls = _values([*run, client, "ioctls", str(IOCTLS)])
            else:
                opens = _values([client, "opens", "-", str(OPENS)])
                rec.add(OPEN, "a kernel software counter", BARE_COLUMN, "µs",
                        opens["kernel_ns"] / 1e3)
                ioctls = _values([client, "ioctls", str(IOCTLS)])
            for key, row in IOCTL_ROWS.items():
                rec.add(FILTER, row, RUN_COLUMN if inside else BARE_COLUMN, "µs",
                        ioctls[key] / 1e3)
    one = "1 writer"
    rec.add_ratio(WRITES, "perf ÷ ftrace (goal ≤ 1.5×)", one, ("perf consumer", one),
                  ("ftrace consumer", one))
    rec.add_ratio(WRITES, "both ÷ ftrace", one, ("both consumers", one),
                  ("ftrace consumer", one))
    ratio = "under run ÷ without"
    rec.add_ratio(OPEN, "our tracepoint", ratio, ("our tracepoint", RUN_COLUMN),
                  ("a kernel software counter", BARE_COLUMN))
    rec.add_ratio(OPEN, "a kernel software counter", ratio,
                  ("a kernel software counter", RUN_COLUMN),
                  ("a kernel software counter", BARE_COLUMN))
    for row in IOCTL_ROWS.values():
        rec.add_ratio(FILTER, row, ratio, (row, RUN_COLUMN), (row, BARE_COLUMN))
