"""``user_events_data``: DIAG_IOCSREG / DIAG_IOCSDEL / DIAG_IOCSUNREG and writes.

Rules:
  * Each ioctl reads the caller's argument through the injected
    :class:`~._memory.ProcessMemory`, in the kernel's order, so every errno
    comes from the same step as in the kernel (``get_user`` of ``size`` before
    ``copy_struct_from_user``, the EADDRINUSE check before the name is even
    read, ``put_user`` of ``write_index`` last with its result ignored).
  * The ABI era of a registration is chosen by ``struct user_reg.size`` in an
    ``auto`` mount; a mount pinned to one era applies only that era's rules.
  * A write names an event by the index its file handed out and is recorded
    into every trace array that has the event enabled.

Kernel: kernel/trace/trace_events_user.c (``user_events_ioctl_reg``,
``user_events_ioctl_del``, ``user_events_ioctl_unreg``, ``user_events_write_core``).
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from . import _uapi as uapi
from ._errors import TracefsError
from ._legacy_abi import LegacyRegistration
from ._task import Task
from ._uaccess import copy_from_user, copy_struct_from_user, copy_struct_reads, strndup_user
from ._uapi import Abi
from ._user_command import split_command
from ._user_events import UserEvent, UserEventRegistry, UserEventsFile


class UserEventsData:
    """The operations of an open ``user_events_data`` file."""

    def __init__(self, registry: UserEventRegistry, abis: frozenset[Abi],
                 legacy: LegacyRegistration | None = None) -> None:
        self.registry = registry
        self.memory = registry.memory
        self.abis = abis
        self.legacy = legacy

    # -- ioctl ------------------------------------------------------------------

    def ioctl(self, file: UserEventsFile, cmd: int, arg: int, task: Task) -> int:
        """Dispatch one ioctl; returns the ioctl's (non-negative) result.

        Raises:
            TracefsError: the errno the kernel returns; ENOTTY for unknown commands.
        """
        if cmd == uapi.DIAG_IOCSREG:
            self.register(file, arg, task)
        elif cmd == uapi.DIAG_IOCSDEL:
            name = strndup_user(self.memory, task, arg, uapi.MAX_EVENT_DESC)
            self.registry.delete(name, task)
        elif cmd == uapi.DIAG_IOCSUNREG and Abi.MAINLINE in self.abis:
            self.unregister(arg, task)
        else:
            raise TracefsError(errno.ENOTTY, f"unknown ioctl {cmd:#x}")
        return 0

    def register(self, file: UserEventsFile, arg: int, task: Task) -> None:
        """DIAG_IOCSREG, in whichever era the struct's size announces."""
        size = int.from_bytes(copy_from_user(self.memory, task, arg, 4), "little")
        if size > uapi.PAGE_SIZE:
            raise TracefsError(errno.E2BIG, f"user_reg.size {size} exceeds a page")
        abi = self._abi_of(size)
        if abi is Abi.MAINLINE:
            self._register_mainline(file, arg, size, task)
        else:
            assert self.legacy is not None
            self.legacy.register(file, arg, size, abi, task)

    def _abi_of(self, size: int) -> Abi:
        if len(self.abis) == 1:
            (abi,) = self.abis
            if abi is Abi.MAINLINE and size < uapi.USER_REG.size:
                raise TracefsError(errno.EINVAL, f"user_reg.size {size} is below 28")
            return abi
        era = uapi.abi_of_size(size)
        if era is None:
            raise TracefsError(errno.EINVAL, f"user_reg.size {size} matches no ABI")
        return era

    def registration_reads(self, arg: int, size: int, read: Callable[[int, int], bytes]) -> None:
        """What a ``DIAG_IOCSREG`` at ``arg`` whose ``user_reg.size`` is
        ``size`` (already read) reads of its caller after the size, in the
        kernel's order, through ``read(addr, size)``: the struct, then the
        name, unless a check before the name refuses the call. The one check
        that needs the registry (mainline's EADDRINUSE) is not made: the name
        is read then although the kernel would not.

        For a caller whose reads each cost a round trip to another thread:
        the call, run afterwards on what was read, finds it all there.
        Reads only this mount's fixed ABIs: safe on any thread.
        """
        if size > uapi.PAGE_SIZE:
            return
        try:
            abi = self._abi_of(size)
        except TracefsError:
            return
        if abi is Abi.MAINLINE:
            raw = copy_struct_reads(arg, size, uapi.USER_REG.size, read)
            try:
                name_args = None if raw is None else check_user_reg(raw)[3]
            except TracefsError:
                return
        else:
            assert self.legacy is not None
            name_args = self.legacy.name_args(arg, size, abi, read)
        if name_args is not None:
            read(name_args, uapi.MAX_EVENT_DESC)

    def _register_mainline(self, file: UserEventsFile, arg: int, size: int, task: Task) -> None:
        raw = copy_struct_from_user(self.memory, task, arg, size, uapi.USER_REG.size)
        enable_bit, flags, enable_addr, name_args = check_user_reg(raw)
        # "Prevent users from using the same address and bit multiple times";
        # checked before the name is read.
        if self.registry.enabler_exists(task.tgid, enable_addr, enable_bit):
            raise TracefsError(errno.EADDRINUSE, "enable_addr/enable_bit already registered")
        name = strndup_user(self.memory, task, name_args, uapi.MAX_EVENT_DESC)
        event, _ = self.registry.find_or_create(split_command(name), flags, task)
        index = file.ref_add(event, Abi.MAINLINE)
        event.put()  # the parse reference; the slot holds its own
        if not self.registry.add_enabler(task.tgid, event, enable_addr, enable_bit):
            # The kernel maps a failed first write to ENOMEM and keeps the slot.
            raise TracefsError(errno.ENOMEM, "cannot write the enable bit")
        # put_user(): a failure here is ignored by the kernel too.
        self.memory.write(task.tgid, arg + uapi.USER_REG_WRITE_INDEX_OFFSET,
                          index.to_bytes(4, "little"))

    def enable_write_failed(self, cmd: int, task: Task, addr: int, bit: int) -> TracefsError:
        """The answer when the caller's own write of ``(addr, bit)``, which
        the driver made after the call returned (:class:`~._memory.EnableBits`),
        failed: a registration's first write (its enabler is dropped again,
        as the kernel never tracks one whose write failed; the slot stays) or
        an unregistration's clear.
        """
        if cmd == uapi.DIAG_IOCSREG:
            self.registry.remove_enablers(task.tgid, addr, bit)
            return TracefsError(errno.ENOMEM, "cannot write the enable bit")
        return TracefsError(errno.EFAULT, "cannot clear the enable bit")

    def unregister(self, arg: int, task: Task) -> None:
        """DIAG_IOCSUNREG: forget ``(disable_addr, disable_bit)`` and clear the bit."""
        size = int.from_bytes(copy_from_user(self.memory, task, arg, 4), "little")
        if size > uapi.PAGE_SIZE:
            raise TracefsError(errno.E2BIG, f"user_unreg.size {size} exceeds a page")
        if size < uapi.USER_UNREG.size:
            raise TracefsError(errno.EINVAL, f"user_unreg.size {size} is below 16")
        try:
            raw = copy_struct_from_user(self.memory, task, arg, size, uapi.USER_UNREG.size)
            fault = None
        except TracefsError as error:
            if error.errno != errno.EFAULT:
                raise
            # copy_from_user() zero-filled what it could not copy, and
            # user_unreg_get() checks the reserved fields before the result.
            raw = self.memory.read(task.tgid, arg, uapi.USER_UNREG.size)
            raw += bytes(uapi.USER_UNREG.size - len(raw))
            fault = error
        _, disable_bit, reserved, reserved2, disable_addr = uapi.USER_UNREG.unpack(raw)
        if reserved or reserved2:
            raise TracefsError(errno.EINVAL, "reserved fields must be zero")
        if fault is not None:
            raise fault
        if not self.registry.remove_enablers(task.tgid, disable_addr, disable_bit):
            raise TracefsError(errno.ENOENT, "no such enable_addr/enable_bit")
        # The bit is cleared whatever the event's state ("Ensure bit is now
        # cleared for user, regardless of event status").
        if not self.registry.clear_bit(task.tgid, disable_addr, disable_bit):
            raise TracefsError(errno.EFAULT, "cannot clear the enable bit")

    # -- write ------------------------------------------------------------------

    def write(self, file: UserEventsFile, data: bytes, offset: int, task: Task, *,
              count: int | None = None, faulted: bool | Callable[[], bool] = False) -> int:
        """``user_events_write_core``: record ``[s32 index][payload]``.

        Args:
            data: the bytes written; with ``count``, the part of a longer
                write that could be read before its first unreadable byte
                (``faulted``), or a part longer than any record can be.
            count: the whole write's size, when ``data`` is not all of it.
            faulted: a byte of the write could not be read; or a function
                that says so, called only for an enabled event's write (the
                kernel faults the write in only then).

        Returns the whole count, index included.

        Raises:
            TracefsError: EFAULT (position not 0, fewer than 4 bytes, a dynamic
                field outside the record, an unreadable byte of an enabled
                event's write), EINVAL (negative index, payload shorter than
                the fields), ENOENT (index never handed out by this file),
                EBADF (the event is not enabled; mainline only).
        """
        count = len(data) if count is None else count
        if offset != 0:
            raise TracefsError(errno.EFAULT, "user_events_data writes must be at position 0")
        if len(data) < 4:
            raise TracefsError(errno.EFAULT, "a write needs a 4-byte index")
        index = int.from_bytes(data[:4], "little", signed=True)
        if index < 0:
            raise TracefsError(errno.EINVAL, f"negative write index {index}")
        if index >= len(file.slots):
            raise TracefsError(errno.ENOENT, f"write index {index} was not handed out")
        event, abi = file.slots[index]
        if count - 4 < event.min_size:
            raise TracefsError(errno.EINVAL, "payload shorter than the event's fields")
        if not event.status:
            if abi is not Abi.V5_18:
                raise TracefsError(errno.EBADF, f"{event.name} is not enabled")
            return count  # 5.18 (never fixed): a disabled write was a silent no-op
        if faulted if isinstance(faulted, bool) else faulted():
            # fault_in_iov_iter_readable() of the whole write, before any probe.
            raise TracefsError(errno.EFAULT, f"byte {len(data)} of the write is unreadable")
        if not record(event, self.registry.record_header(event, task) + data[4:], task):
            raise TracefsError(errno.EFAULT, "a dynamic field points outside the record")
        return count


def check_user_reg(raw: bytes) -> tuple[int, int, int, int]:
    """``user_reg_get`` and ``user_reg``'s checks in ``user_events_ioctl_reg``,
    in the kernel's order: (enable_bit, flags, enable_addr, name_args).

    Raises:
        TracefsError: EINVAL or EFAULT, as the kernel.
    """
    _, enable_bit, enable_size, flags, enable_addr, name_args, _ = uapi.USER_REG.unpack(raw)
    if flags & ~(uapi.USER_EVENT_REG_MAX - 1):
        raise TracefsError(errno.EINVAL, f"unknown flags {flags:#x}")
    if enable_size not in (4, 8):
        raise TracefsError(errno.EINVAL, f"enable_size {enable_size} is not 4 or 8")
    if enable_addr % enable_size:
        raise TracefsError(errno.EINVAL, "enable_addr is not naturally aligned")
    if enable_bit > enable_size * 8 - 1:
        raise TracefsError(errno.EINVAL, f"enable_bit {enable_bit} out of range")
    if enable_addr + enable_size > uapi.TASK_SIZE_MAX:
        raise TracefsError(errno.EFAULT, "enable_addr is outside user space")
    return enable_bit, flags, enable_addr, name_args


def record(event: UserEvent, entry: bytes, task: Task) -> bool:
    """Hand one record to every trace array recording the event.

    Validation runs only where a buffer reserved the record (``tracing_on``,
    size, room), on the reserved entry, as in ``user_event_ftrace``; returns
    False if it failed anywhere.
    """
    valid = True

    def accept(before: int) -> bool:
        nonlocal valid
        ok = event.validate(entry, before)
        valid = valid and ok
        return ok

    for event_file in event.files:
        trace_array = event_file.trace_array
        if trace_array.can_record(len(entry), task.cpu):
            trace_array.record(entry, task, accept if event.validators else None)
    return valid
