"""DIAG_IOCSREG of the status-page ABIs: 5.18 (byte page) and 6.1-6.3 (bit page).

Rules:
  * Each era's checks run in that kernel's order with its errnos:
    ``user_reg_get`` (size), ``strndup_user`` of the command, then
    ``user_event_parse``: lookup by name, EMFILE when the page is full, and
    only then the fields. The caller (:class:`~._user_events_data.UserEventsData`)
    has already read ``size`` (EFAULT) and refused one above a page (E2BIG).
  * What the era ignored stays ignored: text flags after ``:`` (5.18 as
    released dropped ``BPF_ITER`` with the eBPF interface, 5.18-rc1 only
    recognised it), and the fields of a name that exists (the existing event
    is returned whatever the new fields say).
  * ``write_index`` and then the slot are written back with ``put_user``,
    whose failures the kernel ignored; nothing else in the struct changes.
  * The file's slot remembers the era, because writes to a disabled event
    differ by era (see :meth:`~._user_events_data.UserEventsData.write`).

Lifetime: an event created through these ABIs has the self reference
(``refcount_set(&user->refcnt, 2)``: self + caller) that ``UserEvent.legacy``
gives, so it is never auto-deleted and DIAG_IOCSDEL destroys it once only the
self reference is left (EBUSY while a file slot or a probe holds it).

Caveats:
  * 5.18 (``depends on BROKEN``) cannot be booted; its rules are read from
    the source. 6.1's were run on Linux 6.1.192
    (tests/data/user_events-6.1.192-legacy.txt).
  * A mount pinned to 5.18 or 6.1 still has ``kernel.user_events_max``; it
    is above the page's limit unless configured lower.

Kernel: kernel/trace/trace_events_user.c (``user_reg_get``,
``user_events_ioctl_reg``, ``user_event_parse``) and include/linux/user_events.h
of 5.18 and 6.1.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable

import msgspec

from . import _uapi as uapi
from ._errors import TracefsError
from ._status_page import StatusPage
from ._task import Task
from ._uapi import Abi
from ._user_command import split_command
from ._user_events import UserEventRegistry, UserEventsFile
from ._uaccess import copy_struct_from_user, copy_struct_reads, strndup_user


class RegLayout(msgspec.Struct, frozen=True, kw_only=True):
    """One era's ``struct user_reg`` (declared in :mod:`._uapi`) and its checks."""

    user_reg: struct.Struct
    #: ``offsetofend(struct user_reg, write_index)`` when the era checked it.
    min_size: int
    #: Where ``status_index`` (5.18) or ``status_bit`` (6.1) is written back.
    status_offset: int
    write_index_offset: int


LAYOUTS: dict[Abi, RegLayout] = {
    # 5.18 user_reg_get(): get_user(size), size > PAGE_SIZE -> E2BIG, then
    # straight to copy_struct_from_user (a short size zero-fills the rest).
    Abi.V5_18: RegLayout(user_reg=uapi.USER_REG_5_18, min_size=0,
                         status_offset=uapi.USER_REG_5_18_STATUS_OFFSET,
                         write_index_offset=uapi.USER_REG_5_18_WRITE_INDEX_OFFSET),
    # 6.1 added "if (size < offsetofend(struct user_reg, write_index)) return -EINVAL".
    Abi.V6_1: RegLayout(user_reg=uapi.USER_REG_6_1, min_size=uapi.USER_REG_6_1.size,
                        status_offset=uapi.USER_REG_6_1_STATUS_OFFSET,
                        write_index_offset=uapi.USER_REG_6_1_WRITE_INDEX_OFFSET),
}


class LegacyRegistration:
    """DIAG_IOCSREG for ``struct user_reg`` of 5.18 and 6.1."""

    def __init__(self, registry: UserEventRegistry) -> None:
        self.registry = registry
        self.memory = registry.memory

    def name_args(self, arg: int, size: int, abi: Abi,
                  read: Callable[[int, int], bytes]) -> int | None:
        """What :meth:`register` reads before the name, through ``read``
        (``UserEventsData.registration_reads``): the name's address, or None
        where the call is refused before it."""
        layout = LAYOUTS[abi]
        if size < layout.min_size:
            return None
        raw = copy_struct_reads(arg, size, layout.user_reg.size, read)
        return None if raw is None else int(layout.user_reg.unpack(raw)[1])

    def register(self, file: UserEventsFile, arg: int, size: int, abi: Abi, task: Task) -> None:
        """``user_events_ioctl_reg`` of ``abi``'s kernel; ``size`` is ``user_reg.size``.

        Raises:
            TracefsError: EINVAL (6.1: size below 20; a name over 511 bytes;
                bad fields of a new event), E2BIG (non-zero bytes past the
                struct), EFAULT (struct or name unreadable), EMFILE (a new
                event and no free slot in the status page).
        """
        layout = LAYOUTS[abi]
        if size < layout.min_size:
            raise TracefsError(errno.EINVAL, f"user_reg.size {size} is below {layout.min_size}")
        raw = copy_struct_from_user(self.memory, task, arg, size, layout.user_reg.size)
        _, name_args, _, _ = layout.user_reg.unpack(raw)
        name = strndup_user(self.memory, task, name_args, uapi.MAX_EVENT_DESC)
        event, _ = self.registry.find_or_create(split_command(name), 0, task, abi)
        index = file.ref_add(event, abi)
        event.put()  # the parse reference; the slot holds its own
        slot = StatusPage.slot_of(event, abi)
        assert slot is not None, f"{event} has no {abi.value} slot"
        # put_user(write_index) then put_user(index, status_*): results ignored.
        self.memory.write(task.tgid, arg + layout.write_index_offset, index.to_bytes(4, "little"))
        self.memory.write(task.tgid, arg + layout.status_offset, slot.to_bytes(4, "little"))
