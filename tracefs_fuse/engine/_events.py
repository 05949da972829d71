"""Trace event types and the table that gives them their ids.

Rules:
  * A :class:`TraceEvent` is what the kernel calls a ``trace_event_call``: a
    directory ``events/<system>/<name>/`` and the records whose ``common_type``
    is its id. Kinds of event (user events, synthetic events, ftrace's own)
    subclass it; the generic parts (format file, enabling bookkeeping) live here.
  * Ids come from one allocator per tracefs, lowest free first, like the
    kernel's ``trace_event_ida``; ftrace's built-in events keep fixed ids.
  * Dynamic ids start above the host kernel's (:func:`first_dynamic_id`):
    the id in ``events/*/id`` is what tools hand to ``perf_event_open``, which
    goes to the host kernel; an id the host does not use makes that fail
    (EINVAL) instead of attaching to some kernel event of the same number.
  * Probes are counted per kind, because user_events report *who* is attached
    (``# Used by ftrace perf other``) and keep a reference per probe.

Kernel: kernel/trace/trace_events.c, trace_output.c (``register_trace_event``).
"""

from __future__ import annotations

import enum
import errno
import heapq
from collections import Counter
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from ._errors import TracefsError
from ._field import Field, render_format

if TYPE_CHECKING:
    from ._task import Task

#: ``common_type`` is an unsigned short.
TRACE_EVENT_TYPE_MAX = 0xFFFF
#: Ids left free above the host's highest for the host's own later events.
#: The kernel hands every event type, built in or dynamic, the lowest free id
#: of one ida from ``__TRACE_LAST_TYPE`` up (``alloc_trace_event_type``), so
#: its static events hold the low ids and what it creates later (module
#: events, kprobes, its own user events: ``trace_add_event_call``) takes the
#: ids just above them.
HOST_HEADROOM = 1000
#: The first dynamic id when the host's ids cannot be read (no tracefs
#: mounted and none mountable): above any plausible kernel (a distribution
#: kernel with every module loaded has a few thousand events), leaving
#: 49151 ids for ours.
FIRST_ID_UNKNOWN_HOST = 0x4000


def first_dynamic_id(host_highest: int | None) -> int:
    """Where our dynamic ids start, given the host kernel's highest event id.

    Args:
        host_highest: the highest ``events/*/*/id`` of the host's tracefs, or
            None if it could not be read.

    Returns:
        ``host_highest + 1 + HOST_HEADROOM`` (a host whose events left no
        room past that gets ``TRACE_EVENT_TYPE_MAX + 1``: no ids, every
        dynamic event is refused with ENODEV, as on that host itself), or
        :data:`FIRST_ID_UNKNOWN_HOST`.
    """
    if host_highest is None:
        return FIRST_ID_UNKNOWN_HOST
    return min(host_highest + 1 + HOST_HEADROOM, TRACE_EVENT_TYPE_MAX + 1)


class Probe(enum.IntFlag):
    """Who is attached to an event (user_events' ``EVENT_STATUS_*`` bits)."""

    FTRACE = 1 << 0
    PERF = 1 << 1
    OTHER = 1 << 7


class TraceEvent:
    """An event type with a format, an id and attached probes."""

    def __init__(self, system: str, name: str, fields: tuple[Field, ...], print_fmt: str) -> None:
        self.system = system
        self.name = name
        self.fields = fields
        self.print_fmt = print_fmt
        self.id = 0  # assigned by EventTable.add
        self.probes: Counter[Probe] = Counter()
        #: The union of attached probe kinds (0 when nothing is attached); kept
        #: up to date by attach/detach because every write reads it.
        self.status = Probe(0)
        #: The trace arrays' files in which the event is enabled: its recorders.
        self.files: list[EventFile] = []
        #: ``call->refcnt``: files held by code (``trace_get_event_file`` takes
        #: one through ``trace_event_try_get_ref``); kinds that refuse deletion
        #: while it is held check it.
        self.file_refs = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.system}:{self.name} id={self.id}>"

    #: False for events flagged TRACE_EVENT_FL_IGNORE_ENABLE (ftrace's own):
    #: no ``enable``/``filter``, not in ``available_events`` nor ``set_event``.
    enableable = True
    #: ``call->class->reg``: whether probes can register at all. Its
    #: directory then has ``id`` and ``inject`` (``ftrace:raw_data`` has none).
    has_reg = True
    #: Kinds that print their own trace text (synthetic events) define
    #: ``print_trace(entry) -> str``; the rest use the generic field printer.
    print_trace: Callable[[bytes], str] | None = None

    def format_text(self) -> str:
        return render_format(self.name, self.id, self.fields, self.print_fmt)

    def attach(self, kind: Probe) -> None:
        """A probe registers (``TRACE_REG_REGISTER`` and friends)."""
        self.probes[kind] += 1
        self.status |= kind
        self.probes_changed()

    def detach(self, kind: Probe) -> None:
        """A probe unregisters."""
        assert self.probes[kind] > 0, f"{self} has no {kind!r} probe to detach"
        self.probes[kind] -= 1
        if not self.probes[kind]:
            self.status &= ~kind
        self.probes_changed()

    def probes_changed(self) -> None:
        """Hook: the set of attached probes changed (user events publish it)."""


class RecordSink(Protocol):
    """Where an enabled event's records go: one trace array."""

    def can_record(self, length: int, cpu: int) -> bool:
        """Would a record of ``length`` bytes from ``cpu`` be kept (tracing on, fits)?"""
        ...

    def record(self, entry: bytes, task: Task,
               accept: Callable[[int], bool] | None = None) -> None:
        """Store one complete trace entry written by ``task``; ``accept``: see
        ``_ringbuf.Accept``."""
        ...


class EventFile:
    """An event's state in one trace array (``struct trace_event_file``)."""

    __slots__ = ("trace_array", "event", "enabled", "was_enabled")

    def __init__(self, trace_array: RecordSink, event: TraceEvent) -> None:
        self.trace_array = trace_array
        self.event = event
        self.enabled = False
        #: EVENT_FILE_FL_WAS_ENABLED: its removal must clear the buffer.
        self.was_enabled = False

    def set_enabled(self, enabled: bool) -> None:
        """``ftrace_event_enable_disable``: attach or detach the ftrace probe."""
        if enabled == self.enabled:
            return
        if enabled:
            self.enabled = self.was_enabled = True
            self.event.files.append(self)
            self.event.attach(Probe.FTRACE)
        else:
            self.enabled = False
            self.event.files.remove(self)
            self.event.detach(Probe.FTRACE)


class EventTable:
    """Every event of one tracefs, by id and by ``system:name``, in list order."""

    def __init__(self, first_id: int = FIRST_ID_UNKNOWN_HOST) -> None:
        self._by_id: dict[int, TraceEvent] = {}
        self._by_name: dict[tuple[str, str], TraceEvent] = {}
        # trace_add_event_call() list_add()s at the head of ftrace_events, so
        # listings show the newest event first.
        self._order: list[TraceEvent] = []
        #: Called with every removed event (trace arrays drop their files).
        self.removal_listeners: list[Callable[[TraceEvent], None]] = []
        #: Called with an event about to be removed, still findable by its id:
        #: the last moment its records can be read with its format.
        self.retiring_listeners: list[Callable[[TraceEvent], None]] = []
        # The ida: ids below the high-water mark that were freed, lowest first.
        self._freed_ids: list[int] = []
        self._first_id = self._next_id = first_id

    def add(self, event: TraceEvent, fixed_id: int | None = None) -> None:
        """Give ``event`` an id and make it visible.

        Raises:
            TracefsError: EEXIST if ``system:name`` is taken, ENODEV when no id
                is left (register_trace_event() returned 0, which every dynamic
                event kind turns into -ENODEV).
        """
        key = (event.system, event.name)
        if key in self._by_name:
            raise TracefsError(errno.EEXIST, f"{event.system}:{event.name} exists")
        event.id = fixed_id if fixed_id is not None else self._alloc_id()
        self._by_id[event.id] = event
        self._by_name[key] = event
        self._order.insert(0, event)

    def remove(self, event: TraceEvent) -> None:
        for listener in self.retiring_listeners:
            listener(event)
        del self._by_id[event.id]
        if event.id >= self._first_id:
            heapq.heappush(self._freed_ids, event.id)
        del self._by_name[(event.system, event.name)]
        self._order.remove(event)
        for listener in self.removal_listeners:
            listener(event)

    def _alloc_id(self) -> int:
        """The lowest free id (``ida_alloc_range``)."""
        if self._freed_ids:
            return heapq.heappop(self._freed_ids)
        if self._next_id > TRACE_EVENT_TYPE_MAX:
            raise TracefsError(errno.ENODEV, "no trace event type id left")
        self._next_id += 1
        return self._next_id - 1

    def by_id(self, event_id: int) -> TraceEvent | None:
        return self._by_id.get(event_id)

    def live(self, event: TraceEvent) -> TraceEvent:
        """``event_file_file()``: ``event`` itself while it is still in the table.

        Files opened before an event was removed outlive it (an id may even
        have been reused since), so every use checks identity.

        Raises:
            TracefsError: ENODEV once the event has been removed.
        """
        if self._by_id.get(event.id) is not event:
            raise TracefsError(errno.ENODEV, f"{event.system}:{event.name} was removed")
        return event

    def find(self, system: str, name: str) -> TraceEvent | None:
        return self._by_name.get((system, name))

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(list(self._order))

    def systems(self) -> list[str]:
        """System names in the order their first event appears in listings."""
        return list(dict.fromkeys(e.system for e in self._order))

    def in_system(self, system: str) -> list[TraceEvent]:
        return [e for e in self._order if e.system == system]
