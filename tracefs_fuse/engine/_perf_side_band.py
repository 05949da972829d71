"""Side-band records a perf ring carries about tasks: FORK, COMM, EXIT.

The kernel writes them as things happen: ``PERF_RECORD_FORK`` from
``copy_process`` (``perf_event_fork``), ``PERF_RECORD_COMM`` at exec and at
``prctl(PR_SET_NAME)`` (``perf_event_comm``), ``PERF_RECORD_EXIT`` when a task
leaves (``perf_event_exit_task``). A FUSE daemon sees none of them; it sees a
task when the task writes one of our events, and then knows its comm.

Rules:
  * Before a sample of a task, a ring whose events ask for it gets what the
    kernel would have written before that sample and the reader has not had
    yet: a FORK for each followed task not announced yet (parents first), then
    a COMM when the task's comm differs from the one last announced for it in
    this ring (a forked task is announced with its parent's). The reader sees
    them in the kernel's order, stamped at the write instead of at the event.
  * ``misc`` says ``PERF_RECORD_MISC_COMM_EXEC`` (with ``comm_exec``) on a
    task's first COMM in the ring, and later when its image changed since
    the last one; a rename within one image (``PR_SET_NAME``) is a plain COMM.
  * Which records an event asks for is ``perf_event_task_match`` (FORK and
    EXIT: ``comm``, ``mmap``, ``mmap2``, ``mmap_data`` or ``task``) and
    ``perf_event_comm_match`` (COMM: ``comm``).
  * A ring remembers at most ``ANNOUNCED_MAX`` tasks; a forgotten one is
    announced again (a second COMM of the same name is harmless to readers).

Kernel: kernel/events/core.c (``perf_event_task_output``,
``perf_event_comm_output``), include/uapi/linux/perf_event.h
(``PERF_RECORD_EXIT``, ``PERF_RECORD_FORK``, ``PERF_RECORD_COMM``).
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable

import msgspec

from ._memory import Tgid
from ._perf_event_attr import Flag, PerfEventAttr
from ._perf_output import HEADER, EventIds, SampleFacts, comm_record, sample_id

PERF_RECORD_EXIT = 4
PERF_RECORD_FORK = 7
#: Tasks a ring remembers having announced.
ANNOUNCED_MAX = 4096

#: perf_event_task_match: ``attr.comm || attr.mmap || attr.mmap2 || attr.mmap_data || attr.task``.
TASK_MATCH = Flag.COMM | Flag.MMAP | Flag.MMAP2 | Flag.MMAP_DATA | Flag.TASK

#: struct perf_task_event's event_id after its header:
#: ``u32 pid, ppid; u32 tid, ptid; u64 time;``
_TASK_BODY = struct.Struct("=IIIIQ")


class Lineage(msgspec.Struct, frozen=True, kw_only=True):
    """A followed task and the process it was forked from."""

    pid: Tgid
    tid: int
    ppid: int
    ptid: int


def task_record(type_: int, attr: PerfEventAttr, ids: EventIds, lineage: Lineage,
                facts: SampleFacts) -> bytes:
    """``PERF_RECORD_FORK`` or ``PERF_RECORD_EXIT``, then ``sample_id``.

    A FORK names the forking task as parent (``current``); an EXIT names the
    real parent's *pid* twice, as ``perf_event_task_output`` writes it.
    """
    ptid = lineage.ppid if type_ == PERF_RECORD_EXIT else lineage.ptid
    body = _TASK_BODY.pack(lineage.pid, lineage.ppid, lineage.tid, ptid, facts.time) \
        + sample_id(attr, ids, facts)
    return HEADER.pack(type_, 0, HEADER.size + len(body)) + body


class _Announced(msgspec.Struct, kw_only=True):
    comm: str
    image: bytes | None


class SideBand:
    """What one ring's reader has been told about tasks.

    Args:
        image_of: a process's current image (differs after an exec; None: unknown).
    """

    def __init__(self, image_of: Callable[[Tgid], bytes | None]) -> None:
        self._image_of = image_of
        self._announced: OrderedDict[int, _Announced] = OrderedDict()

    def before_sample(self, flags: int, attr: PerfEventAttr, ids: EventIds, facts: SampleFacts,
                      comm: str, forks: list[Lineage]) -> list[bytes]:
        """The records owed before a sample of task ``facts.tid`` named ``comm``.

        ``flags``: the side-band bits asked for (the events' own, and those
        of real events redirected into this ring); ``forks``: the task's
        followed lineage, oldest first, ending with the task itself (empty
        when it was not forked while followed).
        """
        out: list[bytes] = []
        if flags & TASK_MATCH:
            for lineage in forks:
                if lineage.tid in self._announced:
                    continue
                parent = self._announced.get(lineage.ptid)
                self._remember(lineage.tid, _Announced(
                    comm=parent.comm if parent else "",
                    image=parent.image if parent else None))
                out.append(task_record(PERF_RECORD_FORK, attr, ids, lineage, facts))
        if flags & Flag.COMM:
            known = self._announced.get(facts.tid)
            if known is None or known.comm != comm:
                image = self._image_of(Tgid(facts.pid))
                exec_ = bool(flags & Flag.COMM_EXEC) and (
                    known is None or (image is not None and image != known.image))
                self._remember(facts.tid, _Announced(comm=comm, image=image))
                out.append(comm_record(attr, ids, comm.encode("latin-1", "replace"), facts,
                                       exec_=exec_))
        return out

    def recent(self, limit: int) -> list[tuple[int, str]]:
        """The ``limit`` tasks announced last: (tid, the comm announced)."""
        latest = list(self._announced.items())[-limit:] if limit else []
        return [(tid, announced.comm) for tid, announced in latest]

    def forget(self, tid: int) -> None:
        self._announced.pop(tid, None)

    def _remember(self, tid: int, announced: _Announced) -> None:
        self._announced[tid] = announced
        self._announced.move_to_end(tid)
        while len(self._announced) > ANNOUNCED_MAX:
            self._announced.popitem(last=False)
