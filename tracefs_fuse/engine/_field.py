"""Event fields and the text every event's ``format`` file is made of.

Rules:
  * A :class:`Field` holds what the kernel's ``struct ftrace_event_field`` holds
    (type string, name, record offset, size, signedness, array length); offsets
    count from the start of the trace entry, so the first event field sits at 8,
    after the common fields.
  * Text is ``str`` decoded as latin-1 everywhere in the engine, so that any
    byte a client sends round-trips unchanged (the kernel works on bytes).

Kernel: kernel/trace/trace_events.c (``f_show``, ``trace_define_common_fields``).
"""

from __future__ import annotations

import struct

import msgspec

#: Bytes the kernel treats as white space (lib/ctype.c: ``_S`` incl. 0xA0 NBSP).
KERNEL_SPACE = " \t\n\v\f\r\xa0"
#: ``isdigit``: ASCII digits only.
KERNEL_DIGITS = frozenset("0123456789")
#: ``isalpha`` (lib/ctype.c over Latin-1): the accented letters count too,
#: 192-255 but for 215 (multiplication) and 247 (division sign).
KERNEL_ALPHA = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    + "".join(chr(c) for c in range(192, 256) if c not in (215, 247)))
#: ``isalnum``.
KERNEL_ALNUM = KERNEL_ALPHA | KERNEL_DIGITS


class Field(msgspec.Struct, frozen=True, kw_only=True):
    """One field of an event record (``struct ftrace_event_field``)."""

    type: str
    name: str
    offset: int
    size: int
    is_signed: bool

    def format_line(self) -> str:
        """The field's line in a ``format`` file (``f_show``)."""
        # "Smartly shows the array type (except dynamic array)": a '[' in the
        # type moves the bracket behind the name, unless it is a __data_loc.
        bracket = self.type.find("[")
        if self.type.startswith("__data_loc"):
            bracket = -1
        if bracket < 0:
            decl = f"{self.type} {self.name}"
        else:
            # field->len, printed inside the brackets when non-zero, is set
            # only for the kernel's own static arrays: never for ours.
            decl = f"{self.type[:bracket]} {self.name}[]"
        return (f"\tfield:{decl};\toffset:{self.offset};\tsize:{self.size};"
                f"\tsigned:{int(self.is_signed)};\n")


# struct trace_entry {
#         unsigned short          type;
#         unsigned char           flags;
#         unsigned char           preempt_count;
#         int                     pid;
# };
TRACE_ENTRY = struct.Struct("<HBBi")
TRACE_ENTRY_SIZE = TRACE_ENTRY.size  # 8

COMMON_FIELDS = (
    Field(type="unsigned short", name="common_type", offset=0, size=2, is_signed=False),
    Field(type="unsigned char", name="common_flags", offset=2, size=1, is_signed=False),
    Field(type="unsigned char", name="common_preempt_count", offset=3, size=1,
          is_signed=False),
    Field(type="int", name="common_pid", offset=4, size=4, is_signed=True),
)


def render_format(name: str, event_id: int, fields: tuple[Field, ...], print_fmt: str) -> str:
    """An event's ``format`` file: header, common fields, fields, ``print fmt``."""
    common = "".join(f.format_line() for f in COMMON_FIELDS)
    own = "".join(f.format_line() for f in fields)
    return f"name: {name}\nID: {event_id}\nformat:\n{common}\n{own}\nprint fmt: {print_fmt}\n"
