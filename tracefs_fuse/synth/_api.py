"""The in-process tracing API: the kernel's synthetic-event API, in Python.

In the kernel, code creates synthetic events and traces them through the
"in-kernel trace event API" (Documentation/trace/events.rst §6.3). Here the
daemon's Python process plays the kernel: an embedding program (or a test)
calls these functions on the daemon's :class:`~tracefs_fuse.engine.Tracefs`,
and the events appear under ``events/synthetic/`` and in the ring buffers
exactly as kernel synthetic events do, so trace-cmd and libtraceevent decode
them.

Rules:
  * Same names, same steps, same rules as the kernel API. Where the kernel
    returns ``-errno``, this raises :class:`TracefsError` with that errno;
    EINVAL for mixing ``add_next_val`` and ``add_val`` in one trace, EBUSY
    for deleting an event whose file is held or which is enabled, and so on.
    What the kernel expresses with pointers and NULL terminators is ordinary
    Python: fields are ``(type, name)`` pairs, strings are ``str`` (UTF-8) or
    ``bytes``, a stack is a sequence of addresses, and a wrong Python type is
    a :class:`TypeError`.
  * The module names the kernel's objects after the kernel: a
    :class:`DynEventCmd` is a ``struct dynevent_cmd`` (it builds kprobe
    commands too), an :class:`EventFileRef` is a held ``trace_event_file``
    and a :class:`SynthTraceState` a ``synth_event_trace_state``. The latter
    two are context managers that put the file / end the trace on exit.
  * Everything is synchronous, like the engine. Call it in the daemon's trio
    thread (between two awaits), or from another thread through
    ``trio.from_thread.run_sync``: the engine is not thread-safe.
  * Records carry the calling thread as the kernel's ``current``:
    ``common_pid`` is its thread id, the record goes to the ring buffer of the
    CPU it runs on (``task=`` overrides both).

Kernel: kernel/trace/trace_events_synth.c, trace_dynevent.c, trace_kprobe.c
(``kprobe_event_*``), trace_events.c (``trace_get_event_file``,
``trace_array_set_clr_event``), include/linux/trace_events.h, 6.12.
"""

from __future__ import annotations

import enum
import errno
import os
import threading
from typing import Iterable, Sequence, Union

import msgspec

from ..engine._errors import TracefsError
from ..engine._synth import (
    SYNTH_FIELDS_MAX,
    EventFileRef,
    SynthTraceState,
    SynthValue,
    get_event_file,
    synth_field_size,
    trace,
    trace_start,
)
from ..engine._task import Task
from ..engine._tracefs import Tracefs
from ..lib import libc

__all__ = [
    "MAX_DYNEVENT_CMD_LEN", "DynEventCmd", "DynEventType", "EventFileRef", "SynthFieldDesc",
    "SynthTraceState", "TracefsError", "current_task",
    "synth_event_cmd_init", "synth_event_gen_cmd_start", "synth_event_gen_cmd_array_start",
    "synth_event_add_field", "synth_event_add_field_str", "synth_event_add_fields",
    "synth_event_gen_cmd_end", "synth_event_create", "synth_event_delete",
    "kprobe_event_cmd_init", "kprobe_event_gen_cmd_start", "kretprobe_event_gen_cmd_start",
    "kprobe_event_add_field", "kprobe_event_add_fields", "kprobe_event_gen_cmd_end",
    "kretprobe_event_gen_cmd_end", "kprobe_event_delete", "dynevent_create",
    "trace_get_event_file", "trace_put_event_file", "trace_array_set_clr_event",
    "synth_event_trace", "synth_event_trace_array", "synth_event_trace_start",
    "synth_event_add_next_val", "synth_event_add_val", "synth_event_trace_end",
]

#: MAX_DYNEVENT_CMD_LEN: the buffer synth_event_create() builds its command in.
MAX_DYNEVENT_CMD_LEN = 2048
#: MAX_EVENT_NAME_LEN: ``p:kprobes/<name>`` and ``-:<name>`` are cut to 63 bytes.
MAX_EVENT_NAME_LEN = 64
#: MAX_TRACE_ARGS: fetch arguments per kprobe command.
MAX_TRACE_ARGS = 128


class DynEventType(enum.Enum):
    """``enum dynevent_type``."""

    SYNTH = "synth"
    KPROBE = "kprobe"


class SynthFieldDesc(msgspec.Struct, frozen=True):
    """``struct synth_field_desc``: a field's type and name."""

    type: str
    name: str


FieldDesc = Union[SynthFieldDesc, tuple[str, str]]
#: A value as this API takes it: strings may be ``str`` (sent as UTF-8).
Value = Union[int, str, bytes, Sequence[int]]


class DynEventCmd:
    """``struct dynevent_cmd``: a command built piece by piece, then run.

    The text lives in a ``seq_buf`` of ``maxlen`` bytes: a piece that does not
    fit is E2BIG, what fitted of it stays, and every later piece is E2BIG too.
    """

    def __init__(self, tracefs: Tracefs, type_: DynEventType, maxlen: int) -> None:
        self.tracefs = tracefs
        self.type = type_
        self.size = maxlen
        self.n_fields = 0
        #: The synthetic event the command creates (``cmd->event_name``).
        self.event_name: str | None = None
        self._text = ""
        self._len = 0

    @property
    def text(self) -> str:
        """The command so far (the C string in the buffer)."""
        return self._text

    def _overflow(self) -> TracefsError:
        self._len = self.size + 1  # seq_buf_set_overflow()
        return TracefsError(errno.E2BIG, "dynamic event command too long")

    def printf(self, piece: str) -> None:
        """``seq_buf_printf``: append, or keep what fits and fail.

        Raises:
            TracefsError: E2BIG when the buffer is (or gets) full.
        """
        if self._len < self.size:
            self._text += piece[:self.size - self._len - 1]
            if self._len + len(piece) < self.size:
                self._len += len(piece)
                return
        raise self._overflow()

    def puts(self, piece: str) -> None:
        """``seq_buf_puts``: append whole, or nothing and fail.

        Raises:
            TracefsError: E2BIG when it does not fit with its NUL.
        """
        if self._len <= self.size and self.size - self._len >= len(piece) + 1:
            self._text += piece
            self._len += len(piece)
            return
        raise self._overflow()

    def check_type(self, type_: DynEventType) -> None:
        if self.type is not type_:
            raise TracefsError(errno.EINVAL, f"a {self.type.value} command, not {type_.value}")


# -- building and running commands --------------------------------------------------------


def synth_event_cmd_init(tracefs: Tracefs, maxlen: int = MAX_DYNEVENT_CMD_LEN) -> DynEventCmd:
    """``synth_event_cmd_init``: a new synthetic event command for ``tracefs``."""
    return DynEventCmd(tracefs, DynEventType.SYNTH, maxlen)


def _pair(desc: FieldDesc) -> tuple[str, str]:
    type_, name = (desc.type, desc.name) if isinstance(desc, SynthFieldDesc) else desc
    if type_ is None or name is None:
        raise TracefsError(errno.EINVAL, "a field needs a type and a name")
    return type_, name


def synth_event_gen_cmd_start(cmd: DynEventCmd, name: str, *fields: FieldDesc) -> None:
    """``synth_event_gen_cmd_start``: the event's name and its first fields.

    As in the kernel, each field given here counts twice toward the 64-field
    limit (the varargs loop and synth_event_add_field() both count it), so
    at most 32 fields can be given here; add more with
    :func:`synth_event_add_field`.

    Raises:
        TracefsError: EINVAL (wrong command type, a bad type, too many
            fields), E2BIG (command too long).
    """
    cmd.event_name = name
    cmd.check_type(DynEventType.SYNTH)
    cmd.printf(f" {name} ")
    for desc in fields:
        cmd.n_fields += 1
        if cmd.n_fields > SYNTH_FIELDS_MAX:
            raise TracefsError(errno.EINVAL, "too many fields")
        synth_event_add_field(cmd, *_pair(desc))


def synth_event_gen_cmd_array_start(cmd: DynEventCmd, name: str,
                                    fields: Sequence[FieldDesc]) -> None:
    """``synth_event_gen_cmd_array_start``: the name and a list of fields.

    Raises:
        TracefsError: EINVAL (wrong command type, more than 64 fields, a
            field without type or name, a bad type), E2BIG.
    """
    cmd.event_name = name
    cmd.check_type(DynEventType.SYNTH)
    if len(fields) > SYNTH_FIELDS_MAX:
        raise TracefsError(errno.EINVAL, "too many fields")
    cmd.printf(f" {name} ")
    for desc in fields:
        synth_event_add_field(cmd, *_pair(desc))


def synth_event_add_field(cmd: DynEventCmd, type: str, name: str) -> None:  # noqa: A002
    """``synth_event_add_field``: append ``type name;``.

    The type is checked as ``synth_event_check_arg_fn`` does: it must be
    known, or contain ``[`` (arrays are checked when the command runs).

    Raises:
        TracefsError: EINVAL (wrong command type, missing or unknown type,
            more than 64 fields), E2BIG.
    """
    cmd.check_type(DynEventType.SYNTH)
    if type is None or name is None:
        raise TracefsError(errno.EINVAL, "a field needs a type and a name")
    # synth_event_check_arg_fn: a size (or a malformed char[N], negative
    # there, truthy) passes; 0 passes only for something with a '['.
    if synth_field_size(type) == 0 and "[" not in type:
        raise TracefsError(errno.EINVAL, f"unknown field type {type!r}")
    cmd.printf(f" {type} {name};")
    cmd.n_fields += 1
    if cmd.n_fields > SYNTH_FIELDS_MAX:
        raise TracefsError(errno.EINVAL, "too many fields")


def synth_event_add_field_str(cmd: DynEventCmd, type_name: str) -> None:
    """``synth_event_add_field_str``: append ``"type name"`` unchecked, and ``;``.

    Raises:
        TracefsError: EINVAL (wrong command type, None, more than 64 fields), E2BIG.
    """
    cmd.check_type(DynEventType.SYNTH)
    if type_name is None:
        raise TracefsError(errno.EINVAL, "no field")
    cmd.printf(f" {type_name};")
    cmd.n_fields += 1
    if cmd.n_fields > SYNTH_FIELDS_MAX:
        raise TracefsError(errno.EINVAL, "too many fields")


def synth_event_add_fields(cmd: DynEventCmd, fields: Iterable[FieldDesc]) -> None:
    """``synth_event_add_fields``: :func:`synth_event_add_field` for each, in order.

    Raises:
        TracefsError: as :func:`synth_event_add_field`; fields before the
            failing one stay added.
    """
    for desc in fields:
        synth_event_add_field(cmd, *_pair(desc))


def dynevent_create(cmd: DynEventCmd) -> None:
    """``dynevent_create``: run the command (``*_gen_cmd_end`` are this).

    Raises:
        TracefsError: what running it raises: for a synthetic event the
            ``synthetic_events`` errors (logged in ``error_log``), ENOENT if
            the event it names was not made; for a kprobe always EINVAL
            (logged), as for a kernel without the symbol.
    """
    tfs = cmd.tracefs
    if cmd.type is DynEventType.KPROBE:
        tfs.kprobe_events.run_command(cmd.text, current_task(tfs.nr_cpus))
        return
    tfs.synth_events.run_command(cmd.text)
    if cmd.event_name is None or tfs.synth_events.find(cmd.event_name) is None:
        raise TracefsError(errno.ENOENT, f"the command made no event {cmd.event_name!r}")


synth_event_gen_cmd_end = dynevent_create
kprobe_event_gen_cmd_end = dynevent_create
kretprobe_event_gen_cmd_end = dynevent_create


def synth_event_create(tracefs: Tracefs, name: str, fields: Sequence[FieldDesc]) -> None:
    """``synth_event_create``: make ``synthetic/<name>`` in one step.

    Raises:
        TracefsError: EINVAL (bad name or fields, logged), EEXIST (logged),
            E2BIG (over 2048 bytes of command).
    """
    cmd = synth_event_cmd_init(tracefs, MAX_DYNEVENT_CMD_LEN)
    synth_event_gen_cmd_array_start(cmd, name, fields)
    synth_event_gen_cmd_end(cmd)


def synth_event_delete(tracefs: Tracefs, name: str) -> None:
    """``synth_event_delete``.

    Raises:
        TracefsError: ENOENT if there is no such event, EBUSY while its file
            is held or it is enabled.
    """
    tracefs.synth_events.delete(name)


def kprobe_event_cmd_init(tracefs: Tracefs, maxlen: int = MAX_DYNEVENT_CMD_LEN) -> DynEventCmd:
    """``kprobe_event_cmd_init``: a new kprobe command for ``tracefs``."""
    return DynEventCmd(tracefs, DynEventType.KPROBE, maxlen)


def _kprobe_gen_cmd_start(cmd: DynEventCmd, kretprobe: bool, name: str, loc: str,
                          args: tuple[str, ...]) -> None:
    cmd.check_type(DynEventType.KPROBE)
    if loc is None:
        raise TracefsError(errno.EINVAL, "a kprobe needs a location")
    # snprintf(buf, MAX_EVENT_NAME_LEN, "p:kprobes/%s", name)
    cmd.puts(f"{'r' if kretprobe else 'p'}:kprobes/{name}"[:MAX_EVENT_NAME_LEN - 1])
    cmd.printf(f" {loc} ")
    kprobe_event_add_fields(cmd, *args)


def kprobe_event_gen_cmd_start(cmd: DynEventCmd, name: str, loc: str, *args: str) -> None:
    """``kprobe_event_gen_cmd_start``: ``p:kprobes/<name> <loc> <args...>``.

    Raises:
        TracefsError: EINVAL (wrong command type, no location, over 128
            arguments), E2BIG.
    """
    _kprobe_gen_cmd_start(cmd, False, name, loc, args)


def kretprobe_event_gen_cmd_start(cmd: DynEventCmd, name: str, loc: str, *args: str) -> None:
    """``kretprobe_event_gen_cmd_start``: ``r:kprobes/<name> <loc> <args...>``.

    Raises:
        TracefsError: as :func:`kprobe_event_gen_cmd_start`.
    """
    _kprobe_gen_cmd_start(cmd, True, name, loc, args)


def kprobe_event_add_fields(cmd: DynEventCmd, *args: str) -> None:
    """``kprobe_event_add_fields``: append fetch arguments.

    Raises:
        TracefsError: EINVAL (wrong command type, over 128 arguments), E2BIG.
    """
    cmd.check_type(DynEventType.KPROBE)
    for arg in args:
        cmd.n_fields += 1
        if cmd.n_fields > MAX_TRACE_ARGS:
            raise TracefsError(errno.EINVAL, "too many fetch arguments")
        cmd.printf(f" {arg} ")


def kprobe_event_add_field(cmd: DynEventCmd, arg: str) -> None:
    """``kprobe_event_add_field``: one fetch argument.

    Raises:
        TracefsError: as :func:`kprobe_event_add_fields`.
    """
    kprobe_event_add_fields(cmd, arg)


def kprobe_event_delete(tracefs: Tracefs, name: str) -> None:
    """``kprobe_event_delete``: ``-:<name>`` (there never is one to delete).

    Raises:
        TracefsError: ENOENT, or EINVAL for a malformed name.
    """
    tracefs.kprobe_events.run_command(
        f"-:{name}"[:MAX_EVENT_NAME_LEN - 1], current_task(tracefs.nr_cpus))


# -- event files and tracing ---------------------------------------------------------------


def trace_get_event_file(tracefs: Tracefs, instance: str | None, system: str,
                         event: str) -> EventFileRef:
    """``trace_get_event_file``: hold an event's file; deleting it is EBUSY until put.

    Use as a context manager to put it on exit.

    Raises:
        TracefsError: ENOENT for an instance (there are none), EINVAL if
            there is no such event.
    """
    if instance is not None:
        raise TracefsError(errno.ENOENT, f"no instance {instance!r}")
    return get_event_file(tracefs.top, system, event, tracefs.nr_cpus)


def trace_put_event_file(file: EventFileRef) -> None:
    """``trace_put_event_file``.

    Raises:
        TracefsError: EINVAL if already put.
    """
    file.put()


def trace_array_set_clr_event(tracefs: Tracefs, system: str | None, event: str | None,
                              enable: bool) -> None:
    """``trace_array_set_clr_event`` on the top-level trace array.

    Raises:
        TracefsError: EINVAL if nothing matches.
    """
    tracefs.top.set_clr_event(enable, system=system, name=event)


def _value(value: Value) -> SynthValue:
    return value.encode() if isinstance(value, str) else value


def synth_event_trace(file: EventFileRef, *vals: Value, task: Task | None = None) -> None:
    """``synth_event_trace``: record one event, values in field order.

    Nothing is recorded while the event is disabled. With the wrong number
    of values the kernel commits the reserved record before failing; so does
    this, fields zeroed.

    Raises:
        TracefsError: EINVAL (wrong number of values, tracing off, record
            too large, a file that is put or not a synthetic event's).
        TypeError: a value of the wrong type for its field.
    """
    synth_event_trace_array(file, vals, task=task)


def synth_event_trace_array(file: EventFileRef, vals: Sequence[Value], *,
                            task: Task | None = None) -> None:
    """``synth_event_trace_array``: :func:`synth_event_trace` with a list.

    Raises:
        TracefsError: as :func:`synth_event_trace`.
        TypeError: as :func:`synth_event_trace`.
    """
    tfs_task = task if task is not None else _current_task(file)
    trace(file, [_value(v) for v in vals], tfs_task)


def synth_event_trace_start(file: EventFileRef, *, task: Task | None = None) -> SynthTraceState:
    """``synth_event_trace_start``: open a record to fill field by field.

    Fill it with either :func:`synth_event_add_next_val` or
    :func:`synth_event_add_val`, never both, then close it with
    :func:`synth_event_trace_end` (also after a failed add): an unclosed
    trace records nothing. As a context manager it ends on exit.

    Raises:
        TracefsError: ENOTSUPP (524) for events with dynamic fields, EINVAL
            (tracing off, a file that is put or not a synthetic event's).
    """
    return trace_start(file, task if task is not None else _current_task(file))


def synth_event_add_next_val(val: Value | None, trace_state: SynthTraceState) -> None:
    """``synth_event_add_next_val``: set the next field.

    Raises:
        TracefsError: EINVAL (after :func:`synth_event_add_val`, past the last
            field, a dynamic string, no string, trace ended).
        TypeError: a value of the wrong type for the field.
    """
    trace_state.add_val(None, _scalar(val))


def synth_event_add_val(field_name: str, val: Value | None, trace_state: SynthTraceState) -> None:
    """``synth_event_add_val``: set a field by name.

    Raises:
        TracefsError: EINVAL (after :func:`synth_event_add_next_val`, no such
            field, a dynamic string, no string, trace ended).
        TypeError: a value of the wrong type for the field.
    """
    trace_state.add_val(field_name, _scalar(val))


def _scalar(val: Value | None) -> int | bytes | None:
    value = _value(val) if val is not None else None
    if value is not None and not isinstance(value, (int, bytes)):
        raise TypeError("piecewise values are numbers or strings")
    return value


def synth_event_trace_end(trace_state: SynthTraceState) -> None:
    """``synth_event_trace_end``: commit the record.

    Raises:
        TracefsError: EINVAL if already ended.
    """
    trace_state.end()


# -- who is calling -------------------------------------------------------------------------

_local = threading.local()


def _current_task(file: EventFileRef) -> Task:
    return current_task(file.nr_cpus)


def current_task(nr_cpus: int) -> Task:
    """The calling thread as the kernel's ``current``: tid, tgid, comm, CPU.

    The CPU comes from ``sched_getcpu()``, folded into ``nr_cpus``.
    """
    comm = getattr(_local, "comm", None)
    if comm is None:
        try:
            with open("/proc/thread-self/comm", encoding="utf-8", errors="surrogateescape") as f:
                comm = f.read().rstrip("\n")
        except OSError:
            comm = "<...>"
        _local.comm = comm
    cpu = max(libc.sched_getcpu(), 0) % max(nr_cpus, 1)
    return Task(pid=threading.get_native_id(), tgid=os.getpid(),  # type: ignore[arg-type]
                perfmon=True, cpu=cpu, comm=comm)
