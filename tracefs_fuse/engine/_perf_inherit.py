"""Which tasks a per-task perf event follows: its task, and with ``inherit`` the
tasks that task (and they) create while the event exists.

The kernel clones an ``inherit`` event into every task its task creates
(``perf_event_init_task`` from ``copy_process``: threads and processes), and
into theirs, for as long as the event exists. Tasks that existed before the
event are not followed: ``perf_event_open`` attaches to one task.

Rules:
  * The event's own thread is followed; with ``inherit``, so is every thread
    of its process and every process descending from it, except those that
    existed at open: the threads and the child processes taken at open
    (``family``), and whatever descends from such a child.
  * A writer's descent is asked of the adapter (``ancestry``: the writer's
    process, its parent, and so on up) the first time it writes; the answer
    is kept (bounded: ``KNOWN_MAX`` processes, a forgotten one is asked
    again). A process whose parent exited before it was first seen has lost
    its descent (it was reparented): not followed.
  * The lineage of a followed task (parents first) is what its FORK records
    say (``_perf_side_band``); the forking thread is not known, so a
    process's parent thread is named by the parent's pid.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ._memory import Tgid
from ._perf_side_band import Lineage
from ._task import Task

#: Processes whose descent an event remembers.
KNOWN_MAX = 1024


class Family:
    """What existed of the task's process at open: its threads and its children."""

    __slots__ = ("threads", "children")

    def __init__(self, threads: frozenset[int], children: frozenset[int]) -> None:
        self.threads = threads
        self.children = children


class Inheritance:
    def __init__(self, target: Task, inherit: bool, family: Family,
                 ancestry: Callable[[Tgid], list[Tgid]]) -> None:
        self.target = target
        self.inherit = inherit
        self._family = family
        self._ancestry = ancestry
        #: tgid -> its lineage below the target process (None: not followed).
        self._known: OrderedDict[Tgid, list[Lineage] | None] = OrderedDict()

    def follows(self, task: Task) -> list[Lineage] | None:
        """None when ``task`` is not followed; else the forks that made it,
        oldest first (empty for the event's own thread)."""
        target = self.target
        if task.pid == target.pid:
            return []
        if not self.inherit:
            return None
        if task.tgid == target.tgid:
            if task.pid in self._family.threads:
                return None
            return [self._thread(task)]
        chain = self._processes(task.tgid)
        if chain is None:
            return None
        if task.pid == task.tgid:
            return chain
        return [*chain, self._thread(task)]

    def _thread(self, task: Task) -> Lineage:
        # A thread created after open, by some thread of its process.
        return Lineage(pid=task.tgid, tid=task.pid, ppid=task.tgid, ptid=task.tgid)

    def _processes(self, tgid: Tgid) -> list[Lineage] | None:
        if tgid in self._known:
            self._known.move_to_end(tgid)
            return self._known[tgid]
        chain = self._descent(tgid)
        self._known[tgid] = chain
        while len(self._known) > KNOWN_MAX:
            self._known.popitem(last=False)
        return chain

    def _descent(self, tgid: Tgid) -> list[Lineage] | None:
        up = self._ancestry(tgid)
        top = self.target.tgid
        if top not in up[1:]:
            return None
        below = up[:up.index(top) + 1]  # the writer ... the target's process
        if below[-2] in self._family.children:
            return None  # descends from a child that existed at open
        lineage = [Lineage(pid=child, tid=child, ppid=parent, ptid=parent)
                   for child, parent in zip(below, below[1:])]
        return lineage[::-1]
