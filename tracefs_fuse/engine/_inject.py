"""``events/<system>/<event>/inject``: write ``field=value ...`` to record an event.

Rules:
  * The parser is ``trace_events_inject.c``'s, quirks included: a field name
    is ``[A-Za-z0-9_]+`` looked up among the event's fields (last defined
    first), then ftrace's generic fields, then the common fields (so
    ``common_pid=1`` works); a number starts with a digit or ``-``, runs over
    alphanumerics and is parsed by ``kstrtoll``/``kstrtoull`` base 0 (ERANGE
    when it overflows); a string is quoted with ``'`` or ``"``, a backslash
    only hides the next character from the quote search (it stays in the
    string), and must be shorter than 256 bytes. Unnamed fields stay zero.
  * The record is built the kernel's way: as long as the furthest fixed
    field plus one NUL byte, dynamic strings appended after it (each with
    its NUL) and located by ``(len << 16) | offset`` (``__rel_loc``: offset
    from the end of the field); the header is the writer's (type, 0, 0, pid).
  * The event need not be enabled: injection reserves directly in the trace
    array's buffer. When tracing is off, the record does not fit or the
    writer's CPU is outside ``tracing_cpumask``, nothing is recorded and the
    write still succeeds, as in the kernel.
  * Writes of a page or more are EINVAL; reads are EPERM; the file (mode
    0200) exists for every event with a ``reg``, as ``id`` does: every event
    that can be enabled, and ``ftrace:print`` (``FTRACE_ENTRY_REG``), whose
    injected record is its header, ``ip`` and the NUL (``buf`` has size 0,
    so a string for it is cut to nothing).

Caveats (deliberate deviations):
  * ``comm="x"`` / ``COMM="x"`` is EINVAL. The kernel accepts it and stores a
    kernel pointer over the record's first eight bytes, its header.

Kernel: kernel/trace/trace_events_inject.c, trace_events_filter.c
(``filter_assign_type``), trace_events.c (``trace_find_event_field``), 6.12.
"""

from __future__ import annotations

import errno

import msgspec

from ._errors import TracefsError
from ._events import TraceEvent
from ._field import COMMON_FIELDS, KERNEL_ALNUM, KERNEL_DIGITS, KERNEL_SPACE, TRACE_ENTRY, Field
from ._kstrto import kstrtoll, kstrtoull
from ._task import Task
from ._trace_array import TraceArray
from ._tree import File, OpenFile
from ._filter_type import FilterType, filter_assign_type

#: inject is write-only for its owner.
INJECT_MODE = 0o200
#: ``cnt >= PAGE_SIZE`` is refused.
PAGE_SIZE = 4096
#: MAX_FILTER_STR_VAL: a quoted string must be shorter.
MAX_FILTER_STR_VAL = 256
_SPACE = frozenset(KERNEL_SPACE)


class InjectField(msgspec.Struct, frozen=True):
    """What the parser needs of a field: where, how big, how to store."""

    name: str
    offset: int
    size: int
    is_signed: bool
    filter_type: FilterType


def _from_field(field: Field) -> InjectField:
    return InjectField(field.name, field.offset, field.size, field.is_signed,
                       filter_assign_type(field.type))


# trace_define_generic_fields(): offset 0, size 0, is_signed_type(type): the
# int fields are signed, the char * ones are not (so a number for them is
# read by kstrtoull, and a size of 0 then refuses it).
_GENERIC_FIELDS = tuple(InjectField(name, 0, 0, type_ == "int", kind) for type_, name, kind in (
    ("int", "CPU", FilterType.CPU), ("int", "cpu", FilterType.CPU),
    ("int", "common_cpu", FilterType.CPU),
    ("char *", "COMM", FilterType.COMM), ("char *", "comm", FilterType.COMM),
    ("char *", "stacktrace", FilterType.STACKTRACE),
    ("char *", "STACKTRACE", FilterType.STACKTRACE)))
_COMMON_FIELDS = tuple(_from_field(f) for f in COMMON_FIELDS)


def find_field(event: TraceEvent, name: str) -> InjectField | None:
    """``trace_find_event_field``: the event's own (newest first), generic, common."""
    for field in reversed(event.fields):  # list_add() puts later fields first
        if field.name == name:
            return _from_field(field)
    for candidate in _GENERIC_FIELDS + _COMMON_FIELDS:
        if candidate.name == name:
            return candidate
    return None


def _parse_field(text: str, pos: int, event: TraceEvent) -> tuple[InjectField, int | str, int]:
    """``parse_field`` at ``pos``: the field, its value, and where parsing stopped.

    Raises:
        TracefsError: EINVAL for malformed text, ENOENT for an unknown field,
            ERANGE for a number that does not fit 64 bits.
    """
    i = pos
    while i < len(text) and text[i] in _SPACE:
        i += 1
    start = i
    while i < len(text) and (text[i] in KERNEL_ALNUM or text[i] == "_"):
        i += 1
    if i == start:
        raise TracefsError(errno.EINVAL, "no field name")
    field = find_field(event, text[start:i])
    if field is None:
        raise TracefsError(errno.ENOENT, f"no field {text[start:i]!r}")
    while i < len(text) and text[i] in _SPACE:
        i += 1
    if text[i:i + 1] != "=":
        raise TracefsError(errno.EINVAL, "expected '='")
    i += 1
    while i < len(text) and text[i] in _SPACE:
        i += 1
    start = i
    first = text[i:i + 1]
    if first and (first in KERNEL_DIGITS or first == "-"):
        if field.filter_type.is_string:
            raise TracefsError(errno.EINVAL, f"{field.name} takes a string")
        if first == "-":
            i += 1
        while i < len(text) and text[i] in KERNEL_ALNUM:  # "We allow 0xDEADBEEF"
            i += 1
        if i < len(text) and text[i] not in _SPACE:
            raise TracefsError(errno.EINVAL, "junk after a number")
        number = text[start:i]
        value = kstrtoll(number, 0) if field.is_signed else kstrtoull(number, 0)
        return field, value, i
    if first in ("'", '"'):
        if not field.filter_type.is_string:
            raise TracefsError(errno.EINVAL, f"{field.name} takes a number")
        i += 1
        while i < len(text):
            if text[i] == "\\" and i + 1 < len(text):
                i += 2
                continue
            if text[i] == first:
                break
            i += 1
        if i >= len(text):
            raise TracefsError(errno.EINVAL, "unterminated string")
        string = text[start + 1:i]
        if len(string) >= MAX_FILTER_STR_VAL:
            raise TracefsError(errno.EINVAL, "string too long")
        return field, string, i + 1
    raise TracefsError(errno.EINVAL, "expected a number or a quoted string")


def _entry_size(event: TraceEvent) -> int:
    """``trace_get_entry_size``: the end of the furthest field (common ones aside)."""
    return max((f.offset + f.size for f in event.fields), default=0)


def parse_entry(event: TraceEvent, text: str, task: Task) -> bytes:
    """``parse_entry``: the record ``text`` describes.

    Raises:
        TracefsError: EINVAL, ENOENT or ERANGE as :func:`_parse_field`; EINVAL
            for a number into a field that is not 1, 2, 4 or 8 bytes.
    """
    fixed = _entry_size(event)
    # kzalloc(entry_size + 1): "We need an extra '\0' at the end." The header
    # and common fields are written even when that is shorter than they are
    # (an event without fields): kmalloc() never returns less than 8 bytes.
    size = fixed + 1
    entry = bytearray(max(size, TRACE_ENTRY.size))
    for field in event.fields:
        kind = filter_assign_type(field.type)
        if kind in (FilterType.DYN_STRING, FilterType.RDYN_STRING):
            loc = fixed & 0xFFFF
            if kind is FilterType.RDYN_STRING:
                loc -= field.offset + field.size
            entry[field.offset:field.offset + 4] = (loc & 0xFFFFFFFF).to_bytes(4, "little")
    entry[:TRACE_ENTRY.size] = TRACE_ENTRY.pack(event.id, 0, 0, task.pid)
    pos = 0
    while pos < len(text):
        parsed, value, pos = _parse_field(text, pos, event)
        _store(entry, parsed, value)
    # Only entry_size + 1 bytes (and the strings appended after) are recorded.
    return bytes(entry[:size]) if size < TRACE_ENTRY.size else bytes(entry)


def _store(entry: bytearray, field: InjectField, value: int | str) -> None:
    at = field.offset
    if isinstance(value, str):
        raw = value.encode("latin-1")
        kind = field.filter_type
        if kind is FilterType.STATIC_STRING:
            if field.size:  # strscpy(dst, s, size): size - 1 bytes and a NUL
                text = raw[:field.size - 1] + b"\0"
                entry[at:at + len(text)] = text
        elif kind in (FilterType.DYN_STRING, FilterType.RDYN_STRING):
            loc = len(entry) & 0xFFFF
            entry += raw + b"\0"
            if kind is FilterType.RDYN_STRING:
                loc -= at + field.size
            entry[at:at + 4] = (((len(raw) + 1) << 16 | loc) & 0xFFFFFFFF).to_bytes(4, "little")
        else:
            raise TracefsError(errno.EINVAL, f"{field.name} cannot be injected")
        return
    if field.size not in (1, 2, 4, 8):
        raise TracefsError(errno.EINVAL, f"{field.name} is {field.size} bytes")
    entry[at:at + field.size] = (value & ((1 << (8 * field.size)) - 1)).to_bytes(
        field.size, "little")


def _c_text(data: bytes) -> str:
    """``memdup_user_nul`` then ``strim``: the text up to a NUL, trimmed."""
    text = data.split(b"\0", 1)[0].decode("latin-1")
    return text.strip("".join(_SPACE))


class InjectFile(OpenFile):
    """An open ``inject``: write-only (a read is EPERM)."""

    def __init__(self, event: TraceEvent, trace_array: TraceArray) -> None:
        self.event = event
        self.trace_array = trace_array

    def read(self, offset: int, size: int) -> bytes:
        raise TracefsError(errno.EPERM, "inject cannot be read")

    def write(self, data: bytes, offset: int, task: Task) -> int:
        """``event_inject_write``.

        Raises:
            TracefsError: EINVAL for a page or more, ENODEV once the event is
                gone, else what :func:`parse_entry` raises.
        """
        if len(data) >= PAGE_SIZE:
            raise TracefsError(errno.EINVAL, "inject writes must be shorter than a page")
        text = _c_text(data)
        tr = self.trace_array
        entry = parse_entry(tr.events.live(self.event), text, task)
        if len(entry) < TRACE_ENTRY.size:
            # The reservation (rounded up to 4 bytes) is shorter than the
            # header trace_event_setup() writes into it: what stays is that
            # header under the bytes copied over it.
            setup = TRACE_ENTRY.pack(self.event.id, 0, 0, task.pid)
            entry += setup[len(entry):(len(entry) + 3) & ~3]
        if tr.can_record(len(entry), task.cpu):
            tr.record(entry, task)
        return len(data)


def inject_node(event: TraceEvent, trace_array: TraceArray) -> File:
    return File("inject", INJECT_MODE, lambda flags, task: InjectFile(event, trace_array))
