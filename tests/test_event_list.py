"""EventList: filtering by name and fields, and failure messages that show the events."""

from __future__ import annotations

import pytest

from tracefs_fuse.decode import Event, Lost
from tracefs_fuse.eventheader import EventHeaderInfo
from tracefs_fuse.testing import EventList, name_matches


def event(name: str, pid: int = 7, **fields: object) -> Event:
    return Event(system="user_events", name=name, id=1000, cpu=0, timestamp=1_000_000 * pid,
                 pid=pid, comm="prog", fields=fields)


GREETING = Event(system="user_events", name="Corp_Greeter_L4K1", id=1001, cpu=1, timestamp=5,
                 pid=8, fields={"message": "hi"},
                 eventheader=EventHeaderInfo(provider="Corp_Greeter", event="Greeting",
                                             level=4, keyword=1, flags=7, version=0, id=0,
                                             tag=0, opcode=0))


@pytest.mark.parametrize(("pattern", "names"), [
    ("hello", [True, False]),
    ("user_events:hello", [True, False]),
    ("user_events:*", [True, True]),
    ("hel*", [True, False]),
    ("Greeting", [False, True]),
    ("Corp_Greeter:Greeting", [False, True]),
    ("Corp_Greeter_L4K1", [False, True]),
    ("Corp_Greeter_*", [False, True]),
    ("Corp_Greeter:*", [False, True]),
    ("HELLO", [False, False]),
])
def test_names_match_tracepoints_and_eventheader_events(pattern: str, names: list[bool]) -> None:
    assert [name_matches(e, pattern) for e in (event("hello"), GREETING)] == names


def test_filters_chain_and_keep_the_order() -> None:
    events = EventList([event("a", n=1), event("b", n=1), event("a", n=2), event("a", n=3)])
    assert [e.fields["n"] for e in events.named("a")] == [1, 2, 3]
    assert [e.name for e in events.where(n=1)] == ["a", "b"]
    assert events.matching("a", n=lambda v: v > 1) == [events[2], events[3]]
    assert events.matching(n=2) == [events[2]]
    assert events.one("b").name == "b"
    assert events.assert_event("a", n=3) is events[3]
    events.assert_no_event("c")
    events.assert_no_event("a", n=4)


def test_nested_values_compare_whole() -> None:
    events = EventList([GREETING, event("p", point={"x": 1, "y": 2}, arr=[1, 2])])
    assert events.one(point={"x": 1, "y": 2}, arr=[1, 2]).name == "p"
    assert events.matching(point={"x": 1}) == []


def test_assert_event_failure_lists_the_events_and_the_differences() -> None:
    events = EventList([event("hello", pid=1, who="world", times=1), event("other", pid=2),
                        GREETING])
    with pytest.raises(AssertionError) as info:
        events.assert_event("hello", who="you", times=1, missing=3)
    assert str(info.value).splitlines() == [
        "no event hello with who='you', times=1, missing=3",
        "3 events recorded:",
        f"  {'prog-1':>16} [000]     0.001000: user_events:hello who=\"world\" times=1",
        "    -> who='world', not 'you'; no field missing",
        f"  {'prog-2':>16} [000]     0.002000: user_events:other",
        f"  {'<...>-8':>16} [001]     0.000000: Corp_Greeter:Greeting level=4 keyword=0x1 "
        'message="hi"',
    ]


def test_predicates_are_named_in_messages() -> None:
    def positive(value: int) -> bool:
        return value > 0

    with pytest.raises(AssertionError, match=r"n=positive\(\.\.\.\)") as info:
        EventList([event("a", n=-1)]).assert_event("a", n=positive)
    assert "n=-1, not positive(...)" in str(info.value)


def test_one_refuses_none_and_several() -> None:
    events = EventList([event("a"), event("a")])
    with pytest.raises(AssertionError, match="expected exactly one event a, found 2"):
        events.one("a")
    with pytest.raises(AssertionError, match="found 0\nno events were recorded"):
        EventList().one("a")


def test_assert_no_event_lists_the_unexpected_ones() -> None:
    with pytest.raises(AssertionError, match="1 unexpected event\\(s\\) b\n1 event recorded:"):
        EventList([event("a"), event("b")]).assert_no_event("b")


def test_long_lists_are_cut_in_the_middle_and_losses_are_told() -> None:
    events = EventList([event("e", pid=n) for n in range(1, 101)],
                       lost=[Lost(cpu=0, timestamp=1, count=5), Lost(cpu=1, timestamp=2)])
    text = events.describe()
    assert text.startswith("100 events recorded:")
    assert "  ... 60 more ...\n" in text
    assert "-1 [000]" in text and "-100 [000]" in text and "-50 [000]" not in text
    assert text.endswith("(5 more were lost: the ring buffer overflowed)")
    assert events.named("e").lost == events.lost
