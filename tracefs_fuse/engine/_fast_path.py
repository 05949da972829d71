"""What the native fast path may answer on its own, and the records it staged.

An enabled event's write to ``user_events_data`` is the hot request (one per
event a program emits). The adapter's receiver thread answers it natively
(``fuse/_native/fastpath.c``) from a compact table this module describes, and
stamps the record into a staging ring; the engine takes the staged records
in, in order, before it does anything else.

Rules:
  * The engine stays the one place where the kernel's rules live: the table
    says, per write index, exactly what :meth:`UserEventsData.write
    <._user_events_data.UserEventsData.write>` and :func:`record
    <._user_events_data.record>` would check (event enabled, minimum size,
    which trace arrays record it and whether they can, the ``__data_loc`` /
    ``__rel_loc`` validators), so a write the fast path answers is one the
    engine would have answered with its full count and the same records.
    Anything else (an error, a disabled or unknown index, a write that
    fails validation, a clock the fast path cannot read) it leaves to the
    engine.
  * The table changes only through what is published here: trace arrays
    (:class:`FastArray`), events (:class:`FastEvent`, republished when an
    enable changes, via ``TraceArray.enable_listeners``) and each open
    file's write indices (append-only while the file is open).
  * A perf event's samples are described apart (``_fast_perf``); the staging
    ring carries them with the trace records.
  * :meth:`FastPath.take_in` takes staged records in the order they were
    staged; the adapter calls it before it hands the engine any other
    request, so the engine sees every write in the order clients made them.

Kernel: kernel/trace/trace_events_user.c (``user_events_write_core``,
``user_event_ftrace``, ``user_event_validate``).
"""

from __future__ import annotations

import struct
from typing import Sequence

import msgspec

from ._task import Task
from ._trace_array import TraceArray
from ._events import Probe, TraceEvent
from ._fast_perf import STAGED_PERF_ARRAY
from ._fast_perf import take_in as take_in_perf
from ._perf_events import PerfEvents
from ._memory import Tgid
from ._user_events import UserEvent, UserEventsFile

# A staged record, written by fuse/_native/fastpath.c (which checks this
# layout with _Static_assert), 8-byte aligned:
#
# struct staged_record {
#         __u32 size;          /* of this staged record, padding included */
#         __u16 cpu;           /* the ring buffer it goes to */
#         __u8  array;         /* the trace array's index, STAGED_WRAP: none */
#         __u8  __pad;
#         __u64 ts;            /* the array's clock when the write came */
#         __u64 previous;      /* ts of the event staged before it on this CPU */
#         __s32 pid;           /* the writer's facts, for saved_cmdlines */
#         __s32 tgid;
#         __u32 len;           /* bytes of the entry (at the end of encoded[]) */
#         __u32 copy_len;      /* bytes of encoded[] */
#         __u32 event_len;     /* bytes the event takes in a page */
#         __u32 __pad2;
#         char  comm[16];
#         __u8  encoded[];     /* TIME_EXTEND?, event header, struct trace_entry,
#                                 payload: CpuBuffer.write's layout after an
#                                 event stamped `previous` */
# };
STAGED_RECORD = struct.Struct("<IHBxQQiiIII4x16s")
assert STAGED_RECORD.size == 64
#: ``array`` of the padding that fills the end of the staging ring.
STAGED_WRAP = 0xFF
#: Trace arrays the fast path can tell apart (an 8-bit mask per event).
MAX_FAST_ARRAYS = 8
_TASK_CACHE = 4096


class FastArray(msgspec.Struct, frozen=True, kw_only=True):
    """A trace array, as far as deciding whether it records a write goes.

    ``TraceArray.can_record``: recording on, the entry no larger than a
    sub-buffer takes, the writer's CPU in ``tracing_cpumask``.
    """

    tracing_on: bool
    max_entry_size: int
    cpumask: int
    #: ``trace_clock``: the adapter knows how to read host clocks by name.
    clock: str


class FastEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One user event: whether a write succeeds, and what it records."""

    id: int
    #: ``event.status``: some probe is attached (the write is not EBADF).
    enabled: bool
    #: A perf event of ours records it (``_fast_perf`` describes which).
    perf: bool
    #: Indices of the trace arrays in which the event is enabled.
    recorders: tuple[int, ...]
    #: ``user->min_size``: shorter payloads are EINVAL.
    min_size: int
    #: (entry offset, ``__rel_loc``?, must end in NUL?) per dynamic field.
    validators: tuple[tuple[int, bool, bool], ...]


class FastPath:
    """The fast path's table for one tracefs, and the intake of staged records.

    Args:
        arrays: the trace arrays a user event can record into, in the order
            staged records name them.
        perf: the perf events the staged perf samples are for.
    """

    def __init__(self, arrays: Sequence[TraceArray], perf: PerfEvents | None = None) -> None:
        if len(arrays) > MAX_FAST_ARRAYS:
            raise ValueError(f"at most {MAX_FAST_ARRAYS} trace arrays")
        self.arrays = tuple(arrays)
        self._published: list[FastArray | None] = [None] * len(self.arrays)
        self._dirty: set[TraceEvent] = set()
        for trace_array in self.arrays:
            trace_array.enable_listeners.append(self._enable_changed)
        self._tasks: dict[tuple[int, int, int, bytes], Task] = {}
        self._perf = perf

    # -- the table ----------------------------------------------------------------

    def _enable_changed(self, event: TraceEvent) -> None:
        self._dirty.add(event)

    def array(self, index: int) -> FastArray:
        tr = self.arrays[index]
        return FastArray(tracing_on=tr.tracing_on, max_entry_size=tr.max_entry_size,
                         cpumask=tr.cpumask, clock=tr.buffer.clock.name)

    def changed_arrays(self) -> list[tuple[int, FastArray]]:
        """Arrays whose description changed since the last call."""
        changed = []
        for index in range(len(self.arrays)):
            now = self.array(index)
            if now != self._published[index]:
                self._published[index] = now
                changed.append((index, now))
        return changed

    def take_changed_events(self) -> list[TraceEvent]:
        """Events whose enable state changed in some array since the last call."""
        dirty, self._dirty = self._dirty, set()
        return list(dirty)

    def event(self, event: UserEvent) -> FastEvent:
        return FastEvent(
            id=event.id, enabled=bool(event.status), perf=bool(event.probes[Probe.PERF]),
            recorders=tuple(i for i, tr in enumerate(self.arrays) if tr.enabled(event)),
            min_size=event.min_size, validators=event.validators)

    @staticmethod
    def slot_events(file: UserEventsFile, start: int) -> list[UserEvent]:
        """The events of write indices ``start`` onwards (indices only grow)."""
        return [event for event, _ in file.slots[start:]]

    # -- the intake ---------------------------------------------------------------

    def take_in(self, staged: memoryview) -> int:
        """Record every staged record in ``staged`` (whole records, in order).

        Returns:
            How many records were taken in.
        """
        arrays = self.arrays
        tasks = self._tasks
        unpack = STAGED_RECORD.unpack_from
        header = STAGED_RECORD.size
        end = len(staged)
        off = taken = 0
        writer: tuple[int, int, int, int, bytes] | None = None
        saved: set[tuple[int, int, int, int, bytes]] = set()
        recorded = [0] * len(arrays)
        while off < end:
            (size, cpu, array, ts, previous, pid, tgid, length, copy_len, event_len,
             comm) = unpack(staged, off)
            if array == STAGED_PERF_ARRAY:
                assert self._perf is not None
                take_in_perf(self._perf, staged, off)
                taken += 1
            elif array != STAGED_WRAP:
                tr = arrays[array]
                this = (array, pid, tgid, cpu, comm)
                if writer != this and (writer := this) not in saved:
                    # What record() remembers of a writer (saved_cmdlines,
                    # tgids) changes only with the writer: a writer's first
                    # record in an intake leaves the state all its records
                    # would (as long as fewer writers than saved_cmdlines
                    # slots write between two intakes).
                    saved.add(this)
                    key = (pid, tgid, cpu, comm)
                    task = tasks.get(key)
                    if task is None:
                        if len(tasks) >= _TASK_CACHE:
                            tasks.clear()
                        task = tasks[key] = Task(
                            pid=pid, tgid=Tgid(tgid), cpu=cpu,
                            comm=comm.rstrip(b"\0").decode("latin-1"))
                    tr.save_task(task)
                if tr.buffer.take_in(cpu, staged, off + header, copy_len, length, ts,
                                     previous, event_len):
                    recorded[array] += 1
                taken += 1
            off += size
        for tr, count in zip(arrays, recorded):
            tr.generation += count
        return taken
