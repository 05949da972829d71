"""``error_log``: the last eight command errors, with a caret under the culprit.

Rules:
  * Entries are the kernel's ``struct tracing_log_err``: where (``loc``), which
    message, the command and a caret position, stamped with ``local_clock()``
    (an injected nanosecond source) when logged. At most
    ``TRACING_LOG_ERRS_MAX`` (8) are kept: a ninth recycles the oldest.
  * The text is exactly ``tracing_err_log_seq_show``'s: ``[%5llu.%06u]`` with
    the microseconds truncated (not rounded, unlike trace time stamps), then
    ``<loc>: error: <message>``, ``  Command: <cmd>`` and the caret line.
  * Opening for writing with O_TRUNC clears the log; writes are accepted and
    ignored (``tracing_err_log_write`` returns the count).
  * The caret position is a ``u16`` in the kernel; commands longer than that
    are beyond any line a command file accepts, so it is not masked here.

Kernel: kernel/trace/trace.c (``tracing_log_err``, ``err_pos``,
``tracing_err_log_fops``), 6.12.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

import msgspec

from ._task import Task
from ._tree import File, text_file

#: TRACING_LOG_ERRS_MAX: entries kept.
TRACING_LOG_ERRS_MAX = 8
#: TRACING_LOG_LOC_MAX: ``"<loc>: error: "`` is cut to 127 characters.
TRACING_LOG_LOC_MAX = 128
#: CMD_PREFIX; the caret line is indented by its length.
CMD_PREFIX = "  Command: "
_NSEC_PER_SEC = 1_000_000_000


class LogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One ``struct tracing_log_err``."""

    ts: int
    loc: str
    message: str
    command: str
    pos: int

    def render(self) -> str:
        """``tracing_err_log_seq_show`` and ``tracing_err_log_show_pos``."""
        sec, nsec = divmod(self.ts, _NSEC_PER_SEC)
        # snprintf(err->loc, TRACING_LOG_LOC_MAX, "%s: error: ", loc)
        loc = f"{self.loc}: error: "[:TRACING_LOG_LOC_MAX - 1]
        caret = " " * (len(CMD_PREFIX) + self.pos)
        return (f"[{sec:5d}.{nsec // 1000:06d}] {loc}{self.message}\n"
                f"{CMD_PREFIX}{self.command}\n{caret}^\n")


def err_pos(command: str, part: str) -> int:
    """``err_pos``: where ``part`` first occurs in ``command``, or 0.

    The first occurrence, even when the culprit is a later one: ``foo u64 a;
    u64 b[2]`` puts the caret under the first ``u64``, as the kernel does.
    """
    return max(command.find(part), 0)


class ErrorLog:
    """The top-level trace array's error log (instances would have their own).

    Args:
        now: ``local_clock()``: nanoseconds since boot.
    """

    def __init__(self, now: Callable[[], int]) -> None:
        self._now = now
        self.entries: deque[LogEntry] = deque(maxlen=TRACING_LOG_ERRS_MAX)

    def log(self, loc: str, command: str, message: str, pos: int) -> None:
        """``tracing_log_err``: append an error, dropping the oldest of nine."""
        self.entries.append(LogEntry(ts=self._now(), loc=loc, message=message,
                                     command=command, pos=pos))

    def clear(self) -> None:
        """``clear_tracing_err_log``."""
        self.entries.clear()

    def render(self) -> str:
        return "".join(entry.render() for entry in self.entries)


def error_log_node(log: ErrorLog) -> File:
    """The ``error_log`` file (mode 0640: the kernel creates it TRACE_MODE_WRITE)."""

    def write(data: bytes, task: Task) -> int:
        return len(data)

    def truncate(task: Task) -> None:
        log.clear()

    return text_file("error_log", log.render, write, on_truncate=truncate)
