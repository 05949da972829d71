"""The status page of the 5.18 and 6.1 user_events ABIs, and ``user_events_status``.

Before 6.4 a program learnt whether its event was enabled by reading a page
it mapped from ``user_events_status``: one byte per event in 5.18 (the OR of
the attached probe kinds, ``EVENT_STATUS_FTRACE`` 1, ``_PERF`` 2, ``_OTHER``
0x80), one bit per event in 6.1-6.3 (set while anything is attached).
``read()`` of the same file gives text: ``<slot>:<name>[ # Used by ...]``
lines, ``Active:``, ``Busy:`` and ``Max:``.

Rules:
  * Slots are allocated the way each kernel did, lowest free first, never
    slot 0 (byte 0 in 5.18, bit 0 in 6.1, "reserved for failures"); 4095
    byte slots or 32767 bit slots, then EMFILE. A mount pinned to one era
    gives every event a slot, ``dynamic_events`` ones included, as that
    kernel did.
  * An ``auto`` mount serves every era from one page, because a 5.18 client
    and a 6.1 client both map offset 0 of the same file before they register:
    5.18 byte slots are taken from the bottom (byte 1 up) and 6.1 bit slots
    from the top (bit 32767 down), never sharing a byte. Only events
    registered through an old ABI get a slot (an event made by a mainline
    client or ``dynamic_events`` gets one when an old client registers it).
  * The page is zeroed where a slot is released, so a reused slot starts
    clear. Every change of the page's bytes bumps :attr:`StatusPage.version`;
    the adapter pushes the whole page into clients' mappings when it moves.
  * Nothing here reads process memory or knows about FUSE: page-cache fills
    are answered by :meth:`StatusPage.mmap_read` (through :class:`StatusMapping`,
    what ``Tracefs.mappable`` returns for the file).

Caveats:
  * ``auto`` layout: the two eras share the page's 4095 usable bytes, so
    EMFILE comes when they meet (n bit slots leave 4095 - ceil(n/8) byte
    slots), and 6.1 clients get bits counted down from 32767 instead of up
    from 1 (no client depends on the value; the selftests check it is not 0).
  * mmap() itself never reaches a FUSE daemon. The adapter finds mappings in
    ``/proc/<pid>/maps`` when their process faults and reports them to
    :meth:`StatusMapping.mapped`, where ``user_status_mmap``'s one refusal
    (EINVAL unless the mapping is exactly one page) applies: the refused
    mapping's first fault is SIGBUS instead of mmap() failing. The kernel
    maps the page whatever the offset (``remap_pfn_range`` ignores
    ``vm_pgoff``) and accepts a writable ``MAP_SHARED`` mapping of an
    ``O_RDWR`` file whose stores land in the real page (Linux 6.1.192: a
    byte stored by one process was seen by every other mapping). Here the
    file is one page long (the adapter's ``st_size``, since a fault at or
    past it is SIGBUS without asking us), so a mapping at offset 4096 is
    accepted but SIGBUS when touched, and stores through a writable shared
    mapping stay in the page cache (the file has no ``write``, so write-back
    fails) until the next push overwrites the page. ``MAP_SHARED`` +
    ``PROT_WRITE`` on an ``O_RDONLY`` file is EACCES from the VFS in both.

Kernel: kernel/trace/trace_events_user.c of 5.18 (``register_page_data``,
``update_reg_page_for``, ``user_status_mmap``, ``user_seq_show``) and 6.1
(``user_event_group``, ``MAP_STATUS_BYTE``/``MAP_STATUS_MASK``).
"""

from __future__ import annotations

import errno
import re
from functools import partial
from typing import Callable

import msgspec

from ._errors import TracefsError
from ._task import Task
from ._tree import TRACE_MODE_WRITE, File, FileKind, OpenFile, TextFile, Vma, text_file
from ._uapi import PAGE_SIZE, Abi
from ._user_events import UserEvent, UserEventRegistry, render_status

#: The mapping's size: ``MAX_PAGES`` (1 << ``MAX_PAGE_ORDER`` 0) pages.
STATUS_PAGE_SIZE = PAGE_SIZE
#: 5.18 ``MAX_EVENTS`` (one byte each) and 6.1 ``MAX_EVENTS`` (``MAX_BYTES * 8``):
#: what ``Max:`` shows; slot 0 is never handed out, so one fewer fit.
MAX_EVENTS_5_18 = STATUS_PAGE_SIZE
MAX_EVENTS_6_1 = STATUS_PAGE_SIZE * 8
#: ``DEFINE_HASHTABLE(register_table, 4)`` in 5.18, ``(…, 8)`` from 6.1 (the
#: status text walks its buckets).
_REGISTER_TABLE_BITS = {Abi.V5_18: 4, Abi.V6_1: 8}
_MAX_EVENTS = {Abi.V5_18: MAX_EVENTS_5_18, Abi.V6_1: MAX_EVENTS_6_1}

#: A byte of the allocation map with a free bit in it.
_NOT_FULL = re.compile(rb"[^\xff]")


class StatusPageStatistics(msgspec.Struct, frozen=True):
    byte_slots: int
    bit_slots: int
    version: int


class StatusPage:
    """The page behind ``user_events_status`` and the slots handed out in it.

    Args:
        abis: the eras the mount accepts (a value of ``ABI_MODES``). With
            exactly one status-page era and no mainline, allocation is that
            kernel's; otherwise both eras share the page (see the module).
    """

    def __init__(self, abis: frozenset[Abi]) -> None:
        eras = [abi for abi in (Abi.V5_18, Abi.V6_1) if abi in abis]
        assert eras, "a status page needs a status-page era"
        #: The era every event takes a slot in, when the mount is pinned.
        self.pinned: Abi | None = eras[0] if len(abis) == 1 else None
        self._page = bytearray(STATUS_PAGE_SIZE)
        # Allocation map, laid out like the page: a 6.1 slot owns one bit, a
        # 5.18 slot owns its whole byte (0xff). Bit 0 of byte 0 stays taken,
        # so byte 0 is never free for 5.18 nor bit 0 for 6.1.
        self._used = bytearray(STATUS_PAGE_SIZE)
        self._used[0] = 0x01
        # Search hints: no free byte below _low_zero, no byte with a free bit
        # below _low_free or above _high_free (releases move them back).
        self._low_zero = 1
        self._low_free = 0
        self._high_free = STATUS_PAGE_SIZE - 1
        self._byte_slots = 0
        self._bit_slots = 0
        #: Moves whenever the page's bytes change.
        self.version = 0

    def statistics(self) -> StatusPageStatistics:
        return StatusPageStatistics(byte_slots=self._byte_slots, bit_slots=self._bit_slots,
                                    version=self.version)

    # -- allocation -------------------------------------------------------------

    def era(self, abi: Abi) -> Abi | None:
        """The slot kind an event registered through ``abi`` needs, if any."""
        if self.pinned is not None:
            return self.pinned
        return abi if abi.has_status_page else None

    def has_room(self, abi: Abi) -> bool:
        """Would a new event registered through ``abi`` get a slot?"""
        era = self.era(abi)
        return era is None or self._free_slot(era) is not None

    def claim(self, event: UserEvent, abi: Abi) -> None:
        """Give ``event`` its slot for ``abi`` (if it has none) showing its state.

        Called before a new event becomes visible, and by old-era
        registrations of an existing event (which may lack a slot of that era
        in an ``auto`` mount).

        Raises:
            TracefsError: EMFILE when the page has no free slot of that kind
                (``find_first_zero_bit(page_bitmap) == MAX_EVENTS``); nothing
                changes then.
        """
        era = self.era(abi)
        if era is None or self.slot_of(event, era) is not None:
            return
        slot = self._free_slot(era)
        if slot is None:
            raise TracefsError(errno.EMFILE, f"the status page has no free {era.value} slot")
        if era is Abi.V5_18:
            self._used[slot] = 0xFF
            self._byte_slots += 1
            event.status_index = slot
        else:
            self._used[slot >> 3] |= 1 << (slot & 7)
            self._bit_slots += 1
            event.status_bit = slot
        self.update(event)

    def release(self, event: UserEvent) -> None:
        """``destroy_user_event``: zero the event's slots and free them."""
        if event.status_index is not None:
            self._store(event.status_index, 0)
            self._freed(event.status_index, 0xFF)
            self._byte_slots -= 1
            event.status_index = None
        if event.status_bit is not None:
            self._set_bit(event.status_bit, False)
            self._freed(event.status_bit >> 3, 1 << (event.status_bit & 7))
            self._bit_slots -= 1
            event.status_bit = None

    def _freed(self, byte: int, mask: int) -> None:
        self._used[byte] &= ~mask
        self._low_free = min(self._low_free, byte)
        self._high_free = max(self._high_free, byte)
        if not self._used[byte]:
            self._low_zero = min(self._low_zero, byte)

    def _free_slot(self, era: Abi) -> int | None:
        """The slot :meth:`claim` would take (only the search hints move)."""
        if era is Abi.V5_18:
            # A byte with no slot and no 6.1 bit in it, lowest first.
            index = self._used.find(0, self._low_zero)
            if index < 0:
                self._low_zero = STATUS_PAGE_SIZE
                return None
            self._low_zero = index
            return index
        if self.pinned is Abi.V6_1:
            match = _NOT_FULL.search(self._used, self._low_free)
            if match is None:
                self._low_free = STATUS_PAGE_SIZE
                return None
            byte = self._low_free = match.start()
            return byte * 8 + _lowest_zero_bit(self._used[byte])
        # Sharing the page with 5.18 bytes: bits from the top down.
        byte = self._high_free
        while byte >= 0 and self._used[byte] == 0xFF:
            byte -= 1
        self._high_free = byte
        if byte < 0:
            return None
        return byte * 8 + _highest_zero_bit(self._used[byte])

    @staticmethod
    def slot_of(event: UserEvent, era: Abi) -> int | None:
        return event.status_index if era is Abi.V5_18 else event.status_bit

    # -- contents -----------------------------------------------------------------

    def update(self, event: UserEvent) -> None:
        """``update_reg_page_for``: show the event's probes in its slots.

        5.18 stores the status byte itself (``register_page_data[index] =
        status``); 6.1 sets the bit iff the status is non-zero.
        """
        status = int(event.status) & 0xFF
        if event.status_index is not None:
            self._store(event.status_index, status)
        if event.status_bit is not None:
            self._set_bit(event.status_bit, bool(status))

    def _set_bit(self, bit: int, value: bool) -> None:
        # MAP_STATUS_BYTE(index) = index >> 3, MAP_STATUS_MASK(index) = BIT(index & 7)
        old = self._page[bit >> 3]
        mask = 1 << (bit & 7)
        self._store(bit >> 3, old | mask if value else old & ~mask)

    def _store(self, offset: int, value: int) -> None:
        if self._page[offset] != value:
            self._page[offset] = value
            self.version += 1

    def mmap_read(self, offset: int, size: int) -> bytes:
        """The mapping's bytes at a file offset: what a page-cache fill returns.

        Only the first page exists; past it the file ends (see the module
        docstring for why a mapping at another offset cannot see the page).
        """
        return bytes(self._page[offset:offset + size])


def _lowest_zero_bit(byte: int) -> int:
    return ((~byte & (byte + 1)) & 0xFF).bit_length() - 1


def _highest_zero_bit(byte: int) -> int:
    return (~byte & 0xFF).bit_length() - 1


# -- user_events_status -------------------------------------------------------------


def render_legacy_status(registry: UserEventRegistry, era: Abi) -> str:
    """``user_seq_show`` of 5.18 and 6.1: ``<slot>:<name>`` lines and totals.

    The events come in that kernel's hash-table order (bucket by bucket, newest
    first within one). ``" #"`` precedes ``" Used by"``; 5.18 also printed it
    for a non-zero ``user->flags``, which no released kernel could set.
    """
    events = registry.in_hash_order(_REGISTER_TABLE_BITS[era])
    lines = "".join(f"{StatusPage.slot_of(event, era)}:{event.status_line()}\n"
                    for event in events)
    busy = sum(1 for event in events if event.status)
    return f"{lines}\nActive: {len(events)}\nBusy: {busy}\nMax: {_MAX_EVENTS[era]}\n"


class StatusFile(TextFile):
    """An open ``user_events_status`` of a status-page era: text to read(),
    the page to mmap() (served by :class:`StatusMapping`, per file)."""

    kind = FileKind.MAPPABLE_TEXT


class StatusMapping:
    """The mmap side of ``user_events_status`` (see :class:`~._tree.Mappable`)."""

    def __init__(self, page: StatusPage) -> None:
        self.page = page

    def mapped(self, vma: Vma) -> None:
        """``user_status_mmap``: any offset, protection and sharing, one page.

        Raises:
            TracefsError: EINVAL unless the mapping is exactly one page
                (``size != MAX_BYTES``).
        """
        if vma.nr_pages * PAGE_SIZE != STATUS_PAGE_SIZE:
            raise TracefsError(errno.EINVAL, f"a status mapping is one page, not {vma.nr_pages}")

    def unmapped(self) -> None:
        """Nothing to undo: the page is shared by every mapping."""

    def map_read(self, offset: int, size: int) -> bytes:
        return self.page.mmap_read(offset, size)


def user_events_status_node(registry: UserEventRegistry, page: StatusPage | None) -> File:
    """``user_events_status`` as the mount's eras make it.

    Without a status page (pinned mainline) it is 6.4's text-only file, mode
    0440. With one it is 0640 ("mmap with MAP_SHARED requires writable fd")
    and mappable; a pinned old era shows that kernel's text, an ``auto``
    mount the mainline text (its lines cannot name a byte and a bit at once).
    """
    if page is None:
        return text_file("user_events_status", lambda: render_status(registry))
    render: Callable[[], str] = (partial(render_status, registry) if page.pinned is None
                                 else partial(render_legacy_status, registry, page.pinned))

    def opener(flags: int, task: Task) -> OpenFile:
        return StatusFile(render)

    return File("user_events_status", TRACE_MODE_WRITE, opener, FileKind.MAPPABLE_TEXT)
