"""``python -m bench`` (``make bench``): run the suite, print its tables, save the results.

Needs root (FUSE mounts with allow_other, a private tracefs instance),
gcc, libfuse3-dev, strace and py-spy (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import msgspec

from ._machine import describe, load_average
from ._perf import perf_consumers
from ._profile import profile_daemon
from ._results import Recorder, Results, render_profile, render_tables
from ._servers import (LIBFUSE_FLOOR, OURS, PYFUSE3_FLOOR, Binaries, kernel_instance,
                       mounted)
from ._suite import WRITERS, Suite
from ._startup import test_loop
from ._tracking import fork_propagation, teardown

#: Each profiled write run; long enough for ~1,000 samples at 200/s.
PROFILE_SECONDS = 5.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5,
                        help="repetitions of every measurement (default 5)")
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="length of each write-throughput run (default 1)")
    parser.add_argument("--output", type=Path, default=None,
                        help="results JSON (default bench/results/<host>-<time>.json)")
    parser.add_argument("--only", type=lambda text: set(text.split(",")), default=None,
                        metavar="N[,N...]",
                        help="run only these benchmarks, by number (default: all)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m bench: must run as root (FUSE mounts, a tracefs instance)",
              file=sys.stderr)
        return 2

    started, start, load_start = datetime.now(), time.monotonic(), load_average()
    output = args.output or (Path(__file__).parent / "results" /
                             f"{socket.gethostname()}-{started:%Y%m%d-%H%M%S}.json")
    recorder = Recorder()
    profiles = []
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        binaries = Binaries(workdir)
        kernel = stack.enter_context(kernel_instance())
        servers = {name: stack.enter_context(mounted(name, workdir / name.replace(" ", "-"),
                                                     binaries))
                   for name in (OURS, PYFUSE3_FLOOR, LIBFUSE_FLOOR)}
        suite = Suite(binaries, workdir, recorder, repeats=args.repeats, seconds=args.seconds,
                      ours=servers[OURS], pyfuse3_floor=servers[PYFUSE3_FLOOR],
                      libfuse_floor=servers[LIBFUSE_FLOOR], kernel=kernel)

        def profile() -> None:
            for writers in (WRITERS[0], WRITERS[-1]):
                profiles.append(profile_daemon(
                    servers[OURS].proc.pid, workdir / f"profile-{writers}.txt",
                    lambda: suite.write_run(OURS, writers, PROFILE_SECONDS)[0],  # noqa: B023  (called at once)
                    writers))

        steps = (("1. write throughput", suite.write_throughput),
                 ("   profile of the daemon during benchmark 1's writes", profile),
                 ("2. disabled event", suite.disabled_event),
                 ("3. enable propagation", suite.enable_propagation),
                 ("4. register", suite.register),
                 ("5. read rates", suite.read_rates),
                 ("6. mount-ready time", suite.mount_ready),
                 ("7. enable propagation into forked children",
                  lambda: fork_propagation(binaries, workdir, recorder, args.repeats)),
                 ("8. teardown of many enablers",
                  lambda: teardown(binaries, workdir, recorder)),
                 ("9. issue 12's goals (from 1 and 4)", suite.goals),
                 ("10. perf consumers under run",
                  lambda: perf_consumers(workdir, recorder, args.repeats, args.seconds)),
                 ("11. the test loop: start-up and the fixture",
                  lambda: test_loop(recorder, args.repeats)))
        number = ""
        for title, step in steps:
            # An indented step (the profile) belongs to the benchmark above it.
            number = title.split(".", 1)[0] if title[0].isdigit() else number
            if args.only is not None and number not in args.only:
                continue
            print(f"[{time.monotonic() - start:5.0f} s] {title}", file=sys.stderr, flush=True)
            step()

    results = Results(machine=describe(load_start, started), repeats=args.repeats,
                      write_seconds=args.seconds, duration_s=time.monotonic() - start,
                      figures=recorder.figures(), profiles=profiles)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(msgspec.json.format(msgspec.json.encode(results)))
    m = results.machine
    first, last = (" ".join(f"{x:.2f}" for x in load)
                   for load in (m.load_average_start, m.load_average_end))
    print(f"\n{m.kernel}; {m.cpus} × {m.cpu_model}; Python {m.python}; libfuse {m.libfuse}; "
          f"pyfuse3 {m.pyfuse3}; tree {m.commit}\nload average {first} at the start, "
          f"{last} at the end; {results.duration_s:.0f} s; "
          f"median (lowest–highest) of {args.repeats} runs\n")
    print(render_tables(results.figures))
    for sampled in profiles:
        print(render_profile(sampled))
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
