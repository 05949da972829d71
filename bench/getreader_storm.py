"""``python -m bench.getreader_storm``: GET_READER with 64,000 mappings, none of ours (issue 19, item 3).

``bench/getreader_storm.c`` makes 64,000 anonymous vmas, opens
``trace_pipe_raw`` without mapping it and calls
``TRACE_MMAP_IOCTL_GET_READER`` (ENODEV: nothing is mapped), on our mount
and on a private instance of this machine's tracefs in the same run.
Printed: one thread's time per call, and a bystander's longest
open+read+close of ``tracing_on`` alone and while THREADS threads loop the
call. The ratios to the kernel are the figures that count.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ._servers import OURS, Binaries, kernel_instance, mounted

CLIENT = Path(__file__).parent / "getreader_storm.c"


def fields(line: str) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in line.split()[1:])}


def per_call(client: Path, tracefs: Path, mappings: int, seconds: int) -> int:
    """ns per GET_READER of one thread."""
    out = subprocess.run([str(client), "storm", str(tracefs), str(mappings), "1", str(seconds)],
                         check=True, capture_output=True, text=True).stdout
    return fields(out.splitlines()[-1])["ns_per_call"]


def bystander(client: Path, tracefs: Path, mappings: int, threads: int, seconds: int) -> int:
    """The longest ``tracing_on`` read, in ns, while ``threads`` loop GET_READER (0: none)."""
    storm = None
    if threads:
        storm = subprocess.Popen([str(client), "storm", str(tracefs), str(mappings),
                                  str(threads), str(seconds + 1)],
                                 stdout=subprocess.PIPE, text=True)
        assert storm.stdout is not None
        assert storm.stdout.readline() == "storm: running\n"
    out = subprocess.run([str(client), "bystander", str(tracefs), str(seconds)],
                         check=True, capture_output=True, text=True).stdout
    if storm is not None:
        storm.communicate()
        assert storm.returncode == 0, "a GET_READER did not answer ENODEV"
    return fields(out)["max_ns"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.getreader_storm", description=__doc__)
    parser.add_argument("--mappings", type=int, default=64_000)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m bench.getreader_storm: must run as root", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-storm-") as tmp:
        work = Path(tmp)
        client = work / "getreader_storm"
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o",
                        str(client), str(CLIENT)], check=True)
        with kernel_instance() as kernel, mounted(OURS, work / "ours", Binaries(work)) as ours:
            print(f"{'':>34} {'kernel':>10} {'ours':>12} {'ratio':>7}")
            for _ in range(args.repeats):
                k = per_call(client, kernel, args.mappings, args.seconds)
                o = per_call(client, ours.mountpoint, args.mappings, args.seconds)
                print(f"{'ns per GET_READER, one thread':>34} {k:>10} {o:>12} {o / k:>7.1f}")
            for threads in (0, args.threads):
                for _ in range(args.repeats):
                    k = bystander(client, kernel, args.mappings, threads, args.seconds)
                    o = bystander(client, ours.mountpoint, args.mappings, threads, args.seconds)
                    label = f"bystander max ns, {threads} threads"
                    print(f"{label:>34} {k:>10} {o:>12} {o / k:>7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
