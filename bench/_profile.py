"""Where the daemon's time goes on the write path: py-spy samples, summarised.

py-spy samples the daemon from outside with native frames (``--native``), so
the C parts of a request (libfuse's read of /dev/fuse, the reply's writev,
the pread of /proc/<tid>/stat) show up next to the Python frames. Sampling
pauses the daemon, so the writes/s seen meanwhile are lower than benchmark 1's
and are reported only to show that cost.

Rules:
  * Only the main (trio) thread counts: its stacks start in
    ``_run_module_as_main``. Other threads (trio's idle thread cache, and
    the native receiver thread, which serves fast-path writes without
    Python: its cost is in benchmark 1's CPU figures) are left out.
  * A sample whose innermost frame is ``epoll_wait`` is idle: the daemon was
    waiting for the next request. Shares are of the other (busy) samples.
  * A part's share is inclusive: the samples with that frame anywhere on the
    stack.
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ._results import FrameShare, Profile

SAMPLES_PER_S = 200
MAIN_THREAD_ROOT = "_run_module_as_main"
#: The breakdown: (label, frame). Unindented parts do not overlap one another;
#: what they leave is reported as the rest (trio's scheduler and pyfuse3's
#: coroutine plumbing). Indented parts are inside the part above them.
BREAKDOWN = (
    ("io_read: take a queued request, staged records first", "io_read"),
    ("  take staged records in (the fast path's intake)", "NativeWrites.drain"),
    ("    of which the ring buffer's appends", "CpuBuffer.take_in"),
    ("writes the engine serves (RequestHandler.write)", "RequestHandler.write"),
    ("  writer's CPU and comm: pread of /proc/<tid>/stat", "Daemon.writer_task"),
    ("  engine: UserEventsData.write", "UserEventsData.write"),
    ("  reply: fuse_reply_write, a writev to /dev/fuse", "fuse_reply_write"),
    ("trio: re-arm the fd (epoll_ctl), once per wakeup",
     "EpollIOManager._update_registrations"),
    ("trio: epoll_wait and its results (busy part)", "EpollIOManager.get_events"),
    ("process connector: fork/exec/exit of any process", "Daemon.follow_processes"),
)
REST = "rest: trio's scheduler, pyfuse3's coroutines"
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
        if MAIN_THREAD_ROOT not in frames:
            continue
        samples += count
        if frames[-1] == "epoll_wait":
            idle += count
            continue
        leaves[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    busy = max(samples - idle, 1)
    breakdown = [FrameShare(label, frame, 100 * inclusive[frame] / busy)
                 for label, frame in BREAKDOWN]
    top_level = sum(share.percent for share in breakdown if not share.label.startswith(" "))
    return Profile(
        writers=writers, rate=rate, samples=samples, idle_samples=idle,
        breakdown=[*breakdown, FrameShare(REST, "", 100 - top_level)],
        top_self=[FrameShare("", frame, 100 * n / busy)
                  for frame, n in leaves.most_common(TOP_SELF)])


def profile_daemon(pid: int, raw: Path, workload: Callable[[], float], writers: int) -> Profile:
    """Sample ``pid`` while ``workload`` runs; ``workload`` returns the writes/s it saw."""
    # The venv's py-spy (the bench extra), else one on PATH.
    venv_spy = Path(sys.executable).with_name("py-spy")
    spy = str(venv_spy) if venv_spy.exists() else shutil.which("py-spy") or "py-spy"
    proc = subprocess.Popen([spy, "record", "--pid", str(pid), "--native",
                             "--rate", str(SAMPLES_PER_S), "--format", "raw",
                             "--output", str(raw)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        rate = workload()
    finally:
        # py-spy writes its output when interrupted, like on Ctrl-C.
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote no profile: {err}")
    return summarise(raw, writers, rate)
