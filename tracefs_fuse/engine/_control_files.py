"""Top-level control files about events: ``set_event``, ``available_events``, ``tracing_on``.

Rules:
  * ``set_event`` takes one word per write(), like the kernel's
    ``trace_parser``: white space or a NUL ends it (and is consumed with it),
    the rest of the buffer is left for the caller to write again. The word is
    ``[!]system:event`` (an empty or ``*`` side matches all) or ``[!]name``
    (a system or an event of that name; ``*`` alone is no wildcard and
    matches nothing). Opening the file with O_TRUNC disables every event
    first.
  * Listings follow the event list order (newest first) and skip ftrace's own
    events, which cannot be enabled.

Kernel: kernel/trace/trace_events.c (``ftrace_event_write``, ``t_show``,
``ftrace_set_clr_event``), kernel/trace/trace.c (``rb_simple_write``),
kernel/trace/trace.c (``trace_get_user``).
"""

from __future__ import annotations

import errno

from ._errors import TracefsError
from ._events import EventTable
from ._field import KERNEL_SPACE
from ._kstrto import kstrtoul_from_user
from ._task import Task
from ._trace_array import TraceArray
from ._tree import File, text_file

#: EVENT_BUF_SIZE: the longest set_event token.
_EVENT_BUF_SIZE = 127


def render_available_events(events: EventTable) -> str:
    return "".join(f"{e.system}:{e.name}\n" for e in events if e.enableable)


def render_set_event(tr: TraceArray) -> str:
    return "".join(f"{e.system}:{e.name}\n" for e in tr.enabled_events())


def _next_token(data: bytes) -> tuple[str, int]:
    """``trace_get_user``: skip leading space, take one word; bytes consumed.

    Raises:
        TracefsError: EINVAL for a word longer than the parser's buffer.
    """
    text = data.decode("latin-1")
    pos = 0
    while pos < len(text) and text[pos] in KERNEL_SPACE:
        pos += 1
    start = pos
    # "while (cnt && !isspace(ch) && ch)": a NUL ends the word too.
    while pos < len(text) and text[pos] not in KERNEL_SPACE and text[pos] != "\0":
        pos += 1
    token = text[start:pos]
    if len(token) > _EVENT_BUF_SIZE:
        raise TracefsError(errno.EINVAL, "event name too long")
    if pos < len(text):
        pos += 1  # the separator that ended the word is consumed too
    return token, pos


def set_event_write(tr: TraceArray, data: bytes) -> int:
    """``ftrace_event_write``: enable or (``!``) disable what one token names.

    Raises:
        TracefsError: EINVAL if the token matches no event.
    """
    token, consumed = _next_token(data)
    if not token:
        return consumed
    enable = not token.startswith("!")
    if not enable:
        token = token[1:]
    # ftrace_set_clr_event(): '*' (or nothing) is a wildcard only beside a
    # colon. A lone '*' would be one too with ":mod:<module>", which a
    # tracefs without modules refuses like any unmatched word.
    if ":" in token:
        system, name = token.split(":", 1)
        tr.set_clr_event(enable, system=None if system in ("", "*") else system,
                         name=None if name in ("", "*") else name)
    else:
        tr.set_clr_event(enable, match=token)
    return consumed


def set_event_node(tr: TraceArray) -> File:
    def write(data: bytes, task: Task) -> int:
        return set_event_write(tr, data)

    return text_file("set_event", lambda: render_set_event(tr), write,
                     on_truncate=lambda task: tr.clear_events())


def tracing_on_node(tr: TraceArray) -> File:
    """``rb_simple_write``: any non-zero number turns recording on."""

    def write(data: bytes, task: Task) -> int:
        tr.set_tracing_on(kstrtoul_from_user(data) != 0)
        return len(data)

    return text_file("tracing_on", lambda: f"{int(tr.tracing_on)}\n", write)
