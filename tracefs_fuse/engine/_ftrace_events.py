"""ftrace's own events behind ``trace_marker`` and ``trace_marker_raw``.

Rules:
  * ``ftrace:print`` and ``ftrace:raw_data`` keep the kernel's fixed type ids
    and formats (byte-identical to this machine's 6.18 tracefs) and cannot be
    enabled: they record whenever their marker file is written and tracing is on.
  * Marker writes follow ``tracing_mark_write`` / ``tracing_mark_raw_write``:
    EBADF while tracing is off, text truncated to what fits one sub-buffer and
    newline-terminated, raw payloads of 4 to max bytes or EINVAL.

Kernel: kernel/trace/trace_entries.h (``FTRACE_ENTRY(print)``, ``raw_data``),
kernel/trace/trace.c.
"""

from __future__ import annotations

import errno
import struct

from ._errors import TracefsError
from ._events import TraceEvent
from ._field import TRACE_ENTRY, Field
from ._task import Task
from ._trace_array import TraceArray

# enum trace_type (kernel/trace/trace.h) on 6.18: TRACE_PRINT = 5, TRACE_RAW_DATA = 19.
TRACE_PRINT = 5
TRACE_RAW_DATA = 19

#: Markers are recorded with preemption disabled: their preempt count is 1.
_MARKER_PREEMPT_COUNT = 1


class FtraceEvent(TraceEvent):
    """An event ftrace defines itself (``TRACE_EVENT_FL_IGNORE_ENABLE``)."""

    enableable = False

    def __init__(self, name: str, fields: tuple[Field, ...], print_fmt: str, *,
                 has_reg: bool) -> None:
        super().__init__("ftrace", name, fields, print_fmt)
        self.has_reg = has_reg


def print_event() -> FtraceEvent:
    # struct print_entry { struct trace_entry ent; unsigned long ip; char buf[]; };
    return FtraceEvent("print", (
        Field(type="unsigned long", name="ip", offset=8, size=8, is_signed=False),
        Field(type="char[]", name="buf", offset=16, size=0, is_signed=False),
    ), '"%ps: %s", (void *)REC->ip, REC->buf', has_reg=True)  # FTRACE_ENTRY_REG


def raw_data_event() -> FtraceEvent:
    # struct raw_data_entry { struct trace_entry ent; unsigned int id; char buf[]; };
    return FtraceEvent("raw_data", (
        Field(type="unsigned int", name="id", offset=8, size=4, is_signed=False),
        Field(type="char[]", name="buf", offset=12, size=0, is_signed=False),
    ), '"id:%04x %08x", REC->id, (int)REC->buf[0]', has_reg=False)


_PRINT_HEAD = struct.Struct("<Q")  # unsigned long ip


def mark_write(tr: TraceArray, data: bytes, task: Task, ip: int) -> int:
    """``tracing_mark_write``: record text as ``ftrace:print``; returns bytes taken.

    Raises:
        TracefsError: EBADF while tracing is off.
    """
    if not tr.options["markers"]:
        raise TracefsError(errno.EINVAL, "the markers option is off")
    meta = TRACE_ENTRY.size + _PRINT_HEAD.size + 2  # room for "\n" and "\0"
    count = min(len(data), tr.max_entry_size - meta)
    if not tr.can_record(count + meta, task.cpu):
        raise TracefsError(errno.EBADF, "tracing is off")
    text = data[:count]
    tail = b"\0\0" if text.endswith(b"\n") else b"\n\0"
    entry = (TRACE_ENTRY.pack(TRACE_PRINT, 0, _MARKER_PREEMPT_COUNT, task.pid)
             + _PRINT_HEAD.pack(ip) + text + tail)
    tr.record(entry, task)
    return count


def mark_raw_write(tr: TraceArray, data: bytes, task: Task) -> int:
    """``tracing_mark_raw_write``: ``[u32 id][payload]`` as ``ftrace:raw_data``.

    Raises:
        TracefsError: EINVAL for fewer than 4 bytes or more than fits a
            sub-buffer, EBADF while tracing is off.
    """
    if not tr.options["markers"]:
        raise TracefsError(errno.EINVAL, "the markers option is off")
    if len(data) < 4 or len(data) > tr.max_entry_size - TRACE_ENTRY.size:
        raise TracefsError(errno.EINVAL, f"raw marker of {len(data)} bytes")
    if not tr.can_record(TRACE_ENTRY.size + len(data), task.cpu):
        raise TracefsError(errno.EBADF, "tracing is off")
    tr.record(TRACE_ENTRY.pack(TRACE_RAW_DATA, 0, _MARKER_PREEMPT_COUNT, task.pid) + data, task)
    return len(data)
