"""A process's relatives, from ``/proc``: what ``inherit`` needs to follow forks.

Rules:
  * A process's threads are ``/proc/<pid>/task``; its child processes are the
    ``children`` files of its threads (a child is listed under the thread that
    forked it); a parent is field 4 of ``stat``, the real parent *process*.
  * A process that is gone, or never was, has no relatives: nothing raises.
  * An ancestry stops at pid 1, at 0 (no parent: the namespace's init's
    parent), at a process that is gone, or after ``ANCESTRY_MAX`` steps.

Kernel: fs/proc/array.c (``do_task_stat``: ppid is ``task_tgid_nr_ns(real_parent)``),
fs/proc/array.c (``children_seq_show``, CONFIG_PROC_CHILDREN).
"""

from __future__ import annotations

import os

from ..engine._memory import Tgid
from ..engine._perf_inherit import Family

ANCESTRY_MAX = 64
#: /proc/<pid>/stat field 4.
_PPID = 4


def parent(pid: int, proc: str = "/proc") -> int | None:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            line = f.read()
        return int(line[line.rindex(b")") + 2:].split(b" ", _PPID - 2)[_PPID - 3])
    except (OSError, ValueError, IndexError):
        return None


def ancestry(tgid: Tgid, proc: str = "/proc") -> list[Tgid]:
    """``tgid``, its parent, its parent's parent, … as far as they are known."""
    chain = [tgid]
    while len(chain) < ANCESTRY_MAX and chain[-1] > 1:
        up = parent(chain[-1], proc)
        if up is None or up == 0:
            break
        chain.append(Tgid(up))
    return chain


def family(tgid: Tgid, proc: str = "/proc") -> Family:
    """The threads and child processes ``tgid`` has now."""
    try:
        threads = frozenset(int(tid) for tid in os.listdir(f"{proc}/{tgid}/task"))
    except (OSError, ValueError):
        return Family(frozenset(), frozenset())
    children: set[int] = set()
    for tid in threads:
        try:
            with open(f"{proc}/{tgid}/task/{tid}/children", "rb") as f:
                children.update(int(pid) for pid in f.read().split())
        except (OSError, ValueError):
            continue
    return Family(threads, frozenset(children))
