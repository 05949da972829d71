"""``dynamic_events``: line splitting, creation, deletion and O_TRUNC rules."""

from __future__ import annotations

import errno

import pytest

from tracefs_fuse.engine._dynamic_events import DynamicEvents, parse_run_command
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._events import EventTable
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._uapi import Abi
from tracefs_fuse.engine._user_command import split_command
from tracefs_fuse.engine._user_events import UserEventRegistry, UserEventsFile, UserEventsProvider

from .fakes import FakeMemory
from .synth_oracle import new_tracefs

ROOT = Task(pid=1, tgid=Tgid(1), perfmon=True)
USER = Task(pid=2, tgid=Tgid(2), perfmon=False)


@pytest.mark.parametrize(("data", "lines", "count"), [
    (b"a\nb\n", ["a", "b"], 4),
    (b"a\nb", ["a", "b"], 3),
    (b"a # comment\n#only\n", ["a ", ""], 18),
    (b"", [], 0),
    (b"x" * 4094 + b"\n", ["x" * 4094], 4095),
    (b"y\n" + b"x" * 4094 + b"\n", ["y", "x" * 4094], 4097),  # re-read as a new chunk
])
def test_parse_run_command_lines(data: bytes, lines: list[str], count: int) -> None:
    seen: list[str] = []
    assert parse_run_command(data, seen.append) == count
    assert seen == lines


@pytest.mark.parametrize("data", [b"x" * 4095 + b"\n", b"x" * 5000, b"a\0b\n"])
def test_parse_run_command_rejects_long_lines(data: bytes) -> None:
    with pytest.raises(TracefsError) as info:
        parse_run_command(data, lambda line: None)
    assert info.value.errno == errno.EINVAL


def test_parse_run_command_stops_at_first_error_keeping_earlier_lines() -> None:
    seen: list[str] = []

    def run(line: str) -> None:
        if line == "bad":
            raise TracefsError(errno.EBUSY)
        seen.append(line)

    with pytest.raises(TracefsError):
        parse_run_command(b"a\nbad\nc\n", run)
    assert seen == ["a"]


class Dyn:
    def __init__(self, era: Abi | None = Abi.MAINLINE) -> None:
        self.table = EventTable()
        self.resets = 0
        self.dyn = DynamicEvents(on_release=self._reset)
        self.registry = UserEventRegistry(self.table, FakeMemory(), era=era,
                                          on_created=self.dyn.add, on_destroyed=self.dyn.remove)
        self.dyn.providers.append(UserEventsProvider(self.registry))

    def _reset(self) -> None:
        self.resets += 1

    def write(self, text: str, task: Task = ROOT) -> int:
        return self.dyn.write(text.encode("latin-1"), task)

    def errno(self, text: str, task: Task = ROOT) -> int:
        with pytest.raises(TracefsError) as info:
            self.write(text, task)
        return info.value.errno


def test_create_list_and_delete() -> None:
    d = Dyn()
    d.write("u:test u32 count; char[20] msg\nu:test_dl __data_loc char[] s\n")
    d.write("u:test_struct struct foo bar 16\nu:test_empty\n")
    assert d.dyn.render() == (
        "u:test u32 count; char[20] msg\n"
        "u:test_dl __data_loc char[] s\n"
        "u:test_struct struct foo bar 16\n"
        "u:test_empty\n")
    assert d.errno("-:test") == errno.ENOENT  # no fields given: only field-less events match
    d.write("-:test u32 count; char[20] msg")
    d.write("!u:user_events/test_empty")
    d.write("-:test_struct struct foo bar 16")
    assert d.dyn.render() == "u:test_dl __data_loc char[] s\n"
    assert d.resets == 4  # every delete command ends with the reset check


@pytest.mark.parametrize(("command", "expected"), [
    ("u:a u32 x", 0),
    ("u:  a u32 x", 0),  # spaces after u: are skipped
    ("u: u32 a", errno.EINVAL),  # "u32" is taken as the name
    ("u:a:FLAG u32 x", errno.EINVAL),
    ("u:a u32  x", errno.EINVAL),
    ("z:a u32 x", errno.EINVAL),  # nobody claims it
    ("   ", 0),
    ("", 0),
    ("-", errno.EINVAL),
    ("-x", errno.EINVAL),
    ("!nocolon", errno.EINVAL),
    ("-:", errno.EINVAL),
    ("-:other_system/a", errno.ENOENT),
])
def test_command_errnos(command: str, expected: int) -> None:
    d = Dyn()
    if expected:
        assert d.errno(command) == expected
    else:
        d.write(command)


def test_create_again_same_fields_ok_other_fields_eaddrinuse() -> None:
    d = Dyn()
    d.write("u:a u32 x")
    d.write("u:a u32 x")
    assert d.errno("u:a u64 x") == errno.EADDRINUSE
    assert d.dyn.render() == "u:a u32 x\n"


def test_dynamic_events_need_perfmon() -> None:
    d = Dyn()
    assert d.errno("u:a u32 x", USER) == errno.EPERM
    d.write("u:a u32 x", ROOT)
    assert d.errno("-:a u32 x", USER) == errno.EPERM


def test_delete_busy_event_is_ebusy_and_truncate_refuses() -> None:
    d = Dyn()
    d.write("u:p u32 x")
    event = d.registry.named("p")[0]
    f = UserEventsFile()
    f.ref_add(event, Abi.MAINLINE)
    assert d.errno("-:p u32 x") == errno.EBUSY
    with pytest.raises(TracefsError) as info:
        d.dyn.release_all(ROOT)
    assert info.value.errno == errno.EBUSY
    assert d.dyn.render() == "u:p u32 x\n"
    f.release()
    d.dyn.release_all(ROOT)
    assert d.dyn.render() == ""


def test_truncate_of_one_kind_skips_busy_events_of_others() -> None:
    """``dyn_events_release_all(type)``: busy and freed only among that type."""
    tfs = new_tracefs()
    tfs.dynamic_events.write(b"u:busy u32 x\ns:syn u64 a\n", ROOT)
    held = UserEventsFile()
    held.ref_add(tfs.registry.named("busy")[0], Abi.MAINLINE)
    with pytest.raises(TracefsError) as info:
        tfs.dynamic_events.release_all(ROOT)
    assert info.value.errno == errno.EBUSY
    assert tfs.dynamic_events.render() == "u:busy u32 x\ns:synthetic/syn\tu64 a\n"
    tfs.synth_events.release_all(ROOT)
    assert tfs.dynamic_events.render() == "u:busy u32 x\n"
    held.release()


# What one line does in each mode's dynamic_events: "ok" or the errno. An
# auto mount (era None) must give 6.1's answer where mainline's would break
# 6.1 programs (the kernel's 6.1 dyn_test clears with "!u:__test_event") and
# mainline's everywhere else.
DELETE_ROWS = [
    # (events created first, the command, mainline, 6.1, auto)
    (["u:e u32 a"], "!u:e", errno.ENOENT, "ok", "ok"),
    (["u:e u32 a"], "-:e", errno.ENOENT, "ok", "ok"),
    (["u:e u32 a"], "-:user_events/e", errno.ENOENT, "ok", "ok"),
    (["u:e"], "!u:e", "ok", "ok", "ok"),
    (["u:e u32 a"], "!u:e u32 a", "ok", "ok", "ok"),
    (["u:e u32 a; u32 b"], "!u:e u32 a", errno.ENOENT, errno.ENOENT, errno.ENOENT),
    (["u:e struct custom a 20"], "!u:e struct custom a", errno.ENOENT, errno.ENOENT,
     errno.ENOENT),
    ([], "!u:e", errno.ENOENT, errno.ENOENT, errno.ENOENT),
    (["u:other u32 a"], "!u:e", errno.ENOENT, errno.ENOENT, errno.ENOENT),
    # Text flags: refused by mainline, ignored by 5.18-6.3.
    ([], "u:e:BPF_ITER u32 a", errno.EINVAL, "ok", "ok"),
    ([], "u:e:BPF_ITER,FLAG_FUTURE u32 a", errno.EINVAL, "ok", "ok"),
    # Everything else is the same in every mode.
    ([], "u:e u32  a", errno.EINVAL, errno.EINVAL, errno.EINVAL),
    (["u:e u32 a"], "u:e u64 a", errno.EADDRINUSE, "ok", errno.EADDRINUSE),
]


@pytest.mark.parametrize(("before", "command", "mainline", "v6_1", "auto"), DELETE_ROWS)
def test_dynamic_events_lines_per_mode(before: list[str], command: str, mainline: object,
                                       v6_1: object, auto: object) -> None:
    for era, expected in ((Abi.MAINLINE, mainline), (Abi.V6_1, v6_1), (None, auto)):
        d = Dyn(era)
        for line in before:
            d.write(line)
        if expected == "ok":
            d.write(command)
        else:
            assert d.errno(command) == expected, era


def test_auto_name_only_delete_keeps_mainline_meaning_when_it_finds_an_event() -> None:
    """Of two formats of one name, ``-:name`` deletes the field-less one only.

    The 6.1 meaning (every event of the name) applies only where mainline's
    finds nothing; every match is decided before the first deletion.
    """
    for era in (Abi.MAINLINE, None):
        d = Dyn(era)
        flags = uapi.USER_EVENT_REG_MULTI_FORMAT | uapi.USER_EVENT_REG_PERSIST
        for text in ("e", "e u32 a"):
            event, _ = d.registry.find_or_create(split_command(text), flags, ROOT)
            event.put()
        d.write("-:e")
        assert [e.fields != () for e in d.registry.named("e")] == [True]
        # Now none is field-less: auto deletes the rest, mainline finds nothing.
        if era is Abi.MAINLINE:
            assert d.errno("-:e") == errno.ENOENT
        else:
            d.write("-:e")
        assert len(d.registry.named("e")) == (1 if era is Abi.MAINLINE else 0)


def test_auto_text_flag_line_makes_an_old_era_event() -> None:
    """``u:name:FLAGS`` is a 5.18-6.3 line: flags ignored, not persistent, an
    existing name answered whatever its fields, deletable by name."""
    d = Dyn(None)
    d.write("u:e:BPF_ITER u32 a")
    d.write("u:e:BPF_ITER u64 b")  # 6.1 found the name, fields unread
    assert d.dyn.render() == "u:e u32 a\n"
    (event,) = d.registry.named("e")
    assert event.legacy and not event.persist
    d.write("-:e", USER)  # no CAP_PERFMON needed for a non-persistent event
    assert d.dyn.render() == ""
