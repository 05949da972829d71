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
from typing import Iterable, Protocol

from ._errors import TracefsError
from ._events import EventFile, EventTable, TraceEvent
from ._task import Task


class TraceBuffer(Protocol):
    """The ring buffer a trace array records into."""

    def write(self, cpu: int, entry: bytes) -> bool:
        ...

    def reset(self) -> None:
        ...


class SavedCmdlines:
    """``saved_cmdlines`` / ``saved_tgids``: the last comm and tgid seen per pid."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self.comms: dict[int, str] = {}
        self.tgids: dict[int, int] = {}

    def save(self, task: Task) -> None:
        comms = self.comms
        if comms.get(task.pid) != task.comm:
            comms.pop(task.pid, None)
            if len(comms) >= self.size:
                del comms[next(iter(comms))]  # the kernel recycles the oldest slot
            comms[task.pid] = task.comm
        self.tgids[task.pid] = task.tgid

    def comm(self, pid: int) -> str:
        if pid == 0:
            return "<idle>"
        return self.comms.get(pid, "<...>")


class TraceArray:
    """One trace buffer and the per-event enable state that feeds it."""

    def __init__(self, events: EventTable, buffer: TraceBuffer, cmdlines: SavedCmdlines,
                 max_entry_size: int) -> None:
        self.events = events
        self.buffer = buffer
        self.cmdlines = cmdlines
        self.max_entry_size = max_entry_size
        self.tracing_on = True
        #: Set when a once-enabled event is removed (``tr->clear_trace``).
        self.clear_trace = False
        self._files: dict[TraceEvent, EventFile] = {}
        events.removal_listeners.append(self._event_removed)

    # -- the RecordSink seam ------------------------------------------------------

    def can_record(self, length: int) -> bool:
        """Would ``ring_buffer_lock_reserve`` succeed for an entry of this size?"""
        return self.tracing_on and length <= self.max_entry_size

    def record(self, entry: bytes, task: Task) -> None:
        self.cmdlines.save(task)
        self.buffer.write(task.cpu, entry)

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
        self.file(event).set_enabled(enabled)

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
