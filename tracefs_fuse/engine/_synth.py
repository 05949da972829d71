"""Synthetic events: their type table, commands, layout, records and trace text.

Rules:
  * Everything a user can observe follows trace_events_synth.c step by step:
    the type table (``synth_field_size``/``_fmt``/``_signed``), the command
    grammar with its ``error_log`` messages and caret positions, the
    ``synthetic_events`` and ``dynamic_events`` lines, the ``format`` text, the
    record layout and ``print_synth_event``'s text.
  * Record layout (``struct synth_trace_event``): the 8-byte common header,
    then one u64 slot per field (``union trace_synth_field``; a 1/2/4-byte
    value sits in the slot's low bytes), except static strings, which take
    ``STR_VAR_LEN_MAX`` (256) bytes whatever their declared size; then the
    dynamic data (strings, stacks) in field order, each located by a
    ``{u16 offset; u16 len}`` in its slot. Bytes the kernel leaves as they
    were in the ring buffer page (slot padding, unset fields) are zero here.
  * Deleting an event fails with EBUSY while it is enabled in a trace array
    or has a probe (``probe_remove_event_call``) or while code holds its file
    (``trace_get_event_file``: ``trace_event_dyn_busy``). ``is_busy`` is the
    kernel's ``synth_event->ref``, which only hist triggers raise; none are
    emulated, so it is always False and O_TRUNC finds the busy event only
    when it gets to it, after deleting those before it, as the kernel does.
  * Tracing from code (``synth_event_trace*``) records only while the event
    is enabled in the file's trace array; a record that cannot be reserved
    (tracing off, too large, the writer's CPU outside ``tracing_cpumask``)
    is EINVAL, as the kernel's failed reserve.

Caveats (deliberate deviations):
  * ``synth_event_add_val`` with a name no field has raises EINVAL; the
    kernel's lookup loop leaves ``field`` at the last field and writes there.
  * A piecewise record is written at ``synth_event_trace_end``, so its time
    stamp and position are those of the end, not of the reservation.
  * A stack (``long[]``) value is a sequence of addresses, stored the way the
    kernel's hist path stores one (``trace_stack``); the kernel's
    ``synth_event_trace`` would store the pointer itself.
  * :meth:`SynthEvent.print_trace` returns the whole text; cutting a line
    longer than a ``trace_seq`` page is left to the trace output.
  * ``%pS`` of a stack prints ``0x<address>``: there are no kernel symbols.

Kernel: kernel/trace/trace_events_synth.c, trace_synth.h, 6.12.
"""

from __future__ import annotations

import errno
from typing import Iterator, Sequence, Union

import msgspec

from ._dynamic_events import DynamicEvents, parse_run_command
from ._error_log import ErrorLog, err_pos
from ._errors import TracefsError
from ._events import EventTable, TraceEvent
from ._field import (KERNEL_ALNUM, KERNEL_ALPHA, KERNEL_SPACE, TRACE_ENTRY, TRACE_ENTRY_SIZE,
                     Field)
from ._kstrto import kstrtou32
from ._task import Task
from ._trace_array import TraceArray
from ._tree import File, text_file
from ._user_command import argv_split

SYNTH_SYSTEM = "synthetic"
#: SYNTH_FIELDS_MAX: fields per event.
SYNTH_FIELDS_MAX = 64
#: STR_VAR_LEN_MAX (MAX_FILTER_STR_VAL): the slot of a static string.
STR_VAR_LEN_MAX = 256
#: HIST_STACKTRACE_DEPTH: longs a stack field keeps.
HIST_STACKTRACE_DEPTH = 16
#: MAX_STRING_SIZE (PATH_MAX): the longest dynamic string, NUL included.
MAX_STRING_SIZE = 4096
#: include/linux/errno.h ENOTSUPP: kernel-internal, no userspace name.
ENOTSUPP = 524
_U64 = 8
_LONG_SIZE = 8
_SYNTH_LOC = "synthetic_events"

# The SYNTH_ERR_* texts.
ERR_BAD_NAME = "Illegal name"
ERR_INVALID_CMD = "Command must be of the form: <name> field[;field] ..."
ERR_INVALID_DYN_CMD = ("Command must be of the form: s or -:[synthetic/]<name> "
                       "field[;field] ...")
ERR_EVENT_EXISTS = "Event already exists"
ERR_TOO_MANY_FIELDS = "Too many fields"
ERR_INCOMPLETE_TYPE = "Incomplete type"
ERR_INVALID_TYPE = "Invalid type"
ERR_INVALID_FIELD = "Invalid field"
ERR_INVALID_ARRAY_SPEC = "Invalid array specification"

# synth_field_size() and synth_field_fmt(): the scalar types, exact strings.
SYNTH_TYPES: dict[str, tuple[int, str]] = {
    "s64": (8, "%lld"), "u64": (8, "%llu"),
    "s32": (4, "%d"), "u32": (4, "%u"),
    "s16": (2, "%d"), "u16": (2, "%u"),
    "s8": (1, "%d"), "u8": (1, "%u"),
    "char": (1, "%d"), "unsigned char": (1, "%u"),
    "int": (4, "%d"), "unsigned int": (4, "%u"),
    "long": (8, "%ld"), "unsigned long": (8, "%lu"),
    "bool": (1, "%d"), "pid_t": (4, "%d"), "gfp_t": (4, "%x"),
}

def is_good_name(name: str) -> bool:
    """``is_good_name``: a C identifier, letters as lib/ctype.c counts them."""
    if not name or (name[0] not in KERNEL_ALPHA and name[0] != "_"):
        return False
    return all(c in KERNEL_ALNUM or c == "_" for c in name[1:])


# -- the type table ---------------------------------------------------------------


def synth_field_is_string(type_: str) -> bool:
    return "char[" in type_


def synth_field_is_stack(type_: str) -> bool:
    return "long[" in type_


def synth_field_string_size(type_: str) -> int | None:
    """``synth_field_string_size``: N of ``char[N]``, 0 for ``char[]``, None if bad.

    The ``]`` must end the type and N is at most 3 characters parsed by
    ``kstrtouint`` base 0 (so ``char[0x10]`` is too long but ``char[010]``
    is 8), at most ``STR_VAR_LEN_MAX``.
    """
    start = type_.find("char[") + len("char[")
    end = type_.find("]")
    if end < 0 or end < start or end != len(type_) - 1:
        return None
    digits = type_[start:end]
    if len(digits) > 3:
        return None
    if not digits:
        return 0  # variable-length string
    try:
        size = kstrtou32(digits, 0)
    except TracefsError:
        return None
    return size if size <= STR_VAR_LEN_MAX else None


def synth_field_size(type_: str) -> int | None:
    """``synth_field_size``: bytes, 0 for unknown or variable-length, None if bad."""
    known = SYNTH_TYPES.get(type_)
    if known is not None:
        return known[0]
    if synth_field_is_string(type_):
        return synth_field_string_size(type_)
    return 0


def synth_field_fmt(type_: str) -> str:
    """``synth_field_fmt``: the printf conversion of a field type."""
    known = SYNTH_TYPES.get(type_)
    if known is not None:
        return known[1]
    if synth_field_is_string(type_) or synth_field_is_stack(type_):
        return "%s"
    return "%llu"


def synth_field_signed(type_: str) -> bool:
    """``synth_field_signed``: everything but ``u*`` types and ``gfp_t``."""
    return not type_.startswith("u") and type_ != "gfp_t"


# -- fields and layout -------------------------------------------------------------


class SynthField(msgspec.Struct, frozen=True, kw_only=True):
    """One field (``struct synth_field``)."""

    #: As in ``format``: ``__data_loc `` prefixed for dynamic fields.
    type: str
    name: str
    #: ``format``'s size: the declared one, 8 for dynamic fields.
    size: int
    is_signed: bool
    is_string: bool
    is_dynamic: bool
    is_stack: bool
    #: ``field->offset``: the index of its first u64 slot.
    slot: int = 0
    #: ``field->field_pos``: its index among the event's fields.
    field_pos: int = 0

    @property
    def offset(self) -> int:
        """Its offset in the record."""
        return TRACE_ENTRY_SIZE + _U64 * self.slot

    @property
    def n_u64(self) -> int:
        """Slots it takes: 32 for a static string, 1 otherwise."""
        return STR_VAR_LEN_MAX // _U64 if self.is_string and not self.is_dynamic else 1

    def shown_type(self) -> str:
        """``__synth_event_show``: the type without ``__data_loc ``."""
        at = self.type.find("__data_loc")
        return self.type[at + len("__data_loc "):] if at >= 0 else self.type


def layout(fields: Sequence[SynthField]) -> tuple[SynthField, ...]:
    """``synth_event_define_fields``: give each field its slot and position, in order."""
    placed = []
    slot = 0
    for pos, field in enumerate(fields):
        placed.append(msgspec.structs.replace(field, slot=slot, field_pos=pos))
        slot += field.n_u64
    return tuple(placed)


def print_fmt(fields: Sequence[SynthField]) -> str:
    """``__set_synth_event_print_fmt``: ``"a=%llu, s=%s", REC->a, __get_str(s)``."""
    specs = ", ".join(f"{f.name}={synth_field_fmt(f.type)}" for f in fields)
    args = []
    for f in fields:
        if f.is_string and f.is_dynamic:
            args.append(f", __get_str({f.name})")
        elif f.is_stack:
            args.append(f", __get_stacktrace({f.name})")
        else:
            args.append(f", REC->{f.name}")
    return f'"{specs}"' + "".join(args)


# -- commands ------------------------------------------------------------------------


class _Command:
    """One command being run: its text (``last_cmd``) and the error log."""

    def __init__(self, text: str, log: ErrorLog) -> None:
        self.text = text
        self.log = log

    def error(self, message: str, pos: int, code: int = errno.EINVAL) -> TracefsError:
        """``synth_err``: log under ``synthetic_events`` and return the error."""
        self.log.log(_SYNTH_LOC, self.text, message, pos)
        return TracefsError(code, message)

    def errpos(self, part: str) -> int:
        return err_pos(self.text, part)


def _parse_field(argv: list[str], cmd: _Command) -> tuple[SynthField, int]:
    """``parse_synth_field``: one field from the front of ``argv``; words used."""
    field_type = argv[0]
    prefix = ""
    if field_type == "unsigned":
        if len(argv) < 3:
            raise cmd.error(ERR_INCOMPLETE_TYPE, cmd.errpos(field_type))
        prefix = "unsigned "
        field_type, field_name, consumed = argv[1], argv[2], 3
    else:
        if len(argv) < 2:
            raise cmd.error(ERR_INVALID_FIELD, cmd.errpos(field_type))
        field_name, consumed = argv[1], 2
    bracket = field_name.find("[")
    array = field_name[bracket:] if bracket >= 0 else ""
    name = field_name[:bracket] if bracket >= 0 else field_name
    if not is_good_name(name):
        raise cmd.error(ERR_BAD_NAME, cmd.errpos(field_name))
    type_ = prefix + field_type + array
    size = synth_field_size(type_)
    if size is None:
        if array:
            raise cmd.error(ERR_INVALID_ARRAY_SPEC, cmd.errpos(field_name))
        raise cmd.error(ERR_INVALID_TYPE, cmd.errpos(field_type))
    is_dynamic = False
    if size == 0:
        if not (synth_field_is_string(type_) or synth_field_is_stack(type_)):
            raise cmd.error(ERR_INVALID_TYPE, cmd.errpos(field_type))
        type_ = "__data_loc " + type_
        is_dynamic = True
        size = _U64
    is_string = synth_field_is_string(type_)
    return SynthField(type=type_, name=name, size=size, is_signed=synth_field_signed(type_),
                      is_string=is_string, is_dynamic=is_dynamic,
                      is_stack=not is_string and synth_field_is_stack(type_)), consumed


def _check_command(text: str) -> bool:
    """``check_command``: a deletion, or at least ``name type field`` before any ``;``."""
    first = text.split(";", 1)[0]
    return first.startswith("!") or len(argv_split(first)) >= 3


def _first_blank(text: str) -> int:
    """``strpbrk(text, " \\t")``: only space and tab end the name."""
    found = [i for i in (text.find(" "), text.find("\t")) if i >= 0]
    return min(found) if found else -1


# -- the event ---------------------------------------------------------------------------


class SynthEvent(TraceEvent):
    """One synthetic event (``struct synth_event``)."""

    def __init__(self, registry: SynthEvents, name: str, fields: Sequence[SynthField]) -> None:
        placed = layout(fields)
        super().__init__(SYNTH_SYSTEM, name, tuple(
            Field(type=f.type, name=f.name, offset=f.offset, size=f.size, is_signed=f.is_signed)
            for f in placed), print_fmt(placed))
        self.registry = registry
        self.synth_fields = placed
        self.n_u64 = sum(f.n_u64 for f in placed)
        self.dynamic_fields = tuple(f for f in placed if f.is_dynamic)

    @property
    def fixed_size(self) -> int:
        """The entry without dynamic data: header and slots."""
        return TRACE_ENTRY_SIZE + _U64 * self.n_u64

    def field_line(self) -> str:
        """``__synth_event_show``: ``name\\ttype name; type name``."""
        return (f"{self.name}\t"
                + "; ".join(f"{f.shown_type()} {f.name}" for f in self.synth_fields) + "\n")

    # -- struct dyn_event_operations ---------------------------------------------

    def show(self) -> str:
        return f"s:{SYNTH_SYSTEM}/{self.field_line()}"

    def match(self, system: str | None, event: str, argv: list[str]) -> bool:
        """``synth_event_match``: the name, and the system if given; fields ignored."""
        return self.name == event and (system is None or system == SYNTH_SYSTEM)

    def is_busy(self) -> bool:
        return False

    def free(self, task: Task) -> None:
        self.registry.destroy(self)

    # -- records -----------------------------------------------------------------

    def print_trace(self, entry: bytes, verbose: bool = False) -> str:
        """``print_synth_event``: ``name: a=1 s=str`` and a newline.

        Args:
            entry: the whole record, common header included.
            verbose: the ``verbose`` trace option (each value's format first).
        """
        out = [f"{self.name}: "]
        last = len(self.synth_fields) - 1
        for i, field in enumerate(self.synth_fields):
            fmt = synth_field_fmt(field.type)
            if verbose:
                out.append(f"{fmt} ")
            space = "" if i == last else " "
            at = field.offset
            if field.is_string:
                if field.is_dynamic:
                    loc = int.from_bytes(entry[at:at + 4], "little")
                    text = _c_string(entry, loc & 0xFFFF)
                else:
                    text = _c_string(entry, at)
                out.append(f"{field.name}={text}{space}")
            elif field.is_stack:
                loc = int.from_bytes(entry[at:at + 4], "little")
                start, length = loc & 0xFFFF, loc >> 16
                out.append(f"{field.name}=STACK:\n")
                for j in range(1, length // _LONG_SIZE):
                    addr = int.from_bytes(entry[start + j * 8:start + j * 8 + 8], "little")
                    out.append(f"=> 0x{addr:x}\n")  # %pS without symbols
            else:
                value = _format_num(fmt, field.size, entry[at:at + _U64])
                out.append(f"{field.name}={value}{space}")
                if field.type == "gfp_t":
                    out.append(f" ({gfp_flag_names(int.from_bytes(entry[at:at + 8], 'little'))})")
        out.append("\n")
        return "".join(out)


def _c_string(entry: bytes, start: int) -> str:
    end = entry.find(0, start)
    return entry[start:end if end >= 0 else len(entry)].decode("latin-1")


def _format_num(fmt: str, size: int, slot: bytes) -> str:
    """``print_synth_event_num_val``: the slot's low ``size`` bytes through ``fmt``.

    1- and 2-byte values are passed as ``as_u8``/``as_u16``, promoted to a
    non-negative int: ``%d`` of an s8 -1 prints 255, as the kernel does.
    """
    value = int.from_bytes(slot[:size], "little")
    if fmt == "%x":
        return f"{value:x}"
    if fmt in ("%d", "%lld", "%ld") and size >= 4 and value >> (size * 8 - 1):
        value -= 1 << (size * 8)
    return str(value)


# include/trace/events/mmflags.h __def_gfpflag_names on x86_64 without
# KASAN_HW_TAGS (so __GFP_SKIP_KASAN is 0): composite names first.
_GFP = {name: 1 << bit for bit, name in enumerate((
    "__GFP_DMA", "__GFP_HIGHMEM", "__GFP_DMA32", "__GFP_MOVABLE", "__GFP_RECLAIMABLE",
    "__GFP_HIGH", "__GFP_IO", "__GFP_FS", "__GFP_ZERO", "", "__GFP_DIRECT_RECLAIM",
    "__GFP_KSWAPD_RECLAIM", "__GFP_WRITE", "__GFP_NOWARN", "__GFP_RETRY_MAYFAIL",
    "__GFP_NOFAIL", "__GFP_NORETRY", "__GFP_MEMALLOC", "__GFP_COMP", "__GFP_NOMEMALLOC",
    "__GFP_HARDWALL", "__GFP_THISNODE", "__GFP_ACCOUNT", "__GFP_ZEROTAGS"))}
_GFP["__GFP_RECLAIM"] = _GFP["__GFP_DIRECT_RECLAIM"] | _GFP["__GFP_KSWAPD_RECLAIM"]
_GFP_KERNEL = _GFP["__GFP_RECLAIM"] | _GFP["__GFP_IO"] | _GFP["__GFP_FS"]
_GFP_USER = _GFP_KERNEL | _GFP["__GFP_HARDWALL"]
_GFP_HIGHUSER = _GFP_USER | _GFP["__GFP_HIGHMEM"]
_GFP_HIGHUSER_MOVABLE = _GFP_HIGHUSER | _GFP["__GFP_MOVABLE"]
_GFP_TRANSHUGE_LIGHT = ((_GFP_HIGHUSER_MOVABLE | _GFP["__GFP_COMP"] | _GFP["__GFP_NOMEMALLOC"]
                         | _GFP["__GFP_NOWARN"]) & ~_GFP["__GFP_RECLAIM"])
GFP_FLAG_NAMES: tuple[tuple[int, str], ...] = (
    (_GFP_TRANSHUGE_LIGHT | _GFP["__GFP_DIRECT_RECLAIM"], "GFP_TRANSHUGE"),
    (_GFP_TRANSHUGE_LIGHT, "GFP_TRANSHUGE_LIGHT"),
    (_GFP_HIGHUSER_MOVABLE, "GFP_HIGHUSER_MOVABLE"),
    (_GFP_HIGHUSER, "GFP_HIGHUSER"),
    (_GFP_USER, "GFP_USER"),
    (_GFP_KERNEL | _GFP["__GFP_ACCOUNT"], "GFP_KERNEL_ACCOUNT"),
    (_GFP_KERNEL, "GFP_KERNEL"),
    (_GFP["__GFP_RECLAIM"] | _GFP["__GFP_IO"], "GFP_NOFS"),
    (_GFP["__GFP_HIGH"] | _GFP["__GFP_KSWAPD_RECLAIM"], "GFP_ATOMIC"),
    (_GFP["__GFP_RECLAIM"], "GFP_NOIO"),
    (_GFP["__GFP_KSWAPD_RECLAIM"] | _GFP["__GFP_NOWARN"], "GFP_NOWAIT"),
    (_GFP["__GFP_DMA"], "GFP_DMA"),
    (_GFP["__GFP_HIGHMEM"], "__GFP_HIGHMEM"),
    (_GFP["__GFP_DMA32"], "GFP_DMA32"),
    *((_GFP[name], name) for name in (
        "__GFP_HIGH", "__GFP_IO", "__GFP_FS", "__GFP_NOWARN", "__GFP_RETRY_MAYFAIL",
        "__GFP_NOFAIL", "__GFP_NORETRY", "__GFP_COMP", "__GFP_ZERO", "__GFP_NOMEMALLOC",
        "__GFP_MEMALLOC", "__GFP_HARDWALL", "__GFP_THISNODE", "__GFP_RECLAIMABLE",
        "__GFP_MOVABLE", "__GFP_ACCOUNT", "__GFP_WRITE", "__GFP_RECLAIM",
        "__GFP_DIRECT_RECLAIM", "__GFP_KSWAPD_RECLAIM", "__GFP_ZEROTAGS")),
)


def gfp_flag_names(flags: int) -> str:
    """``trace_print_flags_seq(s, "|", flags, gfpflag_names)``."""
    names = []
    for mask, name in GFP_FLAG_NAMES:
        if not flags:
            break
        if flags & mask == mask:
            names.append(name)
            flags &= ~mask
    if flags:
        names.append(f"0x{flags:x}")
    return "|".join(names)


# -- building records ---------------------------------------------------------------

#: A value for one field: a number, a string (bytes, C semantics: it ends at
#: the first NUL), or for a stack field the return addresses.
SynthValue = Union[int, bytes, Sequence[int]]


def _number(value: int, size: int) -> bytes:
    """``entry->fields[n].as_uN = (uN)val``: C's truncation, in an 8-byte slot."""
    return (value & ((1 << (size * 8)) - 1)).to_bytes(size, "little").ljust(_U64, b"\0")


def _c_text(value: bytes) -> bytes:
    nul = value.find(0)
    return value if nul < 0 else value[:nul]


def _static_string(value: bytes) -> bytes:
    """``strncpy_from_kernel_nofault(slot, s, 256)``: at most 255 bytes and a NUL."""
    return (_c_text(value)[:STR_VAR_LEN_MAX - 1] + b"\0").ljust(STR_VAR_LEN_MAX, b"\0")


def _stack_longs(addrs: Sequence[int]) -> tuple[bytes, int]:
    """``trace_stack``: ``[n, addr...]`` up to the first 0 or 16 longs; bytes, reserved."""
    longs = [len(addrs), *addrs]
    kept = []
    for value in longs[:HIST_STACKTRACE_DEPTH]:
        if not value:
            break
        kept.append(value & 0xFFFFFFFFFFFFFFFF)
    return b"".join(v.to_bytes(8, "little") for v in kept), len(longs) * _LONG_SIZE


def _dynamic_data(field: SynthField, value: SynthValue) -> tuple[bytes, int]:
    """The dynamic bytes of a field and the room reserved for them."""
    if field.is_stack:
        return _stack_longs(_addresses(value))
    text = _c_text(_string(value))[:MAX_STRING_SIZE - 1] + b"\0"
    return text, len(text)


def _string(value: SynthValue) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"a string field takes bytes, not {type(value).__name__}")
    return value


def _addresses(value: SynthValue) -> Sequence[int]:
    if isinstance(value, (int, bytes)):
        raise TypeError(f"a stack field takes a sequence of addresses, not {type(value).__name__}")
    return value


def _integer(value: SynthValue) -> int:
    if not isinstance(value, int):
        raise TypeError(f"a numeric field takes an int, not {type(value).__name__}")
    return value


def dynamic_data(event: SynthEvent,
                 values: Sequence[SynthValue]) -> list[tuple[bytes, int]]:
    """Each dynamic field's bytes and reserved room, for the fields ``values`` reaches.

    The kernel sums the room (``data_size``) to reserve the record before it
    checks the number of values; :func:`build_entry` then stores the bytes.

    Raises:
        TypeError: a value of the wrong Python type for its dynamic field.
    """
    return [_dynamic_data(field, values[field.field_pos])
            for field in event.dynamic_fields if field.field_pos < len(values)]


def build_entry(event: SynthEvent, header: bytes, values: Sequence[SynthValue],
                dynamic: list[tuple[bytes, int]]) -> bytes:
    """The record ``synth_event_trace_array`` commits for ``values``.

    Args:
        event: the event.
        header: the record's common fields.
        values: one per field.
        dynamic: :func:`dynamic_data` of the same values.

    Raises:
        TypeError: a value of the wrong Python type for its field.
    """
    pieces = iter(dynamic)
    data = bytearray()
    slots = bytearray()
    for field, value in zip(event.synth_fields, values):
        if field.is_dynamic:
            blob, _ = next(pieces)
            loc = (len(blob) << 16) | (event.fixed_size + len(data))
            slots += loc.to_bytes(4, "little").ljust(_U64, b"\0")
            data += blob
        elif field.is_string:
            slots += _static_string(_string(value))
        else:
            slots += _number(_integer(value), field.size)
    reserved = sum(room for _, room in dynamic)
    return header + bytes(slots) + bytes(data).ljust(reserved, b"\0")


# -- the registry ---------------------------------------------------------------------


class SynthEvents:
    """Every synthetic event of one tracefs and the commands that make them.

    Args:
        events: the event table ids come from.
        dynamic_events: the shared ``dynamic_events`` list.
        error_log: where command errors are logged.
    """

    def __init__(self, events: EventTable, dynamic_events: DynamicEvents,
                 error_log: ErrorLog) -> None:
        self.events = events
        self.dynamic_events = dynamic_events
        self.error_log = error_log

    def __iter__(self) -> Iterator[SynthEvent]:
        """In creation order (the shared ``dyn_event_list``)."""
        return (e for e in self.dynamic_events.entries if isinstance(e, SynthEvent))

    def find(self, name: str) -> SynthEvent | None:
        """``find_synth_event``: by name, through the event table's index."""
        event = self.events.find(SYNTH_SYSTEM, name)
        return event if isinstance(event, SynthEvent) else None

    def render(self) -> str:
        """``synthetic_events``: ``name\\tfields`` per event."""
        return "".join(e.field_line() for e in self)

    # -- commands ----------------------------------------------------------------

    def write(self, data: bytes, task: Task) -> int:
        """A write to ``synthetic_events`` (``trace_parse_run_command``)."""
        return parse_run_command(data, self.run_command)

    def run_command(self, command: str) -> None:
        """``create_or_delete_synth_event``: ``name fields`` or ``!name``.

        Raises:
            TracefsError: EINVAL (logged) for a malformed command, EEXIST
                (logged) for a taken name; deletion: ENOENT, EBUSY.
        """
        raw = command.lstrip(KERNEL_SPACE)
        if not raw:
            return
        cmd = _Command(raw, self.error_log)
        if not _check_command(raw):
            raise cmd.error(ERR_INVALID_CMD, 0)
        blank = _first_blank(raw)
        if blank < 0 and raw[0] != "!":
            raise cmd.error(ERR_INVALID_CMD, 0)
        name = raw[:blank] if blank >= 0 else raw
        if name[0] == "!":
            self.delete(name[1:])
            return
        self._create(name, raw[blank:].lstrip(KERNEL_SPACE), cmd)

    def create(self, command: str, task: Task) -> bool:
        """``create_synth_event``: an ``s:[synthetic/]name fields`` line.

        Returns False for lines of other kinds (the kernel's -ECANCELED).

        Raises:
            TracefsError: EINVAL (logged) or EEXIST (logged).
        """
        raw = command.lstrip(KERNEL_SPACE)
        if not raw.startswith("s:"):
            return False
        cmd = _Command(raw, self.error_log)
        blank = _first_blank(raw)
        if blank < 0:
            raise cmd.error(ERR_INVALID_CMD, 0)
        start = 2
        # strchr(name, '/') looks at the whole rest of the line, fields included.
        if "/" in raw[start:]:
            if not raw.startswith(f"{SYNTH_SYSTEM}/", start):
                raise cmd.error(ERR_INVALID_DYN_CMD, 0)
            start += len(SYNTH_SYSTEM) + 1
        if not _check_command(raw[start:]):
            raise cmd.error(ERR_INVALID_CMD, 0)
        self._create(raw[start:blank], raw[blank:].lstrip(KERNEL_SPACE), cmd)
        return True

    def _create(self, name: str, raw_fields: str, cmd: _Command) -> SynthEvent:
        """``__create_synth_event``."""
        if not name:
            raise cmd.error(ERR_INVALID_CMD, 0)
        if not is_good_name(name):
            raise cmd.error(ERR_BAD_NAME, cmd.errpos(name))
        if self.find(name) is not None:
            raise cmd.error(ERR_EVENT_EXISTS, cmd.errpos(name), errno.EEXIST)
        fields: list[SynthField] = []
        for field_str in raw_fields.split(";"):
            argv = argv_split(field_str)
            consumed = 0
            # Several fields between semicolons are the old syntax, still valid.
            while consumed < len(argv):
                field, used = _parse_field(argv[consumed:], cmd)
                consumed += used
                if len(fields) == SYNTH_FIELDS_MAX:
                    raise cmd.error(ERR_TOO_MANY_FIELDS, 0)
                fields.append(field)
        if not fields:
            raise cmd.error(ERR_INVALID_CMD, 0)
        event = SynthEvent(self, name, fields)
        self.events.add(event)
        self.dynamic_events.add(event)
        return event

    # -- deletion -------------------------------------------------------------------

    def delete(self, name: str) -> None:
        """``synth_event_delete``: by name, from code or ``!name``.

        Raises:
            TracefsError: ENOENT if there is no such event, EBUSY while in use.
        """
        event = self.find(name)
        if event is None:
            raise TracefsError(errno.ENOENT, f"no synthetic event {name!r}")
        self.destroy(event)

    def destroy(self, event: SynthEvent) -> None:
        """``destroy_synth_event`` / ``synth_event_release``.

        Raises:
            TracefsError: EBUSY while a file is held, or while it is enabled
                or has a probe (``probe_remove_event_call``).
        """
        if event.file_refs:  # trace_event_dyn_busy()
            raise TracefsError(errno.EBUSY, f"{event.name} is held by code")
        if event.status:
            raise TracefsError(errno.EBUSY, f"{event.name} is enabled")
        self.events.remove(event)
        self.dynamic_events.remove(event)

    def release_all(self, task: Task) -> None:
        """O_TRUNC of ``synthetic_events``: ``dyn_events_release_all(&synth_event_ops)``.

        Raises:
            TracefsError: the first deletion's EBUSY (those before it are gone).
        """
        self.dynamic_events.release_all(task, SynthEvent)

    def node(self) -> File:
        """The ``synthetic_events`` file (mode 0640)."""
        return text_file("synthetic_events", self.render, self.write,
                         on_truncate=self.release_all)


# -- tracing from code ---------------------------------------------------------------------


class EventFileRef:
    """A held event file (``trace_get_event_file``); :meth:`put` releases it.

    As a context manager it is put on exit.

    Args:
        trace_array: the trace array the file belongs to.
        event: its event.
        nr_cpus: the trace array's CPUs (a writer's CPU is folded into them).
    """

    def __init__(self, trace_array: TraceArray, event: TraceEvent, nr_cpus: int = 1) -> None:
        self.trace_array = trace_array
        self.event = event
        self.nr_cpus = nr_cpus
        self.held = True

    def __enter__(self) -> EventFileRef:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.held:
            self.put()

    def put(self) -> None:
        """``trace_put_event_file``.

        Raises:
            TracefsError: EINVAL if already put.
        """
        if not self.held:
            raise TracefsError(errno.EINVAL, "event file already put")
        self.held = False
        self.event.file_refs -= 1

    def synth_event(self) -> SynthEvent:
        """The synthetic event behind the file (held, so it cannot be gone).

        Raises:
            TracefsError: EINVAL if put or not a synthetic event.
        """
        event = self.event
        if not self.held or not isinstance(event, SynthEvent):
            raise TracefsError(errno.EINVAL, "not a held synthetic event file")
        return event


def get_event_file(trace_array: TraceArray, system: str, name: str,
                   nr_cpus: int = 1) -> EventFileRef:
    """``trace_get_event_file`` (top-level instance).

    Raises:
        TracefsError: EINVAL if no enableable event has that name.
    """
    event = trace_array.events.find(system, name)
    if event is None or not event.enableable:
        raise TracefsError(errno.EINVAL, f"no event {system}:{name}")
    event.file_refs += 1  # trace_event_try_get_ref
    return EventFileRef(trace_array, event, nr_cpus)


def _header(event: SynthEvent, task: Task) -> bytes:
    # Recorded from process context: no irq flags, and the preemption the
    # ring buffer's nesting adds is subtracted again (tracing_gen_ctx_dec).
    return TRACE_ENTRY.pack(event.id, 0, 0, task.pid)


def trace(file: EventFileRef, values: Sequence[SynthValue], task: Task) -> None:
    """``synth_event_trace`` / ``synth_event_trace_array``.

    Nothing happens while the event is disabled in the file's trace array.
    A wrong number of values is EINVAL *after* the reservation, and the
    kernel commits the reserved record anyway: so does this (unset fields 0).

    Raises:
        TracefsError: EINVAL for a wrong number of values or a record that
            cannot be reserved, or a file that is put or not a synthetic event's.
        TypeError: a value of the wrong Python type.
    """
    event = file.synth_event()
    tr = file.trace_array
    if not tr.enabled(event):
        return
    dynamic = dynamic_data(event, values)
    size = event.fixed_size + sum(room for _, room in dynamic)
    if not tr.can_record(size, task.cpu):
        raise TracefsError(errno.EINVAL, "no room for the record (tracing off or too large)")
    header = _header(event, task)
    if len(values) != len(event.synth_fields):
        tr.record(header.ljust(size, b"\0"), task)
        raise TracefsError(errno.EINVAL, f"{event.name} has {len(event.synth_fields)} fields, "
                                         f"got {len(values)} values")
    tr.record(build_entry(event, header, values, dynamic), task)


class SynthTraceState:
    """A piecewise trace in progress (``struct synth_event_trace_state``)."""

    def __init__(self, file: EventFileRef, event: SynthEvent, task: Task,
                 entry: bytearray | None) -> None:
        self.file = file
        self.event = event
        self.task = task
        #: The reserved record; None while the event was disabled at start.
        self.entry = entry
        self.add_next = False
        self.add_name = False
        self.cur_field = 0
        self.ended = False

    def __enter__(self) -> SynthTraceState:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # "synth_event_trace_end() must be called ... regardless of whether
        # adding all field values succeeded or not."
        if not self.ended:
            self.end()

    def add_val(self, field_name: str | None, value: int | bytes | None) -> None:
        """``__synth_event_add_val``: the next field (no name) or a named one.

        Raises:
            TracefsError: EINVAL for mixing the two styles in one trace, a
                field past the last, an unknown name, a dynamic string, a
                missing string, or a trace already ended.
            TypeError: a value of the wrong Python type.
        """
        if self.ended:
            raise TracefsError(errno.EINVAL, "the trace has ended")
        # The style is fixed by the first add, even when that add fails.
        if field_name is not None:
            if self.add_next:
                raise TracefsError(errno.EINVAL, "add_val after add_next_val")
            self.add_name = True
        else:
            if self.add_name:
                raise TracefsError(errno.EINVAL, "add_next_val after add_val")
            self.add_next = True
        if self.entry is None:
            return
        fields = self.event.synth_fields
        if field_name is not None:
            field = next((f for f in fields if f.name == field_name), None)
            if field is None:
                raise TracefsError(errno.EINVAL, f"{self.event.name} has no field {field_name!r}")
        else:
            if self.cur_field >= len(fields):
                raise TracefsError(errno.EINVAL, "every field has a value")
            field = fields[self.cur_field]
            self.cur_field += 1
        at = field.offset
        if field.is_string:
            if field.is_dynamic:
                raise TracefsError(errno.EINVAL, "add_val cannot set dynamic strings")
            if value is None:
                raise TracefsError(errno.EINVAL, "no string")
            # strscpy(slot, s, STR_VAR_LEN_MAX): the NUL-padded tail is already 0.
            text = _c_text(_string(value))[:STR_VAR_LEN_MAX - 1] + b"\0"
            self.entry[at:at + len(text)] = text
        else:
            if value is None:
                raise TypeError("a numeric field takes an int, not None")
            self.entry[at:at + _U64] = _number(_integer(value), field.size)

    def end(self) -> None:
        """``synth_event_trace_end``: commit the record (whatever was added).

        Raises:
            TracefsError: EINVAL if already ended.
        """
        if self.ended:
            raise TracefsError(errno.EINVAL, "the trace has ended")
        self.ended = True
        if self.entry is not None:
            self.file.trace_array.record(bytes(self.entry), self.task)


def trace_start(file: EventFileRef, task: Task) -> SynthTraceState:
    """``synth_event_trace_start``: reserve a record to fill field by field.

    Raises:
        TracefsError: ENOTSUPP (524) for events with dynamic fields, EINVAL
            if the record cannot be reserved, or a file that is put or not a synthetic event's.
    """
    event = file.synth_event()
    tr = file.trace_array
    if not tr.enabled(event):
        return SynthTraceState(file, event, task, None)
    if event.dynamic_fields:
        raise TracefsError(ENOTSUPP, "piecewise tracing of dynamic fields")
    if not tr.can_record(event.fixed_size, task.cpu):
        raise TracefsError(errno.EINVAL, "no room for the record (tracing off or too large)")
    entry = bytearray(_header(event, task).ljust(event.fixed_size, b"\0"))
    return SynthTraceState(file, event, task, entry)

