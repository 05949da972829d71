"""Benchmarks of process tracking: forked children, and tearing down many enablers.

* 7. Enable propagation into forked children, a row per fork source: a
  registered process forks N children (they inherit its enabler; the daemon
  has not seen them), then writes "1" to the event's enable file. Every
  child's copy of the bit must be set when the write returns (the count of
  those that were not is recorded like any figure).
* 8. Teardown: three processes hold 100,000 enablers each of one event,
  registered interleaved, and are killed at once; meanwhile another client
  reads ``tracing_on`` in a loop. Recorded: the longest single read while the
  enablers are dropped, and how long dropping them took.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

from ._results import Recorder, count
from ._servers import OURS, Binaries, mounted, run_client

FORK_SOURCES = ("connector", "procfs")
FORK_CHILDREN = (1, 10, 100)
FORK_ROUNDS = 20
HOLDERS = 3
HOLD_ENABLERS = 100_000
#: Bounds on the teardown benchmark's waits.
HOLD_TIMEOUT_S = 600.0
TEARDOWN_TIMEOUT_S = 120.0


def fork_propagation(binaries: Binaries, workdir: Path, rec: Recorder, repeats: int) -> None:
    group = "7. Enable propagation into N forked children, by fork source, unpinned"
    for source in FORK_SOURCES:
        name = f"{OURS} --process-source {source}"
        with mounted(name, workdir / f"forks-{source}", binaries) as server:
            for _ in range(repeats):
                for n in FORK_CHILDREN:
                    column = count(n, "child", "children")
                    out = run_client(binaries, "forks", server.mountpoint, n, FORK_ROUNDS)
                    rec.add(group, f"write(enable) latency, median, {source}", column, "µs",
                            statistics.median(map(int, out["enable_ns"])) / 1e3)
                    rec.add(group, f"children's bits not set when write() returned, {source}",
                            column, "bits", int(out["missed"][0]))


def teardown(binaries: Binaries, workdir: Path, rec: Recorder) -> None:
    group = (f"8. Teardown of {HOLDERS} × {HOLD_ENABLERS:,} enablers of one event "
             "(processes killed at once)")
    with mounted(OURS, workdir / "teardown", binaries) as server:
        mount = server.mountpoint
        holders = [subprocess.Popen([str(binaries.client), "hold", str(mount),
                                     str(HOLD_ENABLERS)], stdout=subprocess.PIPE, text=True)
                   for _ in range(HOLDERS)]
        try:
            for holder in holders:
                assert holder.stdout is not None
                if holder.stdout.readline() != "ready\n":
                    raise RuntimeError("a holder failed to register its enablers")
            probe = subprocess.Popen([str(binaries.client), "probe", str(mount / "tracing_on")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            start = time.monotonic()
            for holder in holders:
                holder.kill()
            for holder in holders:
                holder.wait()
            status = mount / "user_events_status"
            while "bench_hold" in status.read_text():
                if time.monotonic() - start > TEARDOWN_TIMEOUT_S:
                    raise RuntimeError("the enablers were not dropped in time")
                time.sleep(0.01)
            took = time.monotonic() - start
            out, _ = probe.communicate(timeout=HOLD_TIMEOUT_S)
        finally:
            for holder in holders:
                holder.kill()
                holder.wait()
    values = dict(line.split("=", 1) for line in out.split())
    rec.add(group, "longest read of tracing_on meanwhile", "tracefs-fuse", "ms",
            int(values["max_ns"]) / 1e6)
    rec.add(group, "reads of tracing_on meanwhile", "tracefs-fuse", "reads",
            int(values["reads"]))
    rec.add(group, "from the kill to the event's deletion", "tracefs-fuse", "ms", took * 1e3)
