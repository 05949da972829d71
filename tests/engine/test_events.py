"""Event ids: where dynamic ids start (above the host's) and how they are handed out."""

from __future__ import annotations

import errno

import pytest

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._events import (
    FIRST_ID_UNKNOWN_HOST,
    TRACE_EVENT_TYPE_MAX,
    EventTable,
    TraceEvent,
    first_dynamic_id,
)


def event(name: str) -> TraceEvent:
    return TraceEvent("user_events", name, (), '""')


@pytest.mark.parametrize(("host_highest", "first"), [
    # This machine's 6.18 kernel: writeback/flush_foreign is 1000,
    # syscalls/sys_enter_sync 1025, its highest 2325.
    (2325, 3326),
    # The oracle's small 6.12 (its first user event got 318).
    (317, 1318),
    # No tracefs readable: well above any plausible kernel.
    (None, FIRST_ID_UNKNOWN_HOST),
    # A host that leaves no room gives no ids at all (ENODEV below).
    (TRACE_EVENT_TYPE_MAX - 10, TRACE_EVENT_TYPE_MAX + 1),
])
def test_first_dynamic_id_follows_the_host(host_highest: int | None, first: int) -> None:
    assert first_dynamic_id(host_highest) == first
    assert first > (host_highest or 0)


def test_event_table_hands_out_ids_from_its_first() -> None:
    table = EventTable(first_id=3326)
    a, b, c = event("a"), event("b"), event("c")
    for e in (a, b, c):
        table.add(e)
    assert (a.id, b.id, c.id) == (3326, 3327, 3328)
    # The lowest freed id comes back first (ida_alloc_range), fixed ids never.
    fixed = event("fixed")
    table.add(fixed, fixed_id=5)
    for e in (b, a, fixed):
        table.remove(e)
    d, e2, f = event("d"), event("e"), event("f")
    for e in (d, e2, f):
        table.add(e)
    assert (d.id, e2.id, f.id) == (3326, 3327, 3329)


def test_event_table_without_ids_left_refuses_with_enodev() -> None:
    table = EventTable(first_id=TRACE_EVENT_TYPE_MAX)
    table.add(event("last"))
    assert table.find("user_events", "last").id == TRACE_EVENT_TYPE_MAX  # type: ignore[union-attr]
    with pytest.raises(TracefsError) as exc:
        table.add(event("none"))
    assert exc.value.errno == errno.ENODEV
    assert table.find("user_events", "none") is None
    full = EventTable(first_id=first_dynamic_id(TRACE_EVENT_TYPE_MAX))
    with pytest.raises(TracefsError):
        full.add(event("x"))
