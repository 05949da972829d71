"""``python -m bench.maps_cost``: what a client's mappings cost each GET_READER (issue 11, item 8).

A client maps ``trace_pipe_raw`` and calls ``TRACE_MMAP_IOCTL_GET_READER`` in
a loop, once with few mappings in its address space and once with 60,000
(``tests/clients/adv_mmap.c``), on our mount and on a private instance of
this machine's tracefs in the same run. Printed per call: the client's
round trip, and for our mount the daemon's CPU time (utime + stime from
``/proc/<pid>/stat``); the ratio to the kernel is the figure that counts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ._servers import OURS, Binaries, kernel_instance, mounted

CLIENT = Path(__file__).parent.parent / "tests" / "clients" / "adv_mmap.c"
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def daemon_cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_NS  # utime, stime


def run(client: Path, tracefs: Path, mappings: int, calls: int) -> int:
    """ns per GET_READER as the client saw it."""
    steps = [f"many={mappings}"] if mappings else []
    out = subprocess.run([str(client), str(tracefs), *steps, "open", "map", "touch",
                          f"readers={calls}"], check=True, capture_output=True, text=True).stdout
    line = out.splitlines()[-1]
    assert " errors=0 " in line, out
    return int(line.rsplit("=", 1)[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.maps_cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m bench.maps_cost: must run as root", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-maps-") as tmp:
        work = Path(tmp)
        client = work / "adv_mmap"
        subprocess.run(["gcc", "-O2", "-D_GNU_SOURCE", "-o", str(client), str(CLIENT)], check=True)
        with kernel_instance() as kernel, mounted(OURS, work / "ours", Binaries(work)) as ours:
            print(f"{'mappings':>9} {'kernel ns':>10} {'ours ns':>10} {'ratio':>7} "
                  f"{'daemon cpu ns':>14}")
            for mappings in (0, 60_000):
                for _ in range(args.repeats):
                    k = run(client, kernel, mappings, args.calls)
                    before = daemon_cpu_ns(ours.proc.pid)
                    o = run(client, ours.mountpoint, mappings, args.calls)
                    cpu = (daemon_cpu_ns(ours.proc.pid) - before) // args.calls
                    print(f"{mappings:>9} {k:>10} {o:>10} {o / k:>7.1f} {cpu:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
