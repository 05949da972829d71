"""The user_events command grammar: ``name[:flags] [field[;field]...]``.

Rules:
  * This module is the only place where a user_events command string becomes
    fields. It mirrors the kernel's parser step by step (``strpbrk``,
    ``strsep``, ``kstrtou*``), because its quirks are the ABI: a double space
    between type and name is EINVAL while a double space after ``;`` is not,
    ``char[0x10]`` is fine, ``struct`` needs a decimal size.
  * Re-registration matching (:func:`fields_match`) works on whitespace-split
    tokens, not on parsed fields, exactly like ``user_fields_match``.
  * Every refusal is ``TracefsError(EINVAL)``; nothing here has state.

Kernel: kernel/trace/trace_events_user.c, 6.10+ (``user_event_parse_cmd``,
``user_event_parse_field``, ``user_field_size``, ``user_field_format``,
``user_event_set_print_fmt``, ``user_fields_match``, ``user_event_argv_split``).
"""

from __future__ import annotations

import errno
import re

import msgspec

from ._errors import TracefsError
from ._field import KERNEL_SPACE, TRACE_ENTRY_SIZE, Field
from ._kstrto import kstrtou32

#: MAX_FIELD_ARRAY_SIZE: the largest N of ``char[N]``.
MAX_FIELD_ARRAY_SIZE = 1024

# user_field_size(): the only scalar types a user may declare ("long is not
# allowed from a user, since it's ambiguous in size").
_SCALAR_SIZES = {
    "s64": 8, "u64": 8, "s32": 4, "u32": 4, "int": 4, "unsigned int": 4,
    "s16": 2, "u16": 2, "short": 2, "unsigned short": 2,
    "s8": 1, "u8": 1, "char": 1, "unsigned char": 1,
}

# user_field_format(): printf conversions for the print fmt.
_SCALAR_FORMATS = {
    "s64": "%lld", "u64": "%llu", "s32": "%d", "u32": "%u", "int": "%d",
    "unsigned int": "%u", "s16": "%d", "u16": "%u", "short": "%d",
    "unsigned short": "%u", "s8": "%d", "u8": "%u", "char": "%d", "unsigned char": "%u",
}

# Types with a space inside are consumed up to the next space as one token;
# the order is the kernel's (user_event_parse_field).
_MULTI_WORD_PREFIXES = (
    "unsigned ", "struct ", "__data_loc unsigned ", "__data_loc ",
    "__rel_loc unsigned ", "__rel_loc ",
)

_SPACE_RUN = re.compile(f"[{re.escape(KERNEL_SPACE)}]+")


def _invalid(message: str) -> TracefsError:
    return TracefsError(errno.EINVAL, message)


def _u32(text: str, base: int) -> int:
    """``if (kstrtou32(...)) return -EINVAL``: overflow is EINVAL here too."""
    try:
        return kstrtou32(text, base)
    except TracefsError as error:
        raise _invalid(error.message) from None


class UserCommand(msgspec.Struct, frozen=True):
    """A command split the way ``user_event_parse_cmd`` splits it."""

    name: str
    #: Text after the first ``:`` of the name part, or None without a colon.
    flags: str | None
    #: Everything after the first space, or None without a space.
    args: str | None


def split_command(command: str) -> UserCommand:
    """Split at the first space (name | args), then the name at its first ``:``."""
    name, space, args = command.partition(" ")
    name, colon, flags = name.partition(":")
    return UserCommand(name, flags if colon else None, args if space else None)


def _array_size(type_: str) -> int:
    """``user_field_array_size``: N of ``char[N]``, read through an 8-byte buffer."""
    start = type_.find("[")
    if start < 0:
        raise _invalid(f"no array size in {type_!r}")
    # strscpy(val, start + 1, 8) <= 0: empty, or 8 characters or more.
    val = type_[start + 1:]
    if not val or len(val) >= 8:
        raise _invalid(f"bad array size in {type_!r}")
    bracket = val.find("]")
    if bracket < 0:
        raise _invalid(f"unterminated array size in {type_!r}")
    size = _u32(val[:bracket], 0)
    if size > MAX_FIELD_ARRAY_SIZE:
        raise _invalid(f"array larger than {MAX_FIELD_ARRAY_SIZE}: {type_!r}")
    return size


def user_field_size(type_: str) -> int:
    """``user_field_size``: the size of a declared type, or EINVAL."""
    size = _SCALAR_SIZES.get(type_)
    if size is not None:
        return size
    if type_.startswith(("char[", "unsigned char[")):
        return _array_size(type_)
    if type_.startswith(("__data_loc ", "__rel_loc ")):
        return 4
    raise _invalid(f"unknown type {type_!r}")


def _parse_field(text: str, offset: int) -> Field | None:
    """``user_event_parse_field``: ``type name`` or ``struct type name size``."""
    field = text.lstrip(KERNEL_SPACE)
    if not field:
        return None  # empty fields (";;", a trailing ";") are skipped
    type_: str | None = None
    depth = 0
    is_struct = False
    rest = field
    for prefix in _MULTI_WORD_PREFIXES:
        if field.startswith(prefix):
            is_struct = prefix == "struct "
            space = field.find(" ", len(prefix))
            if space < 0:
                raise _invalid(f"incomplete field {field!r}")
            type_, rest = field[:space], field[space + 1:]
            depth = 1
            break
    name: str | None = None
    size = -1
    for part in rest.split(" "):  # strsep(&field, " "): every space counts
        if depth == 0:
            type_ = part
        elif depth == 1:
            name = part
        elif depth == 2:
            if not is_struct:
                raise _invalid(f"size given for a non-struct field {field!r}")
            size = _u32(part, 10)
        else:
            raise _invalid(f"too many words in field {field!r}")
        depth += 1
    if depth < 2 or name is None or type_ is None:
        raise _invalid(f"field without a name {field!r}")
    if depth == 2:
        size = user_field_size(type_)
    if size == 0:
        raise _invalid(f"zero-sized field {field!r}")
    return Field(type=type_, name=name, offset=offset, size=size,
                 is_signed=not type_.startswith("u"))


def parse_fields(args: str | None) -> tuple[Field, ...]:
    """``user_event_parse_fields``: fields laid out back to back from offset 8.

    Raises:
        TracefsError: EINVAL for any malformed field.
    """
    fields: list[Field] = []
    if args is None:
        return ()
    offset = TRACE_ENTRY_SIZE
    for text in args.split(";"):
        field = _parse_field(text, offset)
        if field is not None:
            fields.append(field)
            offset += field.size
    return tuple(fields)


def min_size(fields: tuple[Field, ...]) -> int:
    """Payload bytes a write must carry after its index: the fixed fields."""
    return fields[-1].offset + fields[-1].size - TRACE_ENTRY_SIZE if fields else 0


def dyn_string_func(field: Field) -> str | None:
    """``user_field_is_dyn_string``: the accessor of a dynamic char field."""
    if field.type.startswith("__data_loc "):
        func = "__get_str"
    elif field.type.startswith("__rel_loc "):
        func = "__get_rel_str"
    else:
        return None
    return func if "char" in field.type else None


def _field_format(type_: str) -> str:
    spec = _SCALAR_FORMATS.get(type_)
    if spec is not None:
        return spec
    # "Unknown, likely struct, allowed treat as 64-bit"
    return "%s" if "char[" in type_ else "%llu"


def print_fmt(fields: tuple[Field, ...]) -> str:
    """``user_event_set_print_fmt``: ``"a=%u s=%s", REC->a, __get_str(s)``."""
    specs = " ".join(f"{f.name}={_field_format(f.type)}" for f in fields)
    args = "".join(
        f", {func}({f.name})" if (func := dyn_string_func(f)) else f", REC->{f.name}"
        for f in fields)
    return f'"{specs}"{args}'


def show_fields(fields: tuple[Field, ...]) -> str:
    """The field part of a ``dynamic_events`` line (``user_event_show``)."""
    return "".join(
        (" " if i == 0 else "; ") + f"{f.type} {f.name}"
        + (f" {f.size}" if f.type.startswith("struct ") else "")
        for i, f in enumerate(fields))


def argv_split(text: str) -> list[str]:
    """``argv_split``: the words of ``text``, separated by runs of white space."""
    return [t for t in _SPACE_RUN.split(text) if t]


def split_match_args(args: str) -> list[str]:
    """``user_event_argv_split``: ``a;b`` becomes ``a; b``, then ``argv_split``."""
    return argv_split(re.sub(f";(?![{re.escape(KERNEL_SPACE)}])", "; ", args))


def fields_match(fields: tuple[Field, ...], argv: list[str]) -> bool:
    """``user_fields_match``: do these tokens describe exactly these fields?

    Tokens are joined with single spaces up to (and including) the first one
    containing ``;``; that text must equal ``"<type> <name>[ <size>][;]"`` for
    each field in turn, and every token must be used.
    """
    if not argv:
        return not fields
    i = 0
    for field in fields:
        if i >= len(argv):
            return False
        group: list[str] = []
        colon = False
        while i < len(argv):
            group.append(argv[i])
            i += 1
            if ";" in argv[i - 1]:
                colon = True
                break
        expected = f"{field.type} {field.name}"
        if field.type.startswith("struct "):
            expected += f" {field.size}"
        if colon:
            expected += ";"
        if " ".join(group) != expected:
            return False
    return i == len(argv)
