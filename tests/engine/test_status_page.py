"""The status page of the 5.18 / 6.1 ABIs: slots, contents, the full page, sharing.

Slots and bytes follow kernel/trace/trace_events_user.c of 5.18 and 6.1
(``find_first_zero_bit``, ``update_reg_page_for``, ``destroy_user_event``);
the 6.1 numbers were checked on Linux 6.1.192 (test_legacy_abi.py replays
that capture).
"""

from __future__ import annotations

import errno

import pytest

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._events import EventTable, Probe
from tracefs_fuse.engine._status_page import (MAX_EVENTS_5_18, MAX_EVENTS_6_1, STATUS_PAGE_SIZE,
                                              StatusPage)
from tracefs_fuse.engine._uapi import Abi
from tracefs_fuse.engine._user_events import UserEvent, UserEventRegistry

from .fakes import FakeMemory

AUTO = frozenset(Abi)
V5_18 = frozenset({Abi.V5_18})
V6_1 = frozenset({Abi.V6_1})


def new_event(name: str = "e") -> UserEvent:
    registry = UserEventRegistry(EventTable(), FakeMemory())
    return UserEvent(registry, name, name, (), 0, legacy=True)


def bit_of(page: StatusPage, bit: int) -> int:
    return page.mmap_read(bit >> 3, 1)[0] >> (bit & 7) & 1


# -- allocation ---------------------------------------------------------------------

@pytest.mark.parametrize(("abis", "abi", "slot"), [
    (V5_18, Abi.V5_18, "status_index"),
    (V6_1, Abi.V6_1, "status_bit"),
    # A pinned mount gives every event its era's slot, whatever registered it
    # (dynamic_events creations arrive as mainline).
    (V5_18, Abi.MAINLINE, "status_index"),
    (V6_1, Abi.MAINLINE, "status_bit"),
])
def test_status_page_pinned_allocates_lowest_free_from_1(abis: frozenset[Abi], abi: Abi,
                                                         slot: str) -> None:
    page = StatusPage(abis)
    events = [new_event(f"e{i}") for i in range(4)]
    for event in events[:3]:
        page.claim(event, abi)
    assert [getattr(e, slot) for e in events[:3]] == [1, 2, 3]
    page.release(events[1])
    assert getattr(events[1], slot) is None
    page.claim(events[3], abi)
    assert getattr(events[3], slot) == 2


def test_status_page_claim_is_idempotent() -> None:
    page = StatusPage(V6_1)
    event = new_event()
    page.claim(event, Abi.V6_1)
    page.claim(event, Abi.V6_1)
    assert event.status_bit == 1
    assert page.statistics().bit_slots == 1


def test_status_page_auto_gives_mainline_events_no_slot() -> None:
    page = StatusPage(AUTO)
    event = new_event()
    page.claim(event, Abi.MAINLINE)
    assert (event.status_index, event.status_bit) == (None, None)
    assert page.has_room(Abi.MAINLINE)


def test_status_page_auto_takes_bytes_from_the_bottom_and_bits_from_the_top() -> None:
    page = StatusPage(AUTO)
    old, new, both = new_event("old"), new_event("new"), new_event("both")
    page.claim(old, Abi.V5_18)
    page.claim(new, Abi.V6_1)
    page.claim(both, Abi.V5_18)
    page.claim(both, Abi.V6_1)
    assert (old.status_index, new.status_bit) == (1, MAX_EVENTS_6_1 - 1)
    assert (both.status_index, both.status_bit) == (2, MAX_EVENTS_6_1 - 2)


@pytest.mark.parametrize(("abis", "abi", "capacity"), [
    (V5_18, Abi.V5_18, MAX_EVENTS_5_18 - 1),
    pytest.param(V6_1, Abi.V6_1, MAX_EVENTS_6_1 - 1, marks=pytest.mark.slow),
    (AUTO, Abi.V5_18, MAX_EVENTS_5_18 - 1),
    pytest.param(AUTO, Abi.V6_1, MAX_EVENTS_6_1 - 1, marks=pytest.mark.slow),
])
def test_status_page_full_is_emfile_and_changes_nothing(abis: frozenset[Abi], abi: Abi,
                                                        capacity: int) -> None:
    page = StatusPage(abis)
    registry = UserEventRegistry(EventTable(), FakeMemory())
    events = [UserEvent(registry, "e", "e", (), 0, legacy=True) for _ in range(capacity)]
    for event in events:
        page.claim(event, abi)
    assert not page.has_room(abi)
    before = (page.statistics(), page.mmap_read(0, STATUS_PAGE_SIZE))
    extra = new_event()
    with pytest.raises(TracefsError) as info:
        page.claim(extra, abi)
    assert info.value.errno == errno.EMFILE
    assert (extra.status_index, extra.status_bit) == (None, None)
    assert (page.statistics(), page.mmap_read(0, STATUS_PAGE_SIZE)) == before
    page.release(events[-1])
    page.claim(extra, abi)  # the released slot is free again


@pytest.mark.slow
def test_status_page_auto_eras_never_share_a_byte() -> None:
    page = StatusPage(AUTO)
    # Bits 32767..32760 fill the last byte; one more bit opens byte 4094.
    bits = [new_event() for _ in range(9)]
    for event in bits:
        page.claim(event, Abi.V6_1)
    assert bits[-1].status_bit == 8 * 4094 + 7
    # Bytes fill from 1 up and stop below 4094, the lowest byte with a bit.
    byte_events = []
    while page.has_room(Abi.V5_18):
        event = new_event()
        page.claim(event, Abi.V5_18)
        byte_events.append(event)
    assert [e.status_index for e in byte_events] == list(range(1, 4094))
    # The bits left are the 7 others of byte 4094, then those of byte 0
    # but bit 0.
    more = []
    while page.has_room(Abi.V6_1):
        event = new_event()
        page.claim(event, Abi.V6_1)
        more.append(event.status_bit)
    assert more == [8 * 4094 + b for b in range(6, -1, -1)] + list(range(7, 0, -1))
    # Freeing a byte slot makes its 8 bits available to 6.1, and no longer
    # to 5.18 once one of them is taken.
    page.release(byte_events[41])  # byte 42
    event = new_event()
    page.claim(event, Abi.V6_1)
    assert event.status_bit == 8 * 42 + 7
    assert not page.has_room(Abi.V5_18)


# -- contents -------------------------------------------------------------------------

@pytest.mark.parametrize(("probes", "byte"), [
    ((), 0x00),
    ((Probe.FTRACE,), 0x01),
    ((Probe.PERF,), 0x02),
    ((Probe.OTHER,), 0x80),
    ((Probe.FTRACE, Probe.PERF), 0x03),
    ((Probe.FTRACE, Probe.FTRACE, Probe.OTHER), 0x81),
])
def test_status_page_byte_is_the_or_of_probe_kinds_and_bit_is_any(probes: tuple[Probe, ...],
                                                                   byte: int) -> None:
    page = StatusPage(AUTO)
    event = new_event()
    page.claim(event, Abi.V5_18)
    page.claim(event, Abi.V6_1)
    for kind in probes:
        event.attach(kind)
    page.update(event)
    assert page.mmap_read(1, 1)[0] == byte
    assert bit_of(page, MAX_EVENTS_6_1 - 1) == (byte != 0)


def test_status_page_bit_leaves_its_neighbours_alone() -> None:
    page = StatusPage(V6_1)
    events = [new_event(f"e{i}") for i in range(1, 10)]  # bits 1..9
    for event in events:
        page.claim(event, Abi.V6_1)
    for event in (events[0], events[2], events[8]):  # bits 1, 3, 9
        event.attach(Probe.FTRACE)
        page.update(event)
    assert page.mmap_read(0, 2) == bytes((0b1010, 0b10))
    events[2].detach(Probe.FTRACE)
    page.update(events[2])
    assert page.mmap_read(0, 2) == bytes((0b0010, 0b10))


def test_status_page_claim_shows_the_current_state() -> None:
    page = StatusPage(AUTO)
    event = new_event()
    event.attach(Probe.PERF)
    page.claim(event, Abi.V5_18)
    assert page.mmap_read(1, 1) == b"\x02"


def test_status_page_release_zeroes_the_slot() -> None:
    page = StatusPage(AUTO)
    event = new_event()
    page.claim(event, Abi.V5_18)
    page.claim(event, Abi.V6_1)
    event.attach(Probe.FTRACE)
    page.update(event)
    page.release(event)
    assert page.mmap_read(0, STATUS_PAGE_SIZE) == bytes(STATUS_PAGE_SIZE)
    assert (event.status_index, event.status_bit) == (None, None)
    assert page.statistics().byte_slots == page.statistics().bit_slots == 0


def test_status_page_version_moves_only_when_bytes_change() -> None:
    page = StatusPage(V6_1)
    a, b = new_event("a"), new_event("b")
    page.claim(a, Abi.V6_1)
    page.claim(b, Abi.V6_1)
    assert page.version == 0  # new slots of disabled events: no byte changed
    a.attach(Probe.FTRACE)
    page.update(a)
    assert page.version == 1
    a.attach(Probe.PERF)
    page.update(a)  # still set
    assert page.version == 1
    page.update(b)
    assert page.version == 1
    a.detach(Probe.FTRACE)
    a.detach(Probe.PERF)
    page.update(a)
    assert page.version == 2


@pytest.mark.parametrize(("offset", "size", "length"), [
    (0, 4096, 4096),
    (0, 131072, 4096),  # readahead asks for more: the file ends after one page
    (4000, 200, 96),
    (4096, 4096, 0),
    (8192, 4096, 0),
])
def test_status_page_mmap_read_serves_only_the_first_page(offset: int, size: int,
                                                          length: int) -> None:
    page = StatusPage(V5_18)
    assert len(page.mmap_read(offset, size)) == length
