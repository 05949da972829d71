"""The user_events registry: events, references, per-file write indices, enablers.

Rules:
  * The kernel's lifetime rules, exactly: an event holds one reference per
    per-file slot, per enabler and per attached probe, plus a self reference
    when it must outlive them (``USER_EVENT_REG_PERSIST``, events made through
    ``dynamic_events``, and events of the status-page ABIs, which never
    auto-deleted). A non-persistent event is destroyed when its last reference
    goes. Destruction here is synchronous; the kernel defers it to a work item,
    so for a few milliseconds it still answers EBUSY/EADDRINUSE — we give the
    intended result at once.
  * Enable bits live in client memory. Every change of an event's probes is
    written into every process holding an enabler for it, through the injected
    :class:`~._memory.EnableBits`, before the call that changed it returns
    (a driver may make the caller's own first write after the call: see
    :class:`~._memory.EnableBits`).
  * Enablers belong to a process image (:class:`UserEventMm`, the kernel's
    ``struct user_event_mm``), found by key in O(1): by ``(addr, bit)`` in its
    process, by identity in its event. A fork copies them without writing
    (the child's memory is a copy); exec and exit detach the image at once,
    so nothing is written into it again, and its enablers' references are
    dropped either at once or, for the daemon, in bounded steps
    (:meth:`UserEventRegistry.release_detached`), as the kernel drops them
    from a work item after an RCU grace period.
  * Every operation checks everything it can before changing anything, so a
    failure leaves the registry as it was, with the kernel's own two
    exceptions: a registration whose enable bit cannot be written still leaves
    its per-file slot (ENOMEM), and a multi-format registration that fails
    after its tracepoint name was chosen still advances the name counter.

Kernel: kernel/trace/trace_events_user.c (6.10+).
"""

from __future__ import annotations

import errno
from collections import deque
from typing import Callable, Iterator, Protocol

from . import _uapi as uapi
from ._errors import TracefsError
from ._events import EventTable, Probe, TraceEvent
from ._field import KERNEL_SPACE, TRACE_ENTRY, Field
from ._jhash import hash_32, jhash
from ._memory import EnableBits, ProcessMemory, Tgid
from ._task import Task
from ._uapi import Abi
from ._user_command import (UserCommand, fields_match, min_size, parse_fields,
                            print_fmt, show_fields, split_command, split_match_args)

#: Default of the ``kernel.user_events_max`` sysctl.
DEFAULT_USER_EVENTS_MAX = 32768
_REGISTER_TABLE_BITS = 8


class UserEvent(TraceEvent):
    """One user event (``struct user_event``)."""

    def __init__(self, registry: UserEventRegistry, reg_name: str, tp_name: str,
                 fields: tuple[Field, ...], reg_flags: int, legacy: bool) -> None:
        system = (uapi.USER_EVENTS_MULTI_SYSTEM if reg_flags & uapi.USER_EVENT_REG_MULTI_FORMAT
                  else uapi.USER_EVENTS_SYSTEM)
        super().__init__(system, tp_name, fields, print_fmt(fields))
        self.registry = registry
        self.reg_name = reg_name
        self.reg_flags = reg_flags
        #: Created through a status-page ABI: lives until deleted, like there.
        self.legacy = legacy
        self.min_size = min_size(fields)
        # (record offset, __rel_loc?, must end in NUL?) per dynamic field.
        self.validators = tuple(
            (f.offset, f.type.startswith("__rel_loc "), "char" in f.type)
            for f in fields if f.type.startswith(("__data_loc ", "__rel_loc ")))
        self.refcnt = 1 if self.self_ref else 0
        #: Every enabler of every process for this event (an ordered set).
        self.enablers: dict[Enabler, None] = {}
        #: Slot in the status page of the 5.18 (byte) / 6.1 (bit) ABIs.
        self.status_index: int | None = None
        self.status_bit: int | None = None
        self.serial = 0
        self.destroyed = False

    @property
    def persist(self) -> bool:
        return bool(self.reg_flags & uapi.USER_EVENT_REG_PERSIST)

    @property
    def self_ref(self) -> bool:
        return self.persist or self.legacy

    def last_ref(self) -> bool:
        """``user_event_last_ref``: nothing but the self reference is left."""
        return self.refcnt == (1 if self.self_ref else 0)

    def get(self) -> None:
        self.refcnt += 1

    def put(self) -> None:
        """Drop a reference; the last one of a non-persistent event destroys it."""
        assert self.refcnt > 0, f"{self} reference count underflow"
        self.refcnt -= 1
        if self.refcnt == 0 and not self.self_ref:
            self.registry.destroy(self)

    def attach(self, kind: Probe) -> None:
        # user_event_reg(): a registering probe takes a reference first.
        self.get()
        super().attach(kind)

    def detach(self, kind: Probe) -> None:
        super().detach(kind)
        self.put()

    def probes_changed(self) -> None:
        self.registry.publish(self)

    def validate(self, record: bytes | bytearray | memoryview, before: int) -> bool:
        """``user_event_validate``: do the dynamic fields stay inside the record?

        ``before`` is the byte just before the record where it was reserved
        (the last byte of its ring buffer event's header): the kernel checks
        ``*(char *)(pos - 1)`` with ``pos = data + offset + size``, so an
        empty ``__data_loc char[]`` at offset 0 has its terminator checked
        there, outside the record::

            pos = data + offset;   /* __data_loc; __rel_loc: past the field */
            pos += size;
            if (unlikely(pos > end))
                return -EFAULT;
            if (likely(validator->flags & VALIDATOR_ENSURE_NULL))
                if (unlikely(*(char *)(pos - 1) != '\\0'))
                    return -EFAULT;

        Kernel: kernel/trace/trace_events_user.c (user_event_validate).
        """
        end = len(record)
        for offset, rel, ensure_null in self.validators:
            loc = int.from_bytes(record[offset:offset + 4], "little")
            start = offset + 4 + (loc & 0xFFFF) if rel else loc & 0xFFFF
            stop = start + (loc >> 16)
            if stop > end:
                return False
            if ensure_null and (record[stop - 1] if stop else before) != 0:
                return False
        return True

    # -- struct dyn_event_operations ------------------------------------------

    def show(self) -> str:
        """``user_event_show``: this event's ``dynamic_events`` line."""
        return f"{uapi.USER_EVENTS_PREFIX}{self.reg_name}{show_fields(self.fields)}\n"

    def match(self, system: str | None, event: str, argv: list[str]) -> bool:
        """``user_event_match``: the registered name, either user system, the fields."""
        if self.reg_name != event:
            return False
        if system is not None and system not in (uapi.USER_EVENTS_SYSTEM,
                                                 uapi.USER_EVENTS_MULTI_SYSTEM):
            return False
        # 5.18-6.3 user_event_match(): "if (match && argc > 0)": without
        # fields the name alone decides. Mainline's user_fields_match():
        # "if (argc == 0) return list_empty(head)". An auto mount takes the
        # old meaning where the new one finds nothing: no field-less event of
        # this name exists, where mainline would answer ENOENT
        # (docs/emulation.md, "dynamic_events in an auto mount").
        if not argv and (self.legacy or self.registry.era is None
                         and all(e.fields for e in self.registry.named(self.reg_name))):
            return True
        return fields_match(self.fields, argv)

    def is_busy(self) -> bool:
        return not self.last_ref()

    def free(self, task: Task) -> None:
        self.registry.free(self, task)

    def status_line(self) -> str:
        """``user_seq_show``: ``name[ # Used by ftrace perf other]``."""
        status = self.status
        line = self.name
        if status:
            line += " # Used by" + "".join(
                f" {word}" for bit, word in ((Probe.FTRACE, "ftrace"), (Probe.PERF, "perf"),
                                            (Probe.OTHER, "other")) if status & bit)
        return line


class UserEventsProvider:
    """The ``u:`` lines of ``dynamic_events``."""

    def __init__(self, registry: UserEventRegistry) -> None:
        self.registry = registry

    def create(self, command: str, task: Task) -> bool:
        if not command.startswith(uapi.USER_EVENTS_PREFIX):
            return False
        self.registry.create_persistent(
            command[len(uapi.USER_EVENTS_PREFIX):].lstrip(KERNEL_SPACE), task)
        return True


class Enabler:
    """One ``(enable_addr, enable_bit)`` of one process (``user_event_enabler``)."""

    # No enable_size: on little-endian the bit's byte is addr + bit // 8 for
    # 32- and 64-bit values alike (align_addr_bit() only moves big-endian ones).
    __slots__ = ("mm", "event", "addr", "bit")

    def __init__(self, mm: UserEventMm, event: UserEvent, addr: int, bit: int) -> None:
        self.mm = mm
        self.event = event
        self.addr = addr
        self.bit = bit

    @property
    def tgid(self) -> Tgid:
        return self.mm.tgid


class UserEventMm:
    """The enablers of one process image (``struct user_event_mm``).

    Detached at exec or exit: from then on it is never written to, and its
    enablers only wait for their references to be dropped.
    """

    __slots__ = ("tgid", "enablers", "detached")

    def __init__(self, tgid: Tgid) -> None:
        self.tgid = tgid
        #: ``(addr, bit)`` -> enabler; the kernel refuses a second
        #: registration of the same address and bit in one mm (EADDRINUSE).
        self.enablers: dict[tuple[int, int], Enabler] = {}
        self.detached = False


class UserEventsFile:
    """Per-open-file state of ``user_events_data``: the write-index table."""

    def __init__(self) -> None:
        #: Slot i holds the event of write index i and the ABI it came from.
        self.slots: list[tuple[UserEvent, Abi]] = []
        self._index: dict[UserEvent, int] = {}

    def ref_add(self, event: UserEvent, abi: Abi) -> int:
        """``user_events_ref_add``: the event's index here, appending if new."""
        index = self._index.get(event)
        if index is None:
            event.get()
            index = self._index[event] = len(self.slots)
            self.slots.append((event, abi))
        return index

    def release(self) -> None:
        """Final close: every slot drops its reference."""
        slots, self.slots = self.slots, []
        self._index = {}
        for event, _ in slots:
            event.put()


class StatusSlots(Protocol):
    """Where the registry reports each event's enable state for the status-page eras.

    The registry is told nothing about the page's layout; the page (``_status_page``)
    implements this, so the registry stays at the bottom of the user_events modules.
    """

    def has_room(self, abi: Abi) -> bool: ...
    def claim(self, event: UserEvent, abi: Abi) -> None: ...
    def release(self, event: UserEvent) -> None: ...
    def update(self, event: UserEvent) -> None: ...


class ByteReadModifyWrite:
    """:class:`~._memory.EnableBits` through a :class:`~._memory.ProcessMemory`:
    a read-modify-write of the byte holding the bit.

    ``enable_bit`` numbers bits of the 32- or 64-bit value at ``enable_addr``
    (the kernel's align_addr_bit() makes that true for 32-bit values on
    64-bit kernels); on little-endian that is bit ``bit % 8`` of byte
    ``addr + bit // 8``. The kernel's set_bit() is atomic; this
    read-modify-write is not, so a client changing other bits of the same
    byte at the same moment can lose its update.
    """

    def __init__(self, memory: ProcessMemory) -> None:
        self.memory = memory

    def write_bit(self, tgid: Tgid, addr: int, bit: int, value: bool) -> bool:
        byte = addr + bit // 8
        mask = 1 << (bit % 8)
        old = self.memory.read(tgid, byte, 1)
        if len(old) != 1:
            return False
        new = old[0] | mask if value else old[0] & ~mask
        return self.memory.write(tgid, byte, bytes((new,))) == 1


class UserEventRegistry:
    """All user events of one tracefs and everything that refers to them."""

    def __init__(self, events: EventTable, memory: ProcessMemory, *,
                 bits: EnableBits | None = None,
                 status_page: StatusSlots | None = None,
                 max_events: int = DEFAULT_USER_EVENTS_MAX, era: Abi | None = Abi.MAINLINE,
                 on_created: Callable[[UserEvent], None] = lambda event: None,
                 on_destroyed: Callable[[UserEvent], None] = lambda event: None) -> None:
        self.events = events
        self.memory = memory
        self.bits = bits or ByteReadModifyWrite(memory)
        self.status_page = status_page
        self.max_events = max_events
        #: The era ``dynamic_events`` commands follow: a pinned mount's, or
        #: None in an auto mount, where a command's own text decides
        #: (:meth:`create_persistent`, :meth:`UserEvent.match`).
        self.era = era
        self._on_created = on_created
        self._on_destroyed = on_destroyed
        self._by_name: dict[str, list[UserEvent]] = {}
        self._count = 0  # current_user_events
        self._serial = 0
        #: Per-group u64 counter naming multi-format tracepoints ``name.%llx``.
        self.multi_id = 0
        #: The live process images holding enablers (the kernel's user_event_mms).
        self.mms: dict[Tgid, UserEventMm] = {}
        #: Detached images whose enablers still hold their event references.
        self._detached: deque[UserEventMm] = deque()

    # -- lookup ---------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[UserEvent]:
        """Events in the kernel's hash-table order (``user_seq_show``)."""
        return iter(self.in_hash_order(_REGISTER_TABLE_BITS))

    def in_hash_order(self, bits: int) -> list[UserEvent]:
        """Events bucket by bucket of a ``1 << bits`` hash table, newest first
        within one (``hash_for_each``; the table had 4 bits in 5.18)."""
        return sorted(
            (e for chain in self._by_name.values() for e in chain),
            key=lambda e: (hash_32(jhash(e.reg_name.encode("latin-1")), bits), -e.serial))

    def named(self, reg_name: str) -> list[UserEvent]:
        """Events registered under ``reg_name``, newest first (one hash chain)."""
        return list(self._by_name.get(reg_name, ()))

    # -- creation ---------------------------------------------------------------

    def find_or_create(self, command: UserCommand, reg_flags: int, task: Task,
                       abi: Abi = Abi.MAINLINE) -> tuple[UserEvent, bool]:
        """``user_event_parse``: the event a command names, made if missing.

        Returns the event and whether it was created; the caller owns one new
        reference to it either way.

        Raises:
            TracefsError: EINVAL (text flags, bad fields), EPERM (PERSIST
                without CAP_PERFMON), EADDRINUSE (same name, other fields),
                EMFILE (``user_events_max`` reached, or no free slot of an
                old era's status page), ENODEV (no event id left).
        """
        if command.flags is not None and abi is Abi.MAINLINE:
            raise TracefsError(errno.EINVAL, "text flags after ':' are not supported")
        if reg_flags & uapi.USER_EVENT_REG_PERSIST and not task.perfmon:
            raise TracefsError(errno.EPERM, "persistent events need CAP_PERFMON")
        existing = self._find(command, reg_flags, abi)
        if existing is not None:
            if self.status_page is not None:
                # An auto mount's event may lack a slot of this era (made by
                # another era, a mainline client or dynamic_events).
                self.status_page.claim(existing, abi)
            existing.get()
            return existing, False
        if self.status_page is not None and not self.status_page.has_room(abi):
            # 5.18-6.3: find_first_zero_bit() of the page before the fields
            # are parsed, so a full page refuses even a malformed command.
            raise TracefsError(errno.EMFILE, "the status page is full")
        multi = bool(reg_flags & uapi.USER_EVENT_REG_MULTI_FORMAT)
        tp_name = command.name
        if multi:
            # user_event_set_tp_name() runs before the fields are parsed.
            tp_name = f"{command.name}.{self.multi_id:x}"
            self.multi_id = (self.multi_id + 1) & 0xFFFFFFFFFFFFFFFF
        fields = parse_fields(command.args)
        if len(self) >= self.max_events:
            raise TracefsError(errno.EMFILE, "user_events_max reached")
        event = UserEvent(self, command.name, tp_name, fields, reg_flags,
                          legacy=abi is not Abi.MAINLINE)
        self.events.add(event)
        if self.status_page is not None:
            self.status_page.claim(event, abi)  # has room: checked above
        self._serial += 1
        event.serial = self._serial
        self._by_name.setdefault(command.name, []).insert(0, event)
        self._count += 1
        event.get()  # the caller's reference
        self._on_created(event)
        return event, True

    def _find(self, command: UserCommand, reg_flags: int, abi: Abi) -> UserEvent | None:
        """``find_user_event``: an existing event, None, or EADDRINUSE."""
        multi = reg_flags & uapi.USER_EVENT_REG_MULTI_FORMAT
        argv = split_match_args(command.args) if command.args is not None else []
        for event in self._by_name.get(command.name, ()):
            if (event.reg_flags & uapi.USER_EVENT_REG_MULTI_FORMAT) != multi:
                continue
            # Before 6.4 a name was enough: the field list was ignored.
            if abi is not Abi.MAINLINE or fields_match(event.fields, argv):
                return event
            if multi:
                continue
            raise TracefsError(errno.EADDRINUSE, f"{command.name} exists with other fields")
        return None

    def create_persistent(self, command_text: str, task: Task) -> UserEvent:
        """``user_event_create``: a ``u:`` line of ``dynamic_events``.

        Raises:
            TracefsError: as :meth:`find_or_create`.
        """
        command = split_command(command_text)
        era = self.era
        if era is None:
            # An auto mount: text flags (``name:BPF_ITER``) were parsed only
            # by 5.18-6.3 and are refused by mainline whatever they say, so a
            # line carrying them is an old-era line.
            era = Abi.MAINLINE if command.flags is None else Abi.V6_1
        if era is Abi.MAINLINE:
            event, _ = self.find_or_create(command, uapi.USER_EVENT_REG_PERSIST, task)
        else:
            # 5.18-6.3 user_event_create(): text flags ignored, an existing
            # name returned whatever its fields, no PERSIST (the self
            # reference every event had then; deletable without CAP_PERFMON).
            event, _ = self.find_or_create(command, 0, task, era)
        event.put()
        return event

    # -- deletion -----------------------------------------------------------

    def delete(self, reg_name: str, task: Task) -> None:
        """``delete_user_event``: DIAG_IOCSDEL of every format of a name.

        Raises:
            TracefsError: EBUSY if one is referenced (earlier ones may already
                be gone, as in the kernel), EPERM for a persistent event without
                CAP_PERFMON, ENOENT if there is none.
        """
        found = False
        for event in self.named(reg_name):
            self.free(event, task)
            found = True
        if not found:
            raise TracefsError(errno.ENOENT, f"no user event {reg_name!r}")

    def free(self, event: UserEvent, task: Task) -> None:
        """``user_event_free``: destroy an unreferenced event on request.

        Raises:
            TracefsError: EBUSY while referenced, EPERM for a persistent event
                without CAP_PERFMON.
        """
        if not event.last_ref():
            raise TracefsError(errno.EBUSY, f"{event.name} is in use")
        if event.persist and not task.perfmon:
            raise TracefsError(errno.EPERM, "deleting persistent events needs CAP_PERFMON")
        self.destroy(event)

    def destroy(self, event: UserEvent) -> None:
        """``destroy_user_event``: remove the event from everywhere."""
        assert not event.destroyed and not event.status, f"{event} destroyed while in use"
        event.destroyed = True
        chain = self._by_name[event.reg_name]
        chain.remove(event)
        if not chain:
            del self._by_name[event.reg_name]
        self._count -= 1
        if self.status_page is not None:
            self.status_page.release(event)
        self.events.remove(event)
        self._on_destroyed(event)

    # -- enablers -------------------------------------------------------------

    def enabler_exists(self, tgid: Tgid, addr: int, bit: int) -> bool:
        mm = self.mms.get(tgid)
        return mm is not None and (addr, bit) in mm.enablers

    def add_enabler(self, tgid: Tgid, event: UserEvent, addr: int, bit: int) -> bool:
        """``user_event_enabler_create``: write the current state, then track it.

        Returns False (and tracks nothing) when the bit cannot be written.
        """
        mm = self.mms.get(tgid) or UserEventMm(tgid)
        enabler = Enabler(mm, event, addr, bit)
        if not self._write_bit(enabler, bool(event.status)):
            return False
        self.mms[tgid] = mm
        self._track(enabler)
        return True

    def remove_enablers(self, tgid: Tgid, addr: int, bit: int) -> int:
        """``DIAG_IOCSUNREG``: drop this process's enabler of ``(addr, bit)``.

        Returns how many were removed (0 or 1: a pair is registered once per
        process); the bit is cleared afterwards by the caller whatever the
        event state (see :meth:`clear_bit`).
        """
        mm = self.mms.get(tgid)
        enabler = mm.enablers.pop((addr, bit), None) if mm is not None else None
        if enabler is None:
            return 0
        self._release(enabler)
        return 1

    def clear_bit(self, tgid: Tgid, addr: int, bit: int) -> bool:
        mm = self.mms.get(tgid) or UserEventMm(tgid)
        return self._write_bit(Enabler(mm, None, addr, bit), False)  # type: ignore[arg-type]

    def fork(self, parent: Tgid, child: Tgid) -> None:
        """``user_event_mm_dup``: the child gets a copy of every enabler.

        No memory is written: the child's memory is a copy of the parent's,
        and the caller hands over a child before any later change of state is
        written (so the child gets that write with everyone else).
        """
        source = self.mms.get(parent)
        if source is None or not source.enablers:
            return
        assert child not in self.mms, f"{child} already holds enablers"
        mm = self.mms[child] = UserEventMm(child)
        for enabler in source.enablers.values():
            self._track(Enabler(mm, enabler.event, enabler.addr, enabler.bit))

    def exit(self, tgid: Tgid, *, deferred: bool = False) -> None:
        """``user_event_mm_remove``: exec or exit drops every enabler, unwritten.

        The image is detached at once: nothing is written into it again and a
        new image under the same number starts afresh. Its enablers' event
        references are dropped now, or with ``deferred`` left to
        :meth:`release_detached` (which may then destroy events), so that a
        process with many enablers never holds everyone else up.
        """
        mm = self.mms.pop(tgid, None)
        if mm is None:
            return
        mm.detached = True
        self._detached.append(mm)
        if not deferred:
            self.release_detached()

    def release_detached(self, budget: int | None = None) -> bool:
        """Drop the references of detached images' enablers, at most ``budget``.

        Returns True once nothing is left to drop.
        """
        done = 0
        while self._detached:
            enablers = self._detached[0].enablers
            while enablers:
                if budget is not None and done >= budget:
                    return False
                _, enabler = enablers.popitem()
                self._release(enabler)
                done += 1
            self._detached.popleft()
        return True

    def _track(self, enabler: Enabler) -> None:
        enabler.event.get()
        enabler.event.enablers[enabler] = None
        enabler.mm.enablers[(enabler.addr, enabler.bit)] = enabler

    def _release(self, enabler: Enabler) -> None:
        del enabler.event.enablers[enabler]
        enabler.event.put()

    def publish(self, event: UserEvent) -> None:
        """``update_enable_bit_for``: reflect the probe state everywhere."""
        enabled = bool(event.status)
        for enabler in list(event.enablers):
            # A fault leaves the enabler registered: the kernel retries from a
            # work item, then gives up with a warning.
            if not enabler.mm.detached:
                self._write_bit(enabler, enabled)
        if self.status_page is not None:
            self.status_page.update(event)

    def _write_bit(self, enabler: Enabler, value: bool) -> bool:
        """Set or clear one enabler's bit in its process."""
        return self.bits.write_bit(enabler.tgid, enabler.addr, enabler.bit, value)

    # -- records ----------------------------------------------------------------

    def record_header(self, event: UserEvent, task: Task) -> bytes:
        """The common fields of a record: type, flags, preempt count, pid.

        The kernel records user events from process context with the
        tracepoint's own preempt-disable subtracted: flags and count are 0.
        """
        return TRACE_ENTRY.pack(event.id, 0, 0, task.pid)


def render_status(registry: UserEventRegistry) -> str:
    """``user_seq_show`` (6.4+): one line per event, then ``Active:``/``Busy:``."""
    lines = []
    busy = 0
    for event in registry:
        lines.append(event.status_line() + "\n")
        busy += bool(event.status)
    return "".join(lines) + f"\nActive: {len(lines)}\nBusy: {busy}\n"
