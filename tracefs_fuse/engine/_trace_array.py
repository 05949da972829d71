"""A trace array: a ring buffer plus which events record into it.

Rules:
  * The top level of tracefs is one trace array (instances would be others);
    each event has one :class:`~._events.EventFile` per trace array holding its
    enable state there.
  * Enabling follows ``__ftrace_set_clr_event``: events flagged
    ``TRACE_EVENT_FL_IGNORE_ENABLE`` (ftrace's own) are skipped; a request that
    matches nothing is EINVAL; the first failure is reported after trying all.
  * Removing an event that was ever enabled here marks the buffer to be cleared
    at the next ``tracing_reset_all_online_cpus`` (its records would otherwise
    decode with whatever event reuses the id).

Kernel: kernel/trace/trace_events.c, kernel/trace/trace.c.
"""

from __future__ import annotations

import errno
from typing import Callable, Iterable, Protocol

from ._clock import TraceClock
from ._errors import TracefsError
from ._events import EventFile, EventTable, TraceEvent
from ._options import TraceOptions
from ._page import RB_EVNT_HDR_SIZE, subbuf_data_size
from ._ringbuf import Accept
from ._task import Task


class TraceBuffer(Protocol):
    """The ring buffer a trace array records into (:class:`~._ringbuf.RingBuffer`)."""

    @property
    def subbuf_size(self) -> int:
        ...

    @property
    def clock(self) -> TraceClock:
        ...

    def write(self, cpu: int, record: bytes, accept: Accept | None = None) -> bool:
        ...

    def take_in(self, cpu: int, staged: memoryview, at: int, copy_len: int, length: int,
                stamp: int, previous: int, event_length: int) -> bool:
        ...

    def reset(self, cpu: int | None = None) -> None:
        ...

    def record_on(self) -> None:
        ...

    def record_off(self) -> None:
        ...

    def record_is_on(self) -> bool:
        ...

    overwrite: bool


class SavedCmdlines:
    """``saved_cmdlines`` / ``saved_tgids``: the last comm and tgid seen per pid.

    The kernel saves a comm when a task is scheduled while event tracing is
    on (the ``sched_switch`` probe behind ``record-cmd``), and a tgid only
    with ``record-tgid``; the trace array calls :meth:`save_comm` and
    :meth:`save_tgid` under those same conditions, for the writers it sees.
    """

    #: The size this machine's 6.18 reports (one page of slots).
    DEFAULT_SIZE = 6552

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self.comms: dict[int, str] = {}
        self.tgids: dict[int, int] = {}

    def save_comm(self, task: Task) -> None:
        comms = self.comms
        if comms.get(task.pid) != task.comm:
            comms.pop(task.pid, None)
            if len(comms) >= self.size:
                del comms[next(iter(comms))]  # the kernel recycles the oldest slot
            comms[task.pid] = task.comm

    def save_tgid(self, task: Task) -> None:
        self.tgids[task.pid] = task.tgid

    def resize(self, size: int) -> None:
        """``tracing_resize_saved_cmdlines``: a new, empty table."""
        self.size = size
        self.comms = {}

    def comm(self, pid: int) -> str:
        if pid == 0:
            return "<idle>"
        return self.comms.get(pid, "<...>")


class TraceArray:
    """One trace buffer and the per-event enable state that feeds it."""

    def __init__(self, events: EventTable, buffer: TraceBuffer, cmdlines: SavedCmdlines,
                 nr_cpus: int) -> None:
        self.events = events
        self.buffer = buffer
        self.cmdlines = cmdlines
        self.options = TraceOptions(self._option_changed)
        #: ``tracing_cpumask``: CPUs whose events are recorded.
        self.cpumask = (1 << nr_cpus) - 1
        #: Incremented by every record: the adapter wakes readers when it moves.
        self.generation = 0
        self._nr_enabled = 0
        #: Set when a once-enabled event is removed (``tr->clear_trace``).
        self.clear_trace = False
        self._files: dict[TraceEvent, EventFile] = {}
        #: Called with every event whose enable state here changed (the
        #: native fast path republishes it).
        self.enable_listeners: list[Callable[[TraceEvent], None]] = []
        events.removal_listeners.append(self._event_removed)

    # -- the RecordSink seam ------------------------------------------------------

    @property
    def tracing_on(self) -> bool:
        return self.buffer.record_is_on()

    def set_tracing_on(self, on: bool) -> None:
        if on:
            self.buffer.record_on()
        else:
            self.buffer.record_off()

    @property
    def max_entry_size(self) -> int:
        """``BUF_MAX_DATA_SIZE``: the largest entry a sub-buffer takes (4072)."""
        return subbuf_data_size(self.buffer.subbuf_size) - 2 * RB_EVNT_HDR_SIZE

    def can_record(self, length: int, cpu: int | None = None) -> bool:
        """Would ``ring_buffer_lock_reserve`` succeed for this entry (on this CPU)?"""
        return (self.tracing_on and length <= self.max_entry_size
                and (cpu is None or bool(self.cpumask >> cpu & 1)))

    def record(self, entry: bytes, task: Task, accept: Accept | None = None) -> None:
        """Record ``entry``; ``accept`` may still discard it once reserved (see ``Accept``)."""
        self.save_task(task)
        if self.buffer.write(task.cpu, entry, accept):
            self.generation += 1

    def save_task(self, task: Task) -> None:
        """What :meth:`record` remembers of a writer (``saved_cmdlines``, tgids)."""
        if self._nr_enabled and self.options["record-cmd"]:
            self.cmdlines.save_comm(task)
        if self.options["record-tgid"]:
            self.cmdlines.save_tgid(task)

    def _option_changed(self, name: str, value: bool) -> None:
        if name == "overwrite":
            self.buffer.overwrite = value

    # -- enable state -------------------------------------------------------------

    def file(self, event: TraceEvent) -> EventFile:
        file = self._files.get(event)
        if file is None:
            file = self._files[event] = EventFile(self, event)
        return file

    def enabled(self, event: TraceEvent) -> bool:
        file = self._files.get(event)
        return file is not None and file.enabled

    def enabled_events(self) -> list[TraceEvent]:
        """Enabled events in list order (what ``set_event`` shows)."""
        return [e for e in self.events if self.enabled(e)]

    def set_enabled(self, event: TraceEvent, enabled: bool) -> None:
        file = self.file(event)
        was = file.enabled
        file.set_enabled(enabled)
        self._nr_enabled += file.enabled - was
        if file.enabled != was:
            for listener in self.enable_listeners:
                listener(event)

    def set_clr_event(self, enabled: bool, *, match: str | None = None,
                      system: str | None = None, name: str | None = None) -> None:
        """``__ftrace_set_clr_event``: switch every event the pattern selects.

        Raises:
            TracefsError: EINVAL if no event matched.
        """
        matched = False
        for event in self.events:
            if not event.enableable:
                continue
            if match is not None and match not in (event.name, event.system):
                continue
            if system is not None and system != event.system:
                continue
            if name is not None and name != event.name:
                continue
            matched = True
            self.set_enabled(event, enabled)
        if not matched:
            raise TracefsError(errno.EINVAL, "no event matches")

    def enable_state(self, events: Iterable[TraceEvent]) -> str:
        """``system_enable_read``: ``?`` none, ``0`` all off, ``1`` all on, ``X`` mixed."""
        seen = 0
        for event in events:
            if event.enableable:
                seen |= 1 << self.enabled(event)
                if seen == 3:
                    break
        return "?01X"[seen]

    def clear_events(self) -> None:
        """``ftrace_clear_events``: disable every event (``set_event`` with O_TRUNC)."""
        for event in self.enabled_events():
            self.set_enabled(event, False)

    def _event_removed(self, event: TraceEvent) -> None:
        file = self._files.pop(event, None)
        if file is not None and file.was_enabled:
            self.clear_trace = True

    def reset_if_cleared(self) -> None:
        """``tracing_reset_all_online_cpus``: clear the buffer if marked."""
        if self.clear_trace:
            self.clear_trace = False
            self.buffer.reset()
