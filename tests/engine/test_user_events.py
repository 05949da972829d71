"""DIAG_IOCSREG / DEL / UNREG, enablers and writes, driven through a fake address space.

The errno rows are the ones the real kernel gave (oracle-captures.md §4, §6)
and the check order of kernel/trace/trace_events_user.c.
"""

from __future__ import annotations

import errno
import struct

import pytest

from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._events import EventFile, EventTable
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._uapi import Abi
from tracefs_fuse.engine._user_command import split_command
from tracefs_fuse.engine._user_events import UserEventRegistry, UserEventsFile
from tracefs_fuse.engine._user_events_data import UserEventsData

from .fakes import Client, FakeMemory, FakeRecorder

REG, DEL, UNREG = uapi.DIAG_IOCSREG, uapi.DIAG_IOCSDEL, uapi.DIAG_IOCSUNREG


class World:
    """One tracefs' user_events and a few fake processes."""

    def __init__(self, max_events: int = 32768) -> None:
        self.memory = FakeMemory()
        self.table = EventTable()
        self.registry = UserEventRegistry(self.table, self.memory, max_events=max_events)
        self.data = UserEventsData(self.registry, frozenset({Abi.MAINLINE}))
        self.recorder = FakeRecorder()
        self.files: dict[object, EventFile] = {}

    def client(self, tgid: int = 100, **kw: bool) -> Client:
        return Client(self.memory, tgid, **kw)

    def open(self) -> UserEventsFile:
        return UserEventsFile()

    def reg(self, f: UserEventsFile, c: Client, command: str, **kw: int) -> int:
        self.data.ioctl(f, REG, c.user_reg(command, **kw), c.task)
        return c.write_index()

    def enable(self, name: str, on: bool = True, system: str = "user_events") -> None:
        event = self.table.find(system, name)
        assert event is not None
        if event not in self.files:
            self.files[event] = EventFile(self.recorder, event)
        self.files[event].set_enabled(on)

    def snapshot(self) -> object:
        return (
            sorted((e.system, e.name, e.id, e.refcnt, e.fields, len(e.enablers)) for e in self.table),
            sorted((tgid, e.addr, e.bit, e.event.name) for tgid, mm in self.registry.mms.items()
                   for e in mm.enablers.values()),
        )


def errno_of(call) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(TracefsError) as info:
        call()
    return info.value.errno


# -- DIAG_IOCSREG argument validation (oracle §4) ----------------------------------

@pytest.mark.parametrize(("kwargs", "expected"), [
    (dict(size=27), errno.EINVAL),
    (dict(size=28), 0),
    (dict(size=64), 0),
    (dict(size=8192), errno.E2BIG),
    (dict(size=4097), errno.E2BIG),
    (dict(size=4096), 0),
    (dict(enable_size=1), errno.EINVAL),
    (dict(enable_size=2), errno.EINVAL),
    (dict(enable_size=8, bit=63), 0),
    (dict(enable_size=4, bit=32), errno.EINVAL),
    (dict(enable_size=8, bit=64), errno.EINVAL),
    (dict(enable_addr=Client.WORDS + 2), errno.EINVAL),
    (dict(enable_addr=Client.WORDS + 4, enable_size=8), errno.EINVAL),
    (dict(enable_addr=0x1000), errno.ENOMEM),  # unmapped: the first write fails
    (dict(enable_addr=(1 << 47) - 4096), errno.EFAULT),  # beyond access_ok()
    (dict(flags=uapi.USER_EVENT_REG_MAX), errno.EINVAL),
    (dict(flags=1 << 15), errno.EINVAL),
    (dict(flags=uapi.USER_EVENT_REG_PERSIST), 0),
    (dict(name_args=0), errno.EFAULT),
])
def test_register_validation(kwargs: dict, expected: int) -> None:
    w = World()
    c = w.client()
    f = w.open()
    arg = c.user_reg("v01 u32 a", **kwargs)
    if expected:
        assert errno_of(lambda: w.data.ioctl(f, REG, arg, c.task)) == expected
    else:
        assert w.data.ioctl(f, REG, arg, c.task) == 0
        assert c.write_index() == 0


def test_register_size_beyond_28_must_be_zero() -> None:
    w = World()
    c = w.client()
    f = w.open()
    arg = c.user_reg("v u32 a", size=32, extra=b"\1\0\0\0")
    assert errno_of(lambda: w.data.ioctl(f, REG, arg, c.task)) == errno.E2BIG


def test_register_struct_in_unmapped_memory_is_efault() -> None:
    w = World()
    c = w.client()
    f = w.open()
    assert errno_of(lambda: w.data.ioctl(f, REG, 0x5000, c.task)) == errno.EFAULT


def test_register_readonly_enable_word_is_enomem_and_keeps_slot() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.memory.protect(c.tgid, Client.WORDS, writable=False)
    assert errno_of(lambda: w.reg(f, c, "ro u32 a")) == errno.ENOMEM
    # The kernel keeps the per-file slot (and so the event) until close.
    assert [e.name for e, _ in f.slots] == ["ro"]
    f.release()
    assert w.table.find("user_events", "ro") is None


@pytest.mark.parametrize(("name", "expected"), [
    ("x" * 511, 0), ("x" * 512, errno.EINVAL), ("x" * 1000, errno.EINVAL),
])
def test_register_name_length_limit(name: str, expected: int) -> None:
    w = World()
    c = w.client()
    f = w.open()
    if expected:
        assert errno_of(lambda: w.reg(f, c, name)) == expected
    else:
        w.reg(f, c, name)


def test_register_name_running_into_unmapped_memory_is_efault() -> None:
    w = World()
    c = w.client()
    f = w.open()
    end = Client.NAMES + 4096 - 3
    w.memory.put(c.tgid, end, b"abc")  # no NUL before the page ends
    arg = c.user_reg("", name_args=end)
    assert errno_of(lambda: w.data.ioctl(f, REG, arg, c.task)) == errno.EFAULT


def test_register_sets_write_index_per_file_and_reuses_slots() -> None:
    w = World()
    c = w.client()
    f1, f2 = w.open(), w.open()
    assert w.reg(f1, c, "a u32 x", word=0) == 0
    assert w.reg(f1, c, "b u32 x", word=1) == 1
    assert w.reg(f1, c, "a u32 x", word=2) == 0  # same event, same index
    assert w.reg(f2, c, "b u32 x", word=3) == 0  # indices are per file
    a = w.table.find("user_events", "a")
    assert a is not None and a.refcnt == 3  # one slot + two enablers


def test_register_leaves_other_struct_fields_untouched() -> None:
    w = World()
    c = w.client()
    f = w.open()
    arg = c.user_reg("keep u32 a", bit=5)
    w.data.ioctl(f, REG, arg, c.task)
    size, bit, esize, flags, addr, names, index = struct.unpack(
        "<IBBHQQI", w.memory.read(c.tgid, arg, 28))
    assert (size, bit, esize, flags, addr, names, index) == (
        28, 5, 4, 0, Client.WORDS, Client.NAMES, 0)


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("s u32 a; u32 b", "s u32 a;u32 b", 0),
    ("s u32 a; u32 b", "s u32 a; u32 b;", 0),
    ("s u32 a", "s u64 a", errno.EADDRINUSE),
    ("s u32 a", "s", errno.EADDRINUSE),
    ("s", "s", 0),
    ("s u32 a", "s:FLAG u32 a", errno.EINVAL),
    # Lookup comes before parsing and matches on tokens: an existing event is
    # found even though "u32  a" alone would not parse.
    ("s u32 a", "s u32  a", 0),
])
def test_register_same_name_again(first: str, second: str, expected: int) -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, first, word=0)
    if expected:
        before = w.snapshot()
        assert errno_of(lambda: w.reg(f, c, second, word=1)) == expected
        assert w.snapshot() == before
    else:
        assert w.reg(f, c, second, word=1) == 0


def test_same_address_and_bit_is_eaddrinuse_before_the_name_is_read() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "v02 u32 a", bit=0)
    # Even an unreadable name gets EADDRINUSE: the check comes first.
    arg = c.user_reg("", bit=0, name_args=0)
    assert errno_of(lambda: w.data.ioctl(f, REG, arg, c.task)) == errno.EADDRINUSE
    w.reg(f, c, "v02 u32 a", bit=1)  # same word, other bit: fine
    other = w.client(200)
    w.reg(f, other, "v02 u32 a", bit=0)  # other process: fine


def test_persist_needs_perfmon() -> None:
    w = World()
    c = w.client(perfmon=False)
    f = w.open()
    assert errno_of(lambda: w.reg(f, c, "p u32 a", flags=uapi.USER_EVENT_REG_PERSIST)) == errno.EPERM


def test_user_events_max_is_emfile() -> None:
    w = World(max_events=2)
    c = w.client()
    f = w.open()
    w.reg(f, c, "e1", word=0)
    w.reg(f, c, "e2", word=1)
    before = w.snapshot()
    assert errno_of(lambda: w.reg(f, c, "e3", word=2)) == errno.EMFILE
    assert w.snapshot() == before
    w.reg(f, c, "e1", word=3)  # existing events still register


# -- enable bits ---------------------------------------------------------------

def test_enable_sets_and_clears_only_the_bit_in_every_registered_process() -> None:
    w = World()
    a, b = w.client(100), w.client(200)
    w.memory.put(a.tgid, Client.WORDS, (0x5555_0000 | 0x1234).to_bytes(4, "little"))
    f = w.open()
    w.reg(f, a, "t u32 x", bit=31)
    assert a.word() == 0x5555_1234  # registration writes the current state: clear
    w.reg(f, b, "t u32 x", bit=3)
    w.enable("t")
    assert a.word() == 0xD555_1234
    assert b.word() == 0x8
    w.enable("t", False)
    assert (a.word(), b.word()) == (0x5555_1234, 0)


def test_registration_sets_the_bit_of_an_enabled_event() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t", word=0, bit=0)
    w.enable("t")
    w.reg(f, c, "t", word=1, bit=7, enable_size=8)
    assert c.word(1) == 0x80


def test_enable_bit_in_64bit_word() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t", bit=63, enable_size=8)
    w.enable("t")
    assert c.word() == 1 << 63


def test_unregister_clears_bit_and_stops_updates() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t", bit=4)
    w.enable("t")
    assert c.word() == 0x10
    assert w.data.ioctl(f, UNREG, c.user_unreg(bit=4), c.task) == 0
    assert c.word() == 0
    w.enable("t", False)
    w.enable("t", True)
    assert c.word() == 0
    assert errno_of(lambda: w.data.ioctl(f, UNREG, c.user_unreg(bit=4), c.task)) == errno.ENOENT


@pytest.mark.parametrize(("kwargs", "expected"), [
    (dict(size=8), errno.EINVAL),
    (dict(size=15), errno.EINVAL),
    (dict(size=8192), errno.E2BIG),
    (dict(reserved=1), errno.EINVAL),
    (dict(reserved2=1), errno.EINVAL),
    (dict(bit=5), errno.ENOENT),
])
def test_unregister_validation(kwargs: dict, expected: int) -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t", bit=31)
    assert errno_of(lambda: w.data.ioctl(f, UNREG, c.user_unreg(**kwargs), c.task)) == expected


@pytest.mark.parametrize(("reserved", "expected"), [(0, errno.EFAULT), (1, errno.EINVAL)])
def test_unregister_checks_reserved_before_the_copy_result(reserved: int, expected: int) -> None:
    """user_unreg_get(): copy_struct_from_user() zero-fills what it could not
    copy and the reserved fields are checked before its result is returned."""
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t", bit=31)
    straddling = c.REG + 4096 - 8  # disable_addr lies in the unmapped next page
    w.memory.put(c.tgid, straddling, struct.pack("<IBBH", 16, 31, reserved, 0))
    assert errno_of(lambda: w.data.ioctl(f, UNREG, straddling, c.task)) == expected


def test_unregister_without_any_registration_is_enoent() -> None:
    w = World()
    c = w.client()
    assert errno_of(lambda: w.data.ioctl(w.open(), UNREG, c.user_unreg(), c.task)) == errno.ENOENT


def test_fork_copies_enablers_and_exit_drops_them() -> None:
    w = World()
    parent = w.client(100)
    f = w.open()
    w.reg(f, parent, "t", bit=2)
    w.memory.fork(100, 101)
    child = Tgid(101)
    w.registry.fork(parent.tgid, child)
    w.enable("t")
    assert w.memory.u64(101, Client.WORDS) == 4 and parent.word() == 4
    event = w.table.find("user_events", "t")
    assert event is not None and event.refcnt == 4  # slot, 2 enablers, probe
    w.registry.exit(child)
    w.enable("t", False)
    assert w.memory.u64(101, Client.WORDS) == 4  # no longer written
    assert event.refcnt == 2


def test_fork_of_a_process_without_enablers_copies_nothing() -> None:
    w = World()
    w.registry.fork(Tgid(100), Tgid(101))
    assert w.registry.mms == {}


def test_exit_detaches_at_once_and_drops_references_in_steps() -> None:
    """user_event_mm_remove: nothing is written into a detached image again;
    its references go in bounded steps (the kernel's are RCU-deferred)."""
    w = World()
    c = w.client()
    f = w.open()
    for word in range(5):
        w.reg(f, c, "t u32 a", bit=0, word=word)
    f.release()
    event = w.table.find("user_events", "t")
    assert event is not None and event.refcnt == 5
    w.registry.exit(c.tgid, deferred=True)
    assert c.tgid not in w.registry.mms
    assert not w.registry.enabler_exists(c.tgid, Client.WORDS, 0)
    w.memory.writes.clear()
    w.enable("t")
    assert w.memory.writes == []  # the detached image is not written
    w.enable("t", False)
    assert not w.registry.release_detached(budget=2)
    assert event.refcnt == 3 and not event.destroyed
    assert not w.registry.release_detached(budget=2)
    assert w.registry.release_detached(budget=2)  # the last one: done
    assert event.destroyed and w.table.find("user_events", "t") is None
    assert w.registry.release_detached(budget=2)


def test_new_image_under_the_same_number_starts_afresh() -> None:
    """An exec'd process registering again while its old image's references
    are still being dropped."""
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t u32 a", bit=0)
    w.registry.exit(c.tgid, deferred=True)
    w.reg(f, c, "t u32 a", bit=0)  # the same address and bit: no EADDRINUSE
    assert [(e.addr, e.bit) for e in w.registry.mms[c.tgid].enablers.values()] == [
        (Client.WORDS, 0)]
    event = w.table.find("user_events", "t")
    assert event is not None and len(event.enablers) == 2
    assert w.registry.release_detached()
    assert len(event.enablers) == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_teardown_of_interleaved_enablers_is_linear() -> None:
    """Issue 11, item 3: 3 processes x 100,000 enablers of one event,
    registered interleaved, torn down one process after the other. With a
    list removed from by value this took 554 s; every step is O(1) now."""
    w = World()
    event, _ = w.registry.find_or_create(split_command("t u32 a"), 0, w.client(1).task)
    clients = [w.client(tgid) for tgid in (100, 101, 102)]
    for c in clients:
        w.memory.map(c.tgid, 0x1000000, 100_000 // 8)
    for i in range(100_000):
        for c in clients:
            assert w.registry.add_enabler(c.tgid, event, 0x1000000 + i // 8, i % 8)
    assert len(event.enablers) == 300_000
    for c in clients:
        w.registry.exit(c.tgid, deferred=True)
        while not w.registry.release_detached(budget=4096):
            pass
    assert not event.enablers and event.refcnt == 1


# -- lifetime -------------------------------------------------------------------

def test_auto_delete_after_last_reference() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t u32 a")
    f.release()
    assert w.table.find("user_events", "t") is not None  # the enabler holds it
    w.data.ioctl(w.open(), UNREG, c.user_unreg(), c.task)
    assert w.table.find("user_events", "t") is None


def test_enabled_event_survives_until_disabled() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "t")
    w.enable("t")
    f.release()
    w.registry.exit(c.tgid)
    assert w.table.find("user_events", "t") is not None
    w.enable("t", False)
    assert w.table.find("user_events", "t") is None


def test_delete_rules() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "v02 u32 a", bit=0)
    w.reg(f, c, "v12 u32 a", bit=1, flags=uapi.USER_EVENT_REG_PERSIST)
    def del_(name: str) -> int:
        return w.data.ioctl(f, DEL, c.name(name, Client.NAMES + 1024), c.task)

    assert errno_of(lambda: del_("nothere")) == errno.ENOENT
    assert errno_of(lambda: del_("v02")) == errno.EBUSY
    assert errno_of(lambda: del_("v12")) == errno.EBUSY
    w.data.ioctl(f, UNREG, c.user_unreg(bit=1), c.task)
    assert errno_of(lambda: del_("v12")) == errno.EBUSY  # the file's slot remains
    f.release()
    del_("v12")
    assert w.table.find("user_events", "v12") is None


def test_delete_persistent_needs_perfmon() -> None:
    w = World()
    root = w.client(100)
    w.registry.create_persistent("p u32 a", root.task)
    user = w.client(200, perfmon=False)
    f = w.open()
    arg = user.name("p")
    assert errno_of(lambda: w.data.ioctl(f, DEL, arg, user.task)) == errno.EPERM
    w.data.ioctl(f, DEL, root.name("p"), root.task)


# -- multi-format ----------------------------------------------------------------

def test_multi_format_names_and_matching() -> None:
    w = World()
    c = w.client()
    f = w.open()
    multi = uapi.USER_EVENT_REG_MULTI_FORMAT
    assert w.reg(f, c, "test_multi u32 a", bit=0, flags=multi) == 0
    assert w.reg(f, c, "test_multi u64 a", bit=1, flags=multi) == 1
    assert w.reg(f, c, "test_multi u32 a", bit=2, flags=multi) == 0
    assert w.reg(f, c, "test_multi u16 a", bit=3) == 2
    assert [e.name for e in w.registry] == ["test_multi", "test_multi.1", "test_multi.0"]
    assert {(e.system, e.name) for e in w.table} == {
        ("user_events_multi", "test_multi.0"), ("user_events_multi", "test_multi.1"),
        ("user_events", "test_multi")}
    assert errno_of(lambda: w.data.ioctl(f, DEL, c.name("test_multi", Client.NAMES + 512),
                                         c.task)) == errno.EBUSY


def test_failed_multi_format_registration_still_advances_the_counter() -> None:
    w = World()
    c = w.client()
    f = w.open()
    multi = uapi.USER_EVENT_REG_MULTI_FORMAT
    assert errno_of(lambda: w.reg(f, c, "m u33 a", flags=multi, word=0)) == errno.EINVAL
    w.reg(f, c, "m u32 a", flags=multi, word=1)
    assert [e.name for e in w.registry] == ["m.1"]


def test_status_order_is_the_kernels_hash_order() -> None:
    w = World()
    c = w.client()
    f = w.open()
    for i, cmd in enumerate(["test u32 count; char[20] msg", "test_dl __data_loc char[] s",
                             "test_rl __rel_loc char[] s", "test_struct struct foo bar 16",
                             "test_empty", "test_types u8 a"]):
        w.reg(f, c, cmd, word=i)
    assert [e.name for e in w.registry] == [
        "test_empty", "test_rl", "test_dl", "test_struct", "test", "test_types"]


# -- writes (oracle §6) -------------------------------------------------------

def write(w: World, f: UserEventsFile, c: Client, index: int, payload: bytes) -> int:
    return w.data.write(f, index.to_bytes(4, "little", signed=True) + payload, 0, c.task)


def test_write_error_order() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "test u32 count; char[20] msg")
    payload = (42).to_bytes(4, "little") + b"hello".ljust(20, b"\0")
    assert errno_of(lambda: write(w, f, c, 0, payload)) == errno.EBADF
    assert errno_of(lambda: write(w, f, c, 77, payload)) == errno.ENOENT
    assert errno_of(lambda: write(w, f, c, -1, payload)) == errno.EINVAL
    assert errno_of(lambda: w.data.write(f, b"\0\0", 0, c.task)) == errno.EFAULT
    assert errno_of(lambda: w.data.write(f, b"", 0, c.task)) == errno.EFAULT
    assert errno_of(lambda: w.data.write(f, b"\0" * 28, 5, c.task)) == errno.EFAULT
    assert errno_of(lambda: write(w, f, c, 0, b"")) == errno.EINVAL  # short, even disabled
    w.enable("test")
    assert write(w, f, c, 0, payload) == 28
    assert errno_of(lambda: write(w, f, c, 0, payload[:4])) == errno.EINVAL
    assert write(w, f, c, 0, bytes(124)) == 128
    event = w.table.find("user_events", "test")
    assert event is not None
    entry, _ = w.recorder.entries[0]
    assert entry == struct.pack("<HBBi", event.id, 0, 0, c.task.pid) + payload


def dl(offset: int, length: int) -> bytes:
    return ((length << 16) | offset).to_bytes(4, "little")


@pytest.mark.parametrize(("command", "payload", "ok"), [
    ("d __data_loc char[] s; u32 n", dl(16, 6) + b"\5\0\0\0" + b"world\0", True),
    ("d __data_loc char[] s; u32 n", dl(8, 6) + b"\6\0\0\0" + b"world\0", True),
    ("d __data_loc char[] s; u32 n", dl(17, 6) + b"\0\0\0\0" + b"world\0", False),
    ("d __data_loc char[] s; u32 n", dl(16, 7) + b"\0\0\0\0" + b"world\0", False),
    ("d __data_loc char[] s; u32 n", dl(16, 5) + b"\0\0\0\0" + b"world\0", False),
    ("d __data_loc char[] s; u32 n", dl(16, 0) + b"\7\0\0\0", True),
    # An empty string at offset 0: its terminator would be the byte before
    # the entry, the reservation's (0 here: FakeRecorder.before), never the
    # record's last byte.
    ("d __data_loc char[] s; u32 n", dl(0, 0) + b"\0\0\0\7", True),
    ("d __rel_loc char[] s", dl(0, 6) + b"relat\0", True),
    ("d __rel_loc char[] s", dl(1, 6) + b"relat\0", False),
    ("d __data_loc u32[] s", dl(12, 2) + b"\1\2", True),  # no NUL check without char
])
def test_write_validates_dynamic_fields(command: str, payload: bytes, ok: bool) -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, command)
    w.enable("d")
    if ok:
        assert write(w, f, c, 0, payload) == len(payload) + 4
        assert len(w.recorder.entries) == 1
    else:
        assert errno_of(lambda: write(w, f, c, 0, payload)) == errno.EFAULT
        assert w.recorder.entries == []


def test_empty_data_loc_string_at_offset_0_is_checked_before_the_entry() -> None:
    """user_event_validate: ``*(char *)(pos - 1)`` with ``pos = data + 0 + 0``."""
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "d __data_loc char[] s; u32 n")
    w.enable("d")
    w.recorder.before = 0x2A  # a ring buffer event header's last byte, not 0
    assert errno_of(lambda: write(w, f, c, 0, dl(0, 0) + bytes(4))) == errno.EFAULT
    assert w.recorder.entries == []
    w.recorder.before = 0
    assert write(w, f, c, 0, dl(0, 0) + b"\0\0\0\7") == 12
    assert len(w.recorder.entries) == 1


def test_write_not_validated_when_nothing_would_record() -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.reg(f, c, "d __data_loc char[] s")
    w.enable("d")
    w.recorder.on = False  # tracing_on 0: the reservation fails first
    assert write(w, f, c, 0, dl(99, 99)) == 8
