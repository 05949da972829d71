"""Where the daemon's time goes on the write path: py-spy samples, summarised.

py-spy samples the daemon from outside with native frames (``--native``), so
the C parts of a request (libfuse's read of /dev/fuse, the reply's writev,
the pread of /proc/<tid>/stat) show up next to the Python frames. Sampling
pauses the daemon, so the writes/s seen meanwhile are lower than benchmark 1's
and are reported only to show that cost.

Rules:
  * A sample whose innermost frame is ``epoll_wait`` is idle: the daemon was
    waiting for the next request. Shares are of the other (busy) samples.
  * A part's share is inclusive: the samples with that frame anywhere on the
    stack.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ._results import FrameShare, Profile

SAMPLES_PER_S = 200
#: Frames shown in the breakdown, outermost first, with what they stand for.
BREAKDOWN = (
    ("receive the request (read of /dev/fuse)", "io_read"),
    ("pyfuse3 dispatch into the bridge", "op_write_buf"),
    ("RequestHandler.write, all of it", "RequestHandler.write"),
    ("  writer's CPU and comm (pread /proc/<tid>/stat)", "Daemon.writer_task"),
    ("  engine: UserEventsData.write", "UserEventsData.write"),
    ("    of which the ring buffer", "RingBuffer.write"),
    ("  publish hook (wake readers, push pages)", "Daemon.publish"),
    ("  reply (fuse_reply_write: writev to /dev/fuse)", "fuse_reply_write"),
    ("trio: re-arm the fd (epoll_ctl), per request", "EpollIOManager._update_registrations"),
    ("trio: poll for I/O (epoll_wait, busy part)", "EpollIOManager.get_events"),
    ("process connector (fork/exec/exit of any process)", "Daemon.follow_processes"),
)
TOP_SELF = 12


def _frame(text: str) -> str:
    """py-spy's ``name (file:line)`` → ``name``."""
    return text.split(" (", 1)[0]


def summarise(raw: Path, writers: int, rate: float) -> Profile:
    """Read py-spy's raw (collapsed stacks) output into a :class:`Profile`."""
    inclusive: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    samples = idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")]
        samples += count
        if frames[-1] == "epoll_wait":
            idle += count
            continue
        leaves[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    busy = max(samples - idle, 1)
    return Profile(
        writers=writers, rate=rate, samples=samples, idle_samples=idle,
        breakdown=[FrameShare(label, frame, 100 * inclusive[frame] / busy)
                   for label, frame in BREAKDOWN],
        top_self=[FrameShare("", frame, 100 * n / busy)
                  for frame, n in leaves.most_common(TOP_SELF)])


def profile_daemon(pid: int, raw: Path, workload: Callable[[], float], writers: int) -> Profile:
    """Sample ``pid`` while ``workload`` runs; ``workload`` returns the writes/s it saw."""
    spy = Path(sys.executable).with_name("py-spy")
    proc = subprocess.Popen([str(spy), "record", "--pid", str(pid), "--native",
                             "--rate", str(SAMPLES_PER_S), "--format", "raw",
                             "--output", str(raw)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        rate = workload()
    finally:
        # py-spy writes its output when interrupted, like on Ctrl-C.
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote no profile: {err}")
    return summarise(raw, writers, rate)
