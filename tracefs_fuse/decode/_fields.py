"""From a record's bytes to its fields by name, following the event's format.

Rules:
  * Values are JSON's own types, so a decoded event and the same event read
    back from a JSON Lines file are equal:

    ======================================  =====================================
    field type                               value
    ======================================  =====================================
    ``u8`` .. ``s64``, ``int``, ``char``…   ``int`` (signedness from the format)
    ``char[N]``, ``__data_loc char[]``,      ``str``, up to the first NUL, UTF-8
    ``__rel_loc char[]``                     (undecodable bytes as ``\\xNN``)
    other arrays, fixed or dynamic           ``list[int]``
    ``struct …``, unknown element types      ``str``: the bytes in hex
    ======================================  =====================================

  * A field name used twice keeps both values: the second is ``name;2``.
  * A record never makes decoding fail: a field whose bytes are not in the
    record gets ``None`` and the problem is reported beside the fields.
  * Layout rules are the kernel's: ``__data_loc`` offsets count from the
    record's start, ``__rel_loc`` offsets from the end of their 4-byte slot;
    both carry ``length << 16 | offset``. A fixed array of size 0 is a
    flexible one (``char buf[]`` of ftrace's ``print``): it runs to the end.

Kernel: kernel/trace/trace_events_user.c (``user_event_validate``),
include/trace/stages/stage1_struct_define.h (``__rel_loc``), trace_output.c
(``print_event_fields``).
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

from ._format import FieldFormat

#: Element types of arrays, by name: (size, signed).
_C_TYPES: dict[str, tuple[int, bool]] = {
    "char": (1, True), "signed char": (1, True), "s8": (1, True), "__s8": (1, True),
    "unsigned char": (1, False), "u8": (1, False), "__u8": (1, False), "bool": (1, False),
    "_Bool": (1, False),
    "short": (2, True), "s16": (2, True), "__s16": (2, True),
    "unsigned short": (2, False), "u16": (2, False), "__u16": (2, False),
    "int": (4, True), "s32": (4, True), "__s32": (4, True), "pid_t": (4, True),
    "unsigned int": (4, False), "unsigned": (4, False), "u32": (4, False),
    "__u32": (4, False), "uid_t": (4, False), "gid_t": (4, False),
    "long": (8, True), "long long": (8, True), "s64": (8, True), "__s64": (8, True),
    "ssize_t": (8, True),
    "unsigned long": (8, False), "unsigned long long": (8, False), "u64": (8, False),
    "__u64": (8, False), "size_t": (8, False),
}
_INT_CODES = {(1, True): "b", (1, False): "B", (2, True): "h", (2, False): "H",
              (4, True): "i", (4, False): "I", (8, True): "q", (8, False): "Q"}
_ARRAY = re.compile(r"^(?P<element>.+?)\s*\[(?P<len>[^\]]*)\]$")
_DYNAMIC_PREFIXES = ("__data_loc ", "__rel_loc ")

#: Reads one field: (record, record length) -> (value, problem or None).
_Reader = Callable[[bytes | memoryview, int], tuple[Any, "str | None"]]


def decode_text(data: bytes | memoryview) -> str:
    """A C string's text: up to the first NUL, UTF-8, bad bytes as ``\\xNN``."""
    raw = bytes(data)
    nul = raw.find(0)
    return (raw if nul < 0 else raw[:nul]).decode("utf-8", "backslashreplace")


def _element(type_: str) -> tuple[int, bool] | None:
    return _C_TYPES.get(type_.strip())


def _array_values(data: bytes | memoryview, element: str) -> Any:
    """The value of an array of ``element`` (see the module's table)."""
    if element.strip() == "char":
        return decode_text(data)
    kind = _element(element)
    if kind is None or len(data) % kind[0]:
        return bytes(data).hex()
    code = _INT_CODES[kind]
    return list(struct.unpack(f"<{len(data) // kind[0]}{code}", data))


def _fixed_array_reader(field: FieldFormat, element: str) -> _Reader:
    start = field.offset
    stop = None if field.size == 0 else field.offset + field.size

    def read(record: bytes | memoryview, length: int) -> tuple[Any, str | None]:
        end = length if stop is None else stop
        if end > length:
            return None, f"{field.name}: {end - start} bytes at {start} past the record"
        return _array_values(record[start:end], element), None

    return read


def _dynamic_reader(field: FieldFormat, element: str, relative: bool) -> _Reader:
    slot = field.offset
    base = slot + 4 if relative else 0

    def read(record: bytes | memoryview, length: int) -> tuple[Any, str | None]:
        if slot + 4 > length:
            return None, f"{field.name}: its slot at {slot} is past the record"
        loc = int.from_bytes(record[slot:slot + 4], "little")
        start = base + (loc & 0xFFFF)
        end = start + (loc >> 16)
        if end > length:
            return None, f"{field.name}: {loc >> 16} bytes at {start} past the record"
        return _array_values(record[start:end], element), None

    return read


def _opaque_reader(field: FieldFormat) -> _Reader:
    start, end = field.offset, field.offset + field.size

    def read(record: bytes | memoryview, length: int) -> tuple[Any, str | None]:
        if end > length:
            return None, f"{field.name}: {field.size} bytes at {start} past the record"
        return bytes(record[start:end]).hex(), None

    return read


def _reader(field: FieldFormat) -> _Reader:
    for prefix in _DYNAMIC_PREFIXES:
        if field.type.startswith(prefix):
            element = field.type[len(prefix):].strip()
            array = _ARRAY.match(element)
            return _dynamic_reader(field, array["element"] if array else element,
                                   relative=prefix == "__rel_loc ")
    array = _ARRAY.match(field.type)
    if array is not None:
        return _fixed_array_reader(field, array["element"])
    return _opaque_reader(field)


def _is_scalar(field: FieldFormat) -> bool:
    return (field.size in (1, 2, 4, 8) and "[" not in field.type
            and not field.type.startswith(("struct ", *_DYNAMIC_PREFIXES)))


class FieldsDecoder:
    """Decodes the fields of one event format.

    The scalar fields are read with one precompiled ``struct`` (the common
    case: a user event's counters and ids); arrays, strings, dynamic fields
    and scalars overlapping another field each have a reader.
    """

    def __init__(self, fields: tuple[FieldFormat, ...]) -> None:
        names = _unique_names(fields)
        packed: list[int] = []
        code, pos = "<", 0
        for i in sorted((i for i, f in enumerate(fields) if _is_scalar(f)),
                        key=lambda i: fields[i].offset):
            field = fields[i]
            if field.offset >= pos:
                code += f"{field.offset - pos}x" if field.offset > pos else ""
                code += _INT_CODES[(field.size, field.signed)]
                pos = field.offset + field.size
                packed.append(i)
        self._scalars = struct.Struct(code)
        self._scalar_names = tuple(names[i] for i in packed)
        self._readers = tuple((names[i], _scalar_reader(f) if _is_scalar(f) else _reader(f))
                              for i, f in enumerate(fields) if i not in packed)
        # Values come out scalars first: put them back in the format's order
        # when that differs.
        order = tuple(names)
        self._order = order if order != self._scalar_names + tuple(
            name for name, _ in self._readers) else None

    def decode(self, record: bytes | memoryview, length: int | None = None
               ) -> tuple[dict[str, Any], str | None]:
        """The fields of one record, and what was wrong with it, if anything.

        Args:
            record: the record, common fields included.
            length: the record's length if ``record`` runs on (ring buffer
                records are rounded up to 4 bytes).
        """
        if length is None:
            length = len(record)
        if not self._readers and self._order is None and length >= self._scalars.size:
            # Only scalars, all there: the common case, kept short.
            return dict(zip(self._scalar_names, self._scalars.unpack_from(record, 0))), None
        problems: list[str] = []
        if length >= self._scalars.size:
            values = dict(zip(self._scalar_names, self._scalars.unpack_from(record, 0)))
        else:
            values = dict.fromkeys(self._scalar_names)
            problems.append(f"a record of {length} bytes is shorter than its fields")
        for name, read in self._readers:
            value, problem = read(record, length)
            values[name] = value
            if problem is not None:
                problems.append(problem)
        if self._order is not None:
            values = {name: values[name] for name in self._order}
        return values, "; ".join(problems) or None


def _unique_names(fields: tuple[FieldFormat, ...]) -> list[str]:
    """Field names, a repeated one as ``name;2``, ``name;3`` (as EventHeader's)."""
    names: list[str] = []
    for field in fields:
        name, n = field.name, 1
        while name in names:
            n += 1
            name = f"{field.name};{n}"
        names.append(name)
    return names


def _scalar_reader(field: FieldFormat) -> _Reader:
    """A scalar that overlaps another one, read on its own."""
    code = struct.Struct("<" + _INT_CODES[(field.size, field.signed)])
    start, end = field.offset, field.offset + field.size

    def read(record: bytes | memoryview, length: int) -> tuple[Any, str | None]:
        if end > length:
            return None, f"{field.name}: {field.size} bytes at {start} past the record"
        return code.unpack_from(record, start)[0], None

    return read
