"""``python -m bench.fork_cost``: what others' forks and our sleeping clients cost (issue 19 item 10).

* Storm: one client holds an enabler (``client hold``), and processes that
  are none of ours fork children that exit at once (``client storm``, two
  of them) for a few seconds; the daemon's CPU time over that window, per
  fork source, as a share of one CPU and per fork.
* Brood: one client registers and forks 1,600 children (3,000 where the fd limit allows) that sleep (``client
  brood``); an enable write makes the daemon follow them (each pinned); then
  the daemon's CPU time over an idle window, per fork source.

The daemon's CPU time is utime + stime of every thread (``schedstat``).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._servers import OURS, Binaries, Server, mounted

SOURCES = ("connector", "procfs")
STORMERS = 2


def _share(server: Server, seconds: float, during: subprocess.Popen[str] | None = None) -> float:
    """The daemon's CPU time over ``seconds`` (or until ``during`` ends), as a share of one CPU."""
    cpu0, t0 = server.cpu_ns(), time.monotonic()
    if during is None:
        time.sleep(seconds)
    else:
        during.wait()
    return (server.cpu_ns() - cpu0) / ((time.monotonic() - t0) * 1e9)


def storm(binaries: Binaries, work: Path, source: str, seconds: float, rate: int) -> None:
    with mounted(f"{OURS} --process-source {source}", work / f"storm-{source}",
                 binaries) as server:
        hold = subprocess.Popen([str(binaries.client), "hold", str(server.mountpoint), "1"],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert hold.stdout is not None and hold.stdout.readline() == "ready\n"
            idle = _share(server, seconds)
            cpu0, t0 = server.cpu_ns(), time.monotonic()
            stormers = [subprocess.Popen([str(binaries.client), "storm", str(seconds),
                                          str(rate // STORMERS)],
                                         stdout=subprocess.PIPE, text=True)
                        for _ in range(STORMERS)]
            forks = sum(int(p.communicate()[0].split("=")[1]) for p in stormers)
            busy = (server.cpu_ns() - cpu0) / ((time.monotonic() - t0) * 1e9)
            took = time.monotonic() - t0
        finally:
            hold.kill()
            hold.wait()
    print(f"storm  {source:9} {forks / took:8.0f} forks/s  daemon {busy:6.1%} of a CPU "
          f"({busy * took * 1e6 / forks:5.1f} µs per fork; idle {idle:5.1%})")


def brood(binaries: Binaries, work: Path, source: str, seconds: float, children: int) -> None:
    with mounted(f"{OURS} --process-source {source}", work / f"brood-{source}",
                 binaries) as server:
        mount = server.mountpoint
        parent = subprocess.Popen([str(binaries.client), "brood", str(mount), str(children)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert parent.stdout is not None and parent.stdout.readline() == "ready\n"
            # An enable write: the daemon follows every child forked before it.
            (mount / "events/user_events/bench_brood/enable").write_text("1")
            followed = _followed(server)
            share = _share(server, seconds)
        finally:
            assert parent.stdin is not None
            parent.stdin.close()
            parent.wait()
    print(f"brood  {source:9} {children} sleeping children ({followed} pinned): "
          f"daemon {share:6.1%} of a CPU")


def _followed(server: Server) -> int:
    """Processes the daemon holds pinned: its /proc/<pid>/mem descriptors."""
    fds = f"/proc/{server.proc.pid}/fd"
    count = 0
    for fd in os.listdir(fds):
        try:
            count += os.readlink(f"{fds}/{fd}").endswith("/mem")
        except FileNotFoundError:
            continue
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fork_cost", description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=7000, help="forks/s asked of the storm")
    parser.add_argument("--children", type=int, default=1600)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m bench.fork_cost: must run as root", file=sys.stderr)
        return 2
    # Each pinned child takes 3 descriptors of its uid's share, a quarter of
    # (hard limit - 256): with this machine's 20,000, 1,645 children.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if args.children > (hard - 256) // 4 // 3:
        print(f"python -m bench.fork_cost: {args.children} children need a hard "
              f"RLIMIT_NOFILE of {args.children * 12 + 256}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-forks-") as tmp:
        work = Path(tmp)
        binaries = Binaries(work)
        for source in SOURCES:
            storm(binaries, work, source, args.seconds, args.rate)
        for source in SOURCES:
            brood(binaries, work, source, args.seconds, args.children)
    return 0


if __name__ == "__main__":
    sys.exit(main())
