"""New processes, found in ``/proc``: the fork source that works everywhere.

The process connector (``_proc_events``) only serves listeners in the initial
user, pid and network namespaces. ``/proc`` serves everyone: any process can
list it and read ``stat``, in any namespace and without privilege. What it
cannot do is tell *when* a process appeared, so the tracker looks at the
moments the kernel would act on a fork copy (an enable change, a change of a
process's own enablers, an exit), and only if something may have forked
since the last look.

Design (measured on the 2-CPU test VM, Python 3.11, 60 processes):
  * "Did anything fork?" is one ``pread`` of ``/proc/sys/kernel/ns_last_pid``
    (1.4 us): the last pid handed out in our pid namespace, which every
    process and thread creation in it or below it advances.
  * When it moved: ``listdir("/proc")`` (70 us for 60 entries, about 1 us per
    entry) and one ``stat`` read per pid not seen before (14 us each).
    ``/proc/<pid>/task/<tid>/children`` would need one read per thread of
    every tracked process and a kernel with CONFIG_PROC_CHILDREN, and still
    miss orphans; the listing finds every process wherever it was reparented.

Rules:
  * A process is examined once: when it is first listed. A pid that leaves
    the listing is forgotten, so a successor under the same number is new.
  * Where ``ns_last_pid`` is unreadable, every look is a scan.

Caveats:
  * A pid that exits and is handed out again between two looks, with no
    look in between, is taken for the process seen before. That takes a
    wrap of the whole pid space (``kernel.pid_max`` allocations) between two
    looks; a wrap seen by ``ns_last_pid`` going down makes the next look
    read every ``stat`` again.
  * A fork still in progress at the instant of the listing (pid handed out,
    process not yet listed) is found at the next look after anything else
    is created.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ._memory import StatFacts


class ProcScan:
    """Processes that appeared in ``/proc`` since the last look.

    Args:
        proc: the procfs of the pid namespace FUSE reports our callers in.
    """

    def __init__(self, stat: Callable[[int], StatFacts | None], proc: str = "/proc") -> None:
        self._proc = proc
        #: ``/proc/<pid>/stat`` of a process, None if gone (``ClientMemory.stat``).
        self._stat = stat
        try:
            self._last_pid_fd: int | None = os.open(f"{proc}/sys/kernel/ns_last_pid",
                                                    os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._last_pid_fd = None
        #: ns_last_pid at the last look; None before the first.
        self._looked_at: int | None = None
        #: Every listed process examined so far: pid -> start time.
        self._seen: dict[int, int] = {}
        self.looks = 0
        self.scans = 0

    def last_pid(self) -> int | None:
        """The last pid handed out in our pid namespace, if readable."""
        if self._last_pid_fd is None:
            return None
        try:
            return int(os.pread(self._last_pid_fd, 32, 0))
        except (OSError, ValueError):
            return None

    def quiet(self) -> bool:
        """Nothing was created since the last scan (so there is nothing new)."""
        self.looks += 1
        mark = self.last_pid()
        return mark is not None and mark == self._looked_at

    def new_processes(self) -> list[StatFacts]:
        """Processes listed now and never examined before, oldest first."""
        self.scans += 1
        mark = self.last_pid()
        if mark is not None and self._looked_at is not None and mark < self._looked_at:
            self._seen.clear()  # pids wrapped around: trust nothing seen before
        self._looked_at = mark
        listed = [int(name) for name in os.listdir(self._proc) if name.isdigit()]
        seen, self._seen = self._seen, {}
        new: list[StatFacts] = []
        for pid in listed:
            start = seen.get(pid)
            if start is not None:
                self._seen[pid] = start
                continue
            facts = self._stat(pid)
            if facts is None:
                continue  # exited since the listing
            self._seen[pid] = facts.starttime
            new.append(facts)
        new.sort(key=lambda f: (f.starttime, f.pid))
        return new

    def close(self) -> None:
        if self._last_pid_fd is not None:
            os.close(self._last_pid_fd)
            self._last_pid_fd = None
