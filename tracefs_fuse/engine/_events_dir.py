"""``events/``: one directory per system and per event, and their control files.

Rules:
  * Directories exist exactly while their events do: a system directory
    appears with its first event and goes with its last (``user_events/`` only
    exists while some user event exists).
  * Files of an event that has been removed answer ENODEV, like the kernel's
    ``event_file_file()`` check, even through descriptors opened before.
  * Entry order is the kernel's getdents order: ``events/`` lists ``enable``,
    the header files, then systems; a system lists ``filter``, ``enable``, then
    events, newest first (``ftrace/`` only its events); an event lists
    ``enable filter trigger format id inject``, the files its kind has.

Kernel: kernel/trace/trace_events.c (``event_callback``, ``event_enable_read/write``,
``system_enable_read/write``, ``f_show``, ``event_id_read``), fs/tracefs/event_inode.c.
"""

from __future__ import annotations

import errno
from functools import partial
from typing import Callable, Iterator

from ._errors import TracefsError
from ._events import EventTable, TraceEvent
from ._field import KERNEL_SPACE
from ._inject import inject_node
from ._kstrto import kstrtoul_from_user
from ._page import PAGE_SIZE
from ._task import Task
from ._trace_array import TraceArray
from ._tree import TRACE_MODE_READ, TRACE_MODE_WRITE, Dir, Node, text_file

SYSTEM_FILTER_TEXT = (
    "### global filter ###\n"
    "# Use this to set filters for multiple events.\n"
    "# Only events with the given fields will be affected.\n"
    "# If no events are modified, an error message will be displayed here\n")
#: ``trigger`` of a kernel without CONFIG_HIST_TRIGGERS / snapshots.
TRIGGER_TEXT = "# Available triggers:\n# traceon traceoff stacktrace enable_event disable_event\n"


def _switch(data: bytes) -> bool:
    """A 0/1 control write (``kstrtoul_from_user``, then 0 or 1 only)."""
    value = kstrtoul_from_user(data)
    if value not in (0, 1):
        raise TracefsError(errno.EINVAL, f"expected 0 or 1, got {value}")
    return bool(value)


def _filter_string(data: bytes) -> str:
    """``event_filter_write``/``subsystem_filter_write``: the text of a filter write.

    What ``memdup_user_nul`` copies (up to a NUL), without the kernel's white
    space (0xA0 included) around it, as ``strstrip`` leaves it.

    Raises:
        TracefsError: EINVAL for a write of a page or more.
    """
    if len(data) >= PAGE_SIZE:
        raise TracefsError(errno.EINVAL, "filter writes must be shorter than a page")
    return data.split(b"\0", 1)[0].decode("latin-1").strip(KERNEL_SPACE)


def _apply_filter(filter_string: str) -> None:
    """``apply_event_filter``: only ``0`` (clear) is accepted.

    Raises:
        TracefsError: EINVAL for anything else (filter expressions are not emulated).
    """
    if filter_string != "0":
        raise TracefsError(errno.EINVAL, "event filters are not emulated (only '0' clears)")


class EventsDir:
    """Builds the ``events/`` tree of one trace array."""

    def __init__(self, events: EventTable, trace_array: TraceArray,
                 header_page: Callable[[], str], header_event: str) -> None:
        self.events = events
        self.trace_array = trace_array
        self.header_page = header_page
        self.header_event = header_event

    def node(self) -> Dir:
        return Dir("events", self._top_entries)

    def _top_entries(self) -> Iterator[Node]:
        tr = self.trace_array

        def enable_all(data: bytes, task: Task) -> int:
            tr.set_clr_event(_switch(data))
            return len(data)

        yield text_file("enable", lambda: tr.enable_state(self.events) + "\n", enable_all)
        yield text_file("header_page", self.header_page)
        yield text_file("header_event", lambda: self.header_event)
        for system in self.events.systems():
            yield Dir(system, partial(self._system_entries, system))

    def _system_entries(self, system: str) -> Iterator[Node]:
        tr = self.trace_array
        members = self.events.in_system(system)
        # event_subsystem_dir(): "ftrace only has directories no files".
        if system != "ftrace":
            def enable_system(data: bytes, task: Task) -> int:
                tr.set_clr_event(_switch(data), system=system)
                return len(data)

            def filter_system(data: bytes, task: Task) -> int:
                _apply_filter(_filter_string(data))
                return len(data)

            yield text_file("filter", lambda: SYSTEM_FILTER_TEXT, filter_system)
            yield text_file("enable", lambda: tr.enable_state(self.events.in_system(system)) + "\n",
                            enable_system)
        for event in members:
            yield Dir(event.name, partial(self._event_entries, event))

    def _event_entries(self, event: TraceEvent) -> Iterator[Node]:
        tr = self.trace_array
        live = self.events.live

        def enable_read() -> str:
            return "1\n" if tr.enabled(live(event)) else "0\n"

        def enable_write(data: bytes, task: Task) -> int:
            on = _switch(data)
            tr.set_enabled(live(event), on)
            return len(data)

        def filter_write(data: bytes, task: Task) -> int:
            filter_string = _filter_string(data)
            live(event)
            _apply_filter(filter_string)
            return len(data)

        # event_callback(): events that can be enabled have every file;
        # ftrace's own get format, print a trigger too ("with the exception
        # of the print event"), and those with a reg (print) id and inject.
        if event.enableable:
            yield text_file("enable", enable_read, enable_write)
            yield text_file("filter", lambda: (live(event), "none\n")[1], filter_write)
        if event.enableable or event.name == "print":
            yield text_file("trigger", lambda: (live(event), TRIGGER_TEXT)[1],
                            mode=TRACE_MODE_WRITE)
        yield text_file("format", lambda: live(event).format_text(), mode=TRACE_MODE_READ)
        if event.has_reg:
            yield text_file("id", lambda: f"{live(event).id}\n")
            yield inject_node(event, tr)
