"""The kernel's generic event printer (``print_event_fields``) and its line buffer.

Rules:
  * Text is built in a :class:`TraceSeq`, the kernel's ``struct trace_seq``:
    every write goes in whole or not at all, and the first that does not fit
    marks the sequence full and turns every later write into a no-op. So an
    over-long line is cut exactly where the kernel cuts it, piece by piece.
  * Fields print by their filter type (``filter_assign_type`` of the type
    string) and size, in definition order: ``name:`` then `` field=value``
    per field and a newline; an event without fields prints
    ``name:No fields found``. User events have printed this way since 6.4.
  * Text is ``str`` decoded as latin-1: record bytes come out unchanged, the
    non-printable ones included, as the kernel prints them.
  * This is 6.18: 8-byte values go through ``%pS``, which prints a kernel
    symbol for an address inside the kernel; we have no symbol table, so such
    values print as hex like any other. 6.16 also prefixes 4-byte fields named
    ``caller_offs``/``parent_offs`` with a symbol; not emulated either. The
    escaping of non-printable dynamic strings came after 6.18 (6.19) and is
    not done here (measured: 6.18 prints the raw bytes).
  * :class:`FieldsPrinter` is the same printer compiled once per event: one
    ``struct`` unpack and one ``%`` format per record. It returns the pieces
    joined, and callers use it only where the whole text fits: there every
    piece fits, so the text is what the piecewise printer writes
    (``tests/engine/test_print_fields.py`` checks that the two agree).

Kernel: kernel/trace/trace_output.c (``print_event_fields``, ``print_fields``,
``print_array``), kernel/trace/trace_seq.c, lib/seq_buf.c,
kernel/trace/trace_events_filter.c (``filter_assign_type``), lib/ctype.c.
"""

from __future__ import annotations

import operator
import struct
from typing import Callable

from ._field import Field
from ._filter_type import FilterType, filter_assign_type

#: ``TRACE_SEQ_BUFFER_SIZE`` on 64-bit: 8192 minus ``struct seq_buf`` (24),
#: ``readpos`` (8) and ``full`` (4). A write fits while the text stays below
#: it (room for the NUL); measured on 6.18: cut lines are 8153-8155 bytes.
TRACE_SEQ_BUFFER_SIZE = 8156

_S32 = struct.Struct("<i")


class TraceSeq:
    """``struct trace_seq``: a bounded text buffer with all-or-nothing writes."""

    __slots__ = ("_parts", "len", "full")

    def __init__(self) -> None:
        self._parts: list[str] = []
        #: Characters held (``seq.len``).
        self.len = 0
        #: A write did not fit (``trace_seq.full``): later writes are dropped.
        self.full = False

    def puts(self, text: str) -> None:
        """``trace_seq_printf``/``puts``/``putc``: all of ``text``, or nothing and full."""
        if self.full:
            return
        if self.len + len(text) < TRACE_SEQ_BUFFER_SIZE:
            self._parts.append(text)
            self.len += len(text)
        else:
            self.full = True

    def truncate(self, length: int) -> None:
        """Drop everything after ``length`` characters (``seq.len = save_len``)."""
        text = self.text()[:length]
        self._parts = [text]
        self.len = len(text)

    def text(self) -> str:
        return "".join(self._parts)


def isprint(byte: int) -> bool:
    """The kernel's ``isprint`` (lib/ctype.c): ASCII 0x20-0x7e and Latin-1 0xa0-0xff."""
    return 0x20 <= byte <= 0x7E or byte >= 0xA0


def _cstr(data: bytes, start: int, limit: int) -> str:
    """``%.*s``: at most ``limit`` bytes from ``start``, stopping at a NUL.

    A negative precision prints nothing (vsprintf clamps it to 0).
    """
    if limit <= 0:
        return ""
    chunk = data[start:start + limit]
    nul = chunk.find(0)
    return (chunk if nul < 0 else chunk[:nul]).decode("latin-1")


def _dyn_loc(data: bytes, field: Field, relative: bool) -> tuple[int, int]:
    """A ``__data_loc``/``__rel_loc`` word: (offset from the entry, signed length).

    The kernel reads it as an ``int``: the length is ``loc >> 16`` with the
    sign, the offset ``loc & 0xffff``; a relative one counts from the end of
    the word.
    """
    (loc,) = _S32.unpack_from(data, field.offset)
    offset = loc & 0xFFFF
    if relative:
        offset += field.offset + 4
    return offset, loc >> 16


def _print_array(seq: TraceSeq, data: bytes, field: Field, relative: bool) -> None:
    """``print_array``: a dynamic array as comma-separated hex bytes."""
    offset, length = _dyn_loc(data, field, relative)
    if offset + length > len(data):
        seq.puts("<OVERFLOW>")
        return
    for i, byte in enumerate(data[offset:offset + max(length, 0)]):
        if i:
            seq.puts(",")
        seq.puts(f"{byte:02x}")


def _print_number(seq: TraceSeq, data: bytes, field: Field) -> None:
    """``FILTER_OTHER``/``FILTER_CPU`` by size: 1, 2, 4 (or an array), 8 bytes."""
    raw = data[field.offset:field.offset + field.size]
    value = int.from_bytes(raw, "little")
    if field.size == 1:
        if isprint(value):
            seq.puts(f"'{chr(value)}'")
        seq.puts(f"({value})")
    elif field.size == 2:
        # Both conversions get the unsigned short, promoted to int.
        seq.puts(f"0x{value:x} ({value})")
    elif field.size == 4:
        # "dynamic array info is 4 bytes"
        if "__data_loc" in field.type:
            _print_array(seq, data, field, relative=False)
        elif "__rel_loc" in field.type:
            _print_array(seq, data, field, relative=True)
        else:
            seq.puts(f"0x{value:x} ({int.from_bytes(raw, 'little', signed=True)})")
    elif field.size == 8:
        # "%pS (%lld)": %pS of an address without a symbol is its hex value.
        seq.puts(f"0x{value:x} ({int.from_bytes(raw, 'little', signed=True)})")
    else:
        seq.puts("<INVALID-SIZE>")


def print_fields(seq: TraceSeq, fields: tuple[Field, ...], data: bytes) -> None:
    """``print_fields``: `` name=value`` for each field, then a newline.

    Args:
        seq: where the text goes.
        fields: the event's own fields (not the common ones), in order.
        data: the whole entry as the buffer returns it (``iter->ent``, padded
            to the event's length, which is ``iter->ent_size``).
    """
    ent_size = len(data)
    for field in fields:
        seq.puts(f" {field.name}=")
        if field.offset + field.size > ent_size:
            seq.puts("<OVERFLOW>")
            continue
        kind = filter_assign_type(field.type)
        if kind is FilterType.STATIC_STRING:
            seq.puts(_cstr(data, field.offset, field.size))
        elif kind in (FilterType.DYN_STRING, FilterType.RDYN_STRING):
            offset, length = _dyn_loc(data, field, kind is FilterType.RDYN_STRING)
            if offset + length > ent_size:
                seq.puts("<OVERFLOW>")
            else:
                seq.puts(_cstr(data, offset, length))
        elif kind is FilterType.PTR_STRING:
            # A pointer the kernel cannot read as a kernel string: "(0x%px)".
            (pointer,) = struct.unpack_from("<Q", data, field.offset)
            seq.puts(f"(0x{pointer:016x})")
        elif kind is FilterType.OTHER:
            _print_number(seq, data, field)
        else:
            seq.puts("<INVALID-TYPE>")
    seq.puts("\n")


def print_event_fields(seq: TraceSeq, name: str, fields: tuple[Field, ...], data: bytes) -> None:
    """``print_event_fields``: ``name:`` and the fields, or ``name:No fields found``."""
    seq.puts(f"{name}:")
    if fields:
        print_fields(seq, fields, data)
    else:
        seq.puts("No fields found\n")


#: A 1-byte value as :func:`_print_number` prints it: ``'c'`` if printable, then ``(v)``.
_BYTE_TEXT = tuple((f"'{chr(v)}'" if isprint(v) else "") + f"({v})" for v in range(256))
#: Sizes of the numbers a :class:`FieldsPrinter` unpacks: their (unsigned, signed) codes.
_NUMBER_CODES = {2: ("H", "h"), 4: ("I", "i"), 8: ("Q", "q")}
_PTR = struct.Struct("<Q")

#: How :class:`FieldsPrinter` gets one field's value: fixed text, a function
#: of the record, or (None) a number from its ``struct`` unpack.
_Value = str | Callable[[bytes], str] | None


def _compiled_value(field: Field) -> _Value:
    """:func:`print_fields`' choice for one field, made once (records long enough)."""
    kind = filter_assign_type(field.type)
    offset, size = field.offset, field.size
    if kind is FilterType.STATIC_STRING:
        return lambda data: _cstr(data, offset, size)
    if kind in (FilterType.DYN_STRING, FilterType.RDYN_STRING):
        relative = kind is FilterType.RDYN_STRING

        def dyn_string(data: bytes) -> str:
            start, length = _dyn_loc(data, field, relative)
            return "<OVERFLOW>" if start + length > len(data) else _cstr(data, start, length)

        return dyn_string
    if kind is FilterType.PTR_STRING:
        return lambda data: f"(0x{_PTR.unpack_from(data, offset)[0]:016x})"
    if kind is not FilterType.OTHER:
        return "<INVALID-TYPE>"
    if size == 1:
        return lambda data: _BYTE_TEXT[data[offset]]
    if size == 4 and ("__data_loc" in field.type or "__rel_loc" in field.type):
        relative = "__data_loc" not in field.type

        def dyn_array(data: bytes) -> str:
            start, length = _dyn_loc(data, field, relative)
            if start + length > len(data):
                return "<OVERFLOW>"
            return data[start:start + max(length, 0)].hex(",")

        return dyn_array
    return None if size in _NUMBER_CODES else "<INVALID-SIZE>"


class FieldsPrinter:
    """:func:`print_event_fields` for one event, compiled: the whole text at once.

    The numeric fields are read by two ``struct`` formats (the unsigned and
    the signed view of the same bytes), strings and dynamic arrays by a
    function each, and one ``%`` format puts the line together.

    Args:
        name: the event's name.
        fields: its own fields, in definition order.
    """

    __slots__ = ("_end", "_unsigned", "_signed", "_functions", "_format", "_order")

    def __init__(self, name: str, fields: tuple[Field, ...]) -> None:
        #: Records shorter than this overflow some field: left to print_fields.
        self._end = max((f.offset + f.size for f in fields), default=0)
        values = [_compiled_value(f) for f in fields]
        numbers = sorted((f for f, v in zip(fields, values) if v is None),
                         key=lambda f: f.offset)
        if any(a.offset + a.size > b.offset for a, b in zip(numbers, numbers[1:])):
            # Overlapping fields cannot share one struct: each reads its own.
            values = [self._number_function(f) if v is None else v
                      for f, v in zip(fields, values)]
            numbers = []
        unsigned = signed = "<"
        end = 0
        for field in numbers:
            codes = _NUMBER_CODES[field.size]
            unsigned += f"{field.offset - end}x{codes[0]}"
            signed += f"{field.offset - end}x{codes[1]}"
            end = field.offset + field.size
        self._unsigned = struct.Struct(unsigned).unpack_from
        self._signed = struct.Struct(signed).unpack_from
        # The format's arguments: every unsigned value, every signed value,
        # then the functions' texts.
        slot = {field.offset: i for i, field in enumerate(numbers)}
        functions: list[Callable[[bytes], str]] = []
        text = _percent_escaped(f"{name}:")
        order: list[int] = []
        for field, value in zip(fields, values):
            text += _percent_escaped(f" {field.name}=")
            if isinstance(value, str):
                text += value
            elif value is None:
                # Both conversions of a 2-byte value print the unsigned short.
                i = slot[field.offset]
                text += "0x%x (%d)"
                order += (i, i if field.size == 2 else len(numbers) + i)
            else:
                text += "%s"
                order.append(2 * len(numbers) + len(functions))
                functions.append(value)
        self._functions = tuple(functions)
        self._format = text + "\n" if fields else text + "No fields found\n"
        self._order = operator.itemgetter(*order) if len(order) > 1 else (
            lambda args: tuple(args[i] for i in order))

    @staticmethod
    def _number_function(field: Field) -> Callable[[bytes], str]:
        offset, size = field.offset, field.size

        def number(data: bytes) -> str:
            raw = data[offset:offset + size]
            unsigned = int.from_bytes(raw, "little")
            value = unsigned if size == 2 else int.from_bytes(raw, "little", signed=True)
            return f"0x{unsigned:x} ({value})"

        return number

    def text(self, data: bytes) -> str | None:
        """What :func:`print_event_fields` writes for ``data``, joined.

        Returns:
            None for a record too short for the fields (some print
            ``<OVERFLOW>``): :func:`print_event_fields` prints those.
        """
        if len(data) < self._end:
            return None
        args = self._unsigned(data) + self._signed(data)
        if self._functions:
            args += tuple([function(data) for function in self._functions])
        return self._format % self._order(args)


def _percent_escaped(text: str) -> str:
    return text.replace("%", "%%")
