"""Auto-enable: patterns, and events enabled before their registration returns."""

from __future__ import annotations

import os

import pytest

from tracefs_fuse import engine
from tracefs_fuse.engine import _uapi as uapi

from .fakes import Client, FakeMemory


@pytest.mark.parametrize(("patterns", "system", "name", "enabled"), [
    ((), "user_events", "a", False),
    (("user_events:*",), "user_events", "a", True),
    (("user_events:",), "user_events", "a", True),
    (("user_events:*",), "user_events_multi", "a.0", False),
    (("user_events*:*",), "user_events_multi", "a.0", True),
    (("*:*",), "user_events", "a", True),
    ((":a",), "user_events", "a", True),
    (("user_events:a",), "user_events", "ab", False),
    (("user_events:a*",), "user_events", "ab", True),
    (("user_events:MyProvider_*",), "user_events", "MyProvider_L4K1", True),
    (("user_events:MyProvider_*",), "user_events", "Other_L4K1", False),
    (("user_events:my_event",), "user_events", "my_event", True),
    # A bare word names a system or an event, as in set_event.
    (("my_event",), "user_events", "my_event", True),
    (("user_events",), "user_events", "anything", True),
    (("other",), "user_events", "anything", False),
    (("my_[ab]",), "user_events", "my_b", True),
    # The last matching pattern decides.
    (("user_events:*", "!user_events:noisy"), "user_events", "noisy", False),
    (("user_events:*", "!user_events:noisy"), "user_events", "quiet", True),
    (("!user_events:noisy", "user_events:*"), "user_events", "noisy", True),
    (("!*:*",), "user_events", "a", False),
    # Globs are case-sensitive, like event names.
    (("user_events:A",), "user_events", "a", False),
])
def test_auto_enable_patterns_select_events(patterns: tuple[str, ...], system: str, name: str,
                                            enabled: bool) -> None:
    class Event:
        pass

    event = Event()
    event.system, event.name = system, name  # type: ignore[attr-defined]
    auto = engine.Tracefs(nr_cpus=1, memory=FakeMemory(), auto_enable=patterns,
                          clocks=engine.TraceClocks.from_source(engine.ManualClock(1))).auto_enable
    assert auto.wanted(event) is enabled  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "!", "a b", "a\tb", "x" * 128])
def test_auto_enable_refuses_what_is_no_pattern(bad: str) -> None:
    with pytest.raises(ValueError, match="not an event pattern"):
        engine.EnablePattern.parse(bad)


def _tracefs(*patterns: str) -> tuple[engine.Tracefs, Client]:
    memory = FakeMemory()
    fs = engine.Tracefs(nr_cpus=1, memory=memory, auto_enable=patterns,
                        clocks=engine.TraceClocks.from_source(engine.ManualClock(1)))
    return fs, Client(memory, 100)


def _read(fs: engine.Tracefs, path: str, client: Client) -> str:
    return fs.file(path).open(os.O_RDONLY, client.task).read(0, 4096).decode()


def test_auto_enable_sets_the_bit_before_registration_returns() -> None:
    fs, c = _tracefs("user_events:wanted_*")
    data = fs.file("user_events_data").open(os.O_RDWR, c.task)
    data.ioctl(uapi.DIAG_IOCSREG, c.user_reg("wanted_one u32 a", bit=0, word=0), c.task)
    data.ioctl(uapi.DIAG_IOCSREG, c.user_reg("other u32 a", bit=1, word=0), c.task)
    assert c.word(0) & 0b11 == 0b01
    assert _read(fs, "events/user_events/wanted_one/enable", c) == "1\n"
    assert _read(fs, "events/user_events/other/enable", c) == "0\n"
    assert _read(fs, "set_event", c) == "user_events:wanted_one\n"
    # It records at once; and like any enabled event it can be turned off.
    write_index = c.memory.u32(c.tgid, Client.REG + 24)
    assert write_index == 1  # "other" took index 1 on this file; wanted_one has 0
    assert data.write(b"\0\0\0\0" + b"\7\0\0\0", 0, c.task) == 8
    fs.file("events/user_events/wanted_one/enable").open(os.O_WRONLY, c.task).write(
        b"0", 0, c.task)
    assert c.word(0) & 1 == 0


def test_auto_enable_covers_dynamic_events_and_multi_format() -> None:
    fs, c = _tracefs("user_events*:*", "!user_events:skipped")
    dynamic = fs.file("dynamic_events").open(os.O_WRONLY, c.task)
    dynamic.write(b"u:made u32 a\n", 0, c.task)
    dynamic.write(b"u:skipped u32 a\n", 0, c.task)
    data = fs.file("user_events_data").open(os.O_RDWR, c.task)
    data.ioctl(uapi.DIAG_IOCSREG, c.user_reg(
        "multi u32 a", bit=0, word=1, flags=uapi.USER_EVENT_REG_MULTI_FORMAT), c.task)
    assert _read(fs, "set_event", c) == "user_events_multi:multi.0\nuser_events:made\n"
    assert c.word(1) & 1 == 1


def test_auto_enable_is_off_without_patterns() -> None:
    fs, c = _tracefs()
    data = fs.file("user_events_data").open(os.O_RDWR, c.task)
    data.ioctl(uapi.DIAG_IOCSREG, c.user_reg("plain u32 a", bit=0), c.task)
    assert c.word(0) & 1 == 0
    assert _read(fs, "set_event", c) == ""
