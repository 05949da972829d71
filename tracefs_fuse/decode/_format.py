"""Event formats: the ``events/<system>/<name>/format`` file, parsed.

Rules:
  * The input is the text the kernel (or our engine) prints, nothing else: a
    decoder built from it reads records of any tracefs, ours or a real
    kernel's, the way libtraceevent does.
  * A field's declaration keeps the kernel's spelling; only ``f_show``'s
    "smart" array rendering is undone (``char msg[]`` with size 16 is the type
    ``char[16]`` again, so that every type says how to read its bytes).
  * Malformed text raises :class:`FormatError`; nothing else escapes.

Kernel: kernel/trace/trace_events.c (``f_show``, ``f_start``).
"""

from __future__ import annotations

import re

import msgspec

#: ``field:<decl>;\toffset:<n>;\tsize:<n>;\tsigned:<0|1>;`` (header_page puts a
#: space after ``field:``; accept it).
_FIELD_LINE = re.compile(
    r"\tfield: ?(?P<decl>[^;]+);\toffset:(?P<offset>\d+);\tsize:(?P<size>\d+);"
    r"\tsigned:(?P<signed>[01]);")
_ARRAY_SUFFIX = re.compile(r"^(?P<name>[^\[]+)\[(?P<len>[^\]]*)\]$")


class FormatError(ValueError):
    """The text is not an event format file."""


class FieldFormat(msgspec.Struct, frozen=True, kw_only=True):
    """One ``field:`` line of a format file.

    Attributes:
        type: the C type, arrays written as ``char[16]``; dynamic fields keep
            their ``__data_loc``/``__rel_loc`` prefix (``__data_loc char[]``).
        name: the field name.
        offset: byte offset in the record (common fields included).
        size: bytes the field takes in the record (4 for a dynamic field).
        signed: the kernel's ``signed:`` flag.
    """

    type: str
    name: str
    offset: int
    size: int
    signed: bool


class EventFormat(msgspec.Struct, frozen=True, kw_only=True):
    """An event's ``format`` file.

    Attributes:
        system: the event's system (the directory above it; not in the file).
        name: the tracepoint name (``name:``).
        id: the record type (``ID:``, ``common_type`` of its records).
        fields: the event's own fields, after the common ones.
        print_fmt: the ``print fmt:`` line.
    """

    system: str
    name: str
    id: int
    fields: tuple[FieldFormat, ...]
    print_fmt: str = ""


def _field(line: str) -> FieldFormat | None:
    match = _FIELD_LINE.match(line)
    if match is None:
        return None
    decl = match["decl"].strip()
    type_, _, name = decl.rpartition(" ")
    if not type_ or not name:
        raise FormatError(f"field without a type: {line!r}")
    array = _ARRAY_SUFFIX.match(name)
    if array is not None:
        # f_show printed "char msg[]" for the type "char[16]": the length is
        # the field's size in elements, which the decoder works out from size.
        name = array["name"]
        type_ = f"{type_}[{array['len']}]"
    return FieldFormat(type=type_, name=name, offset=int(match["offset"]),
                       size=int(match["size"]), signed=match["signed"] == "1")


def parse_format(text: str, system: str) -> EventFormat:
    """Parse one ``format`` file.

    Args:
        text: the file's contents.
        system: the system directory the file was found in.

    Raises:
        FormatError: the text lacks ``name:``/``ID:`` or has a broken field line.
    """
    name: str | None = None
    event_id: int | None = None
    fields: list[FieldFormat] = []
    print_fmt = ""
    # f_show: the common fields, an empty line, then the event's own.
    common = True
    for line in text.splitlines():
        if line.startswith("name: "):
            name = line[6:]
        elif line.startswith("ID: "):
            try:
                event_id = int(line[4:])
            except ValueError:
                raise FormatError(f"bad ID line {line!r}") from None
        elif line.startswith("print fmt: "):
            print_fmt = line[11:]
        elif line.startswith("\tfield:"):
            field = _field(line)
            if field is None:
                raise FormatError(f"bad field line {line!r}")
            if not common:
                fields.append(field)
        elif not line and name is not None:
            common = False
    if name is None or event_id is None:
        raise FormatError("no name: or ID: line")
    return EventFormat(system=system, name=name, id=event_id, fields=tuple(fields),
                       print_fmt=print_fmt)
