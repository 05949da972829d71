"""DIAG_IOCSREG / DIAG_IOCSDEL and the status page of the 5.18 and 6.1 ABIs.

Driven through a fake address space like test_user_events.py. The 6.1 rows
are what Linux 6.1.192 answered (tests/data/user_events-6.1.192-legacy.txt,
replayed key by key at the end); the 5.18 rows follow its source (5.18 was
``depends on BROKEN`` and cannot be booted).
"""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._dynamic_events import DynamicEvents
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._events import TRACE_EVENT_TYPE_MAX, EventFile, EventTable, Probe
from tracefs_fuse.engine._legacy_abi import LAYOUTS, LegacyRegistration
from tracefs_fuse.engine._status_page import (STATUS_PAGE_SIZE, StatusFile, StatusMapping,
                                              StatusPage, render_legacy_status,
                                              user_events_status_node)
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tree import FileKind, TextFile, Vma
from tracefs_fuse.engine._uapi import Abi
from tracefs_fuse.engine._user_events import (UserEvent, UserEventRegistry, UserEventsFile,
                                              UserEventsProvider)
from tracefs_fuse.engine._user_events_data import UserEventsData

from .fakes import Client, FakeMemory, FakeRecorder

REG, DEL, UNREG = uapi.DIAG_IOCSREG, uapi.DIAG_IOCSDEL, uapi.DIAG_IOCSUNREG
MODES = {"auto": frozenset(Abi), "5.18": frozenset({Abi.V5_18}),
         "6.1": frozenset({Abi.V6_1}), "mainline": frozenset({Abi.MAINLINE})}
GOLDEN = Path(__file__).parent.parent / "data" / "user_events-6.1.192-legacy.txt"


class LegacyClient(Client):
    """A fake process that speaks the struct user_reg of one old era."""

    def legacy_reg(self, abi: Abi, command: str | None, *, size: int | None = None,
                   name_args: int | None = None, extra: bytes = b"") -> int:
        names = self.name(command) if name_args is None else name_args
        if abi is Abi.V5_18:
            # The 4 padding bytes after size are copied in and ignored.
            raw = struct.pack("<I4sQII", 24 if size is None else size, b"\xaa" * 4, names,
                              0xDEADBEEF, 0xDEADBEEF)
        else:
            raw = struct.pack("<IQII", 20 if size is None else size, names,
                              0xDEADBEEF, 0xDEADBEEF)
        # The whole scratch page is rewritten: bytes past the struct are zero
        # unless ``extra`` says otherwise (copy_struct_from_user reads them).
        self.memory.put(self.tgid, self.REG, (raw + extra).ljust(4096, b"\0"))
        return self.REG

    def outputs(self, abi: Abi) -> tuple[int, int]:
        """(status_index or status_bit, write_index) as the ioctl left them."""
        layout = LAYOUTS[abi]
        return (self.memory.u32(self.tgid, self.REG + layout.status_offset),
                self.memory.u32(self.tgid, self.REG + layout.write_index_offset))


class World:
    """One mount's user_events in a given ``--abi`` mode, and fake processes."""

    def __init__(self, mode: str) -> None:
        self.abis = MODES[mode]
        self.memory = FakeMemory()
        self.table = EventTable()
        self.page = StatusPage(self.abis) if any(a.has_status_page for a in self.abis) else None
        self.dynamic_events = DynamicEvents()
        self.registry = UserEventRegistry(self.table, self.memory, status_page=self.page,
                                          era=next(iter(self.abis)) if len(self.abis) == 1
                                          else None,
                                          on_created=self.dynamic_events.add,
                                          on_destroyed=self.dynamic_events.remove)
        self.dynamic_events.providers.append(UserEventsProvider(self.registry))
        legacy = LegacyRegistration(self.registry) if self.page else None
        self.data = UserEventsData(self.registry, self.abis, legacy)
        self.recorder = FakeRecorder()
        self.files: dict[UserEvent, EventFile] = {}

    def client(self, tgid: int = 100) -> LegacyClient:
        return LegacyClient(self.memory, tgid)

    def open(self) -> UserEventsFile:
        return UserEventsFile()

    def reg(self, f: UserEventsFile, c: LegacyClient, abi: Abi, command: str,
            **kw: int) -> tuple[int, int]:
        self.data.ioctl(f, REG, c.legacy_reg(abi, command, **kw), c.task)
        return c.outputs(abi)

    def event(self, name: str) -> UserEvent:
        event = self.table.find("user_events", name)
        assert isinstance(event, UserEvent), name
        return event

    def enable(self, name: str, on: bool = True) -> None:
        event = self.event(name)
        self.files.setdefault(event, EventFile(self.recorder, event)).set_enabled(on)

    def delete(self, f: UserEventsFile, c: LegacyClient, name: str) -> None:
        self.data.ioctl(f, DEL, c.name(name, Client.NAMES + 2048), c.task)

    def map(self, **vma: int) -> StatusMapping:
        """A client's mapping of user_events_status, as the adapter reports it."""
        assert self.page is not None
        mapping = StatusMapping(self.page)
        mapping.mapped(Vma(**{**dict(pgoff=0, nr_pages=1, write=False, execute=False,
                                      shared=True), **vma}))
        return mapping

    def page_bytes(self) -> bytes:
        assert self.page is not None
        return self.page.mmap_read(0, STATUS_PAGE_SIZE)


def errno_of(call) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(TracefsError) as info:
        call()
    return info.value.errno


def bit_set(page: bytes, bit: int) -> bool:
    return bool(page[bit >> 3] & 1 << (bit & 7))


def write(w: World, f: UserEventsFile, c: Client, index: int, payload: bytes) -> int:
    return w.data.write(f, index.to_bytes(4, "little", signed=True) + payload, 0, c.task)


# -- DIAG_IOCSREG argument checks ------------------------------------------------------

@pytest.mark.parametrize(("abi", "kwargs", "expected"), [
    # 6.1 user_reg_get(): size > PAGE_SIZE, size < 20, copy_struct_from_user.
    (Abi.V6_1, dict(size=0), errno.EINVAL),
    (Abi.V6_1, dict(size=19), errno.EINVAL),
    (Abi.V6_1, dict(size=20), 0),
    (Abi.V6_1, dict(size=24, extra=bytes(4)), 0),
    (Abi.V6_1, dict(size=24, extra=b"\1\0\0\0"), errno.E2BIG),
    (Abi.V6_1, dict(size=4096), 0),
    (Abi.V6_1, dict(size=4097), errno.E2BIG),
    (Abi.V6_1, dict(name_args=0), errno.EFAULT),
    # 5.18 had no lower bound: a short struct is zero-filled, so the name
    # pointer reads as NULL below 9 bytes, and as its low half (enough for
    # the fake's 0x20000, little-endian) below 16.
    (Abi.V5_18, dict(size=0), errno.EFAULT),
    (Abi.V5_18, dict(size=8), errno.EFAULT),
    (Abi.V5_18, dict(size=12), 0),
    (Abi.V5_18, dict(size=16), 0),
    (Abi.V5_18, dict(size=24), 0),
    (Abi.V5_18, dict(size=28, extra=bytes(4)), 0),
    (Abi.V5_18, dict(size=28, extra=b"\0\0\0\1"), errno.E2BIG),
    (Abi.V5_18, dict(size=4097), errno.E2BIG),
    (Abi.V5_18, dict(name_args=0), errno.EFAULT),
])
def test_legacy_register_validation(abi: Abi, kwargs: dict, expected: int) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    arg = c.legacy_reg(abi, "v u32 a", **kwargs)
    if expected:
        before = (w.page_bytes(), len(w.registry))
        assert errno_of(lambda: w.data.ioctl(f, REG, arg, c.task)) == expected
        assert (w.page_bytes(), len(w.registry)) == before
        assert f.slots == []
    else:
        assert w.data.ioctl(f, REG, arg, c.task) == 0
        assert c.outputs(abi) == (1, 0)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
@pytest.mark.parametrize(("name", "expected"), [
    ("x" * 511, 0), ("x" * 512, errno.EINVAL),
])
def test_legacy_register_name_length_limit(abi: Abi, name: str, expected: int) -> None:
    w = World(abi.value)
    c = w.client()
    if expected:
        assert errno_of(lambda: w.reg(w.open(), c, abi, name)) == expected
    else:
        assert w.reg(w.open(), c, abi, name) == (1, 0)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_register_writes_back_only_the_slot_and_write_index(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    w.reg(f, c, abi, "other")
    arg = c.legacy_reg(abi, "keep u32 a")
    before = c.memory.read(c.tgid, Client.REG, 64)
    w.data.ioctl(f, REG, arg, c.task)
    after = c.memory.read(c.tgid, Client.REG, 64)
    layout = LAYOUTS[abi]
    changed = [i for i in range(64) if before[i] != after[i]]
    # Slot 2 and index 1 replace 0xDEADBEEF: only the low bytes differ.
    assert changed == [layout.status_offset + i for i in range(4)] + [
        layout.write_index_offset + i for i in range(4)]
    assert c.outputs(abi) == (2, 1)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_register_same_name_ignores_fields_and_flags(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    assert w.reg(f, c, abi, "a u32 count") == (1, 0)
    # Linux 6.1.192: other fields, unparsable fields and text flags all
    # return the existing event, its slot and its index.
    for command in ("a u32 count", "a u64 other; char[8] s", "a u33 nonsense",
                    "a:BPF_ITER u32 count"):
        assert w.reg(f, c, abi, command) == (1, 0)
    # Text flags of a new event are cut off the name and ignored.
    assert w.reg(f, c, abi, "b:FOO,BAR char[8] s") == (2, 1)
    assert [e.name for e in w.registry] == sorted(["a", "b"], key=lambda n: n != "b")
    assert w.event("a").fields[0].name == "count"


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_register_bad_fields_take_no_slot(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    assert errno_of(lambda: w.reg(f, c, abi, "bad u33 a")) == errno.EINVAL
    assert w.reg(f, c, abi, "after") == (1, 0)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_register_indices_are_per_file(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    f1, f2 = w.open(), w.open()
    assert w.reg(f1, c, abi, "a") == (1, 0)
    assert w.reg(f1, c, abi, "b") == (2, 1)
    assert w.reg(f2, c, abi, "b") == (2, 0)  # same slot, this file's index


# -- the example.c flow ----------------------------------------------------------------

@pytest.mark.parametrize(("abi", "enabled"), [
    # 5.18: the byte is the OR of EVENT_STATUS_* bits; 6.1: the bit.
    (Abi.V5_18, lambda page, slot: page[slot] == 0x01),
    (Abi.V6_1, lambda page, slot: bit_set(page, slot)),
])
def test_legacy_example_flow(abi: Abi, enabled) -> None:  # type: ignore[no-untyped-def]
    w = World(abi.value)
    c = w.client()
    status = user_events_status_node(w.registry, w.page).open(0, c.task)
    assert isinstance(status, StatusFile)
    mapping = w.map()  # mmap(PROT_READ, MAP_SHARED) of one page, before registering
    page = mapping.map_read(0, STATUS_PAGE_SIZE)
    assert page == bytes(STATUS_PAGE_SIZE)
    f = w.open()
    slot, index = w.reg(f, c, abi, "test u32 count")
    assert (slot, index) == (1, 0)
    assert not enabled(mapping.map_read(0, STATUS_PAGE_SIZE), slot)
    version = w.page.version if w.page else 0
    w.enable("test")
    assert enabled(mapping.map_read(0, STATUS_PAGE_SIZE), slot)
    assert w.page is not None and w.page.version > version
    assert write(w, f, c, index, (7).to_bytes(4, "little")) == 8
    assert len(w.recorder.entries) == 1
    w.enable("test", False)
    assert mapping.map_read(0, STATUS_PAGE_SIZE) == bytes(STATUS_PAGE_SIZE)


def test_legacy_5_18_byte_shows_each_probe_kind() -> None:
    w = World("5.18")
    c = w.client()
    w.reg(w.open(), c, Abi.V5_18, "test u32 count")
    event = w.event("test")
    w.enable("test")
    event.attach(Probe.PERF)
    assert w.page_bytes()[1] == 0x03
    event.attach(Probe.OTHER)
    assert w.page_bytes()[1] == 0x83
    w.enable("test", False)
    assert w.page_bytes()[1] == 0x82


@pytest.mark.parametrize(("abi", "disabled_write"), [
    # 5.18 (never fixed): a disabled event's write is a no-op returning count.
    (Abi.V5_18, 8),
    # Linux 6.1.192 answers EBADF: 6.4-rc7's "Fix incorrect return value for
    # writing operation when events are disabled" reached 6.1.y (v6.1-v6.3
    # as released returned the count). Needs UserEventsData.write to return
    # the count only for 5.18 slots.
    (Abi.V6_1, errno.EBADF),
])
def test_legacy_write_to_disabled_event(abi: Abi, disabled_write: int) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    w.reg(f, c, abi, "test u32 count")
    payload = (7).to_bytes(4, "little")
    if disabled_write == 8:
        assert write(w, f, c, 0, payload) == 8
    else:
        assert errno_of(lambda: write(w, f, c, 0, payload)) == disabled_write
    assert errno_of(lambda: write(w, f, c, 0, b"\0\0")) == errno.EINVAL  # short, still checked
    assert errno_of(lambda: write(w, f, c, 9, payload)) == errno.ENOENT
    assert errno_of(lambda: write(w, f, c, -1, payload)) == errno.EINVAL
    assert w.recorder.entries == []


def test_legacy_status_file_text_and_page_on_one_open_file() -> None:
    w = World("6.1")
    c = w.client()
    w.reg(w.open(), c, Abi.V6_1, "test u32 count")
    node = user_events_status_node(w.registry, w.page)
    assert (node.kind, node.mode & 0o777) == (FileKind.MAPPABLE_TEXT, 0o640)
    status = node.open(0, c.task)
    assert isinstance(status, StatusFile)
    mapping = w.map()
    w.enable("test")
    text = b"1:test # Used by ftrace\n\nActive: 1\nBusy: 1\nMax: 32768\n"
    assert status.read(0, 4096) == text
    assert mapping.map_read(0, 4) == b"\x02\0\0\0"
    assert status.read(0, 4096) == text  # and text reads leave the page alone
    assert mapping.map_read(0, 1) == b"\x02"


@pytest.mark.parametrize(("vma", "expected"), [
    # user_status_mmap() of 6.1.192 (mmap.* in the capture): one page, else
    # EINVAL; offset, PROT_WRITE, PROT_EXEC and MAP_PRIVATE are all accepted.
    (dict(), 0),
    (dict(nr_pages=2), errno.EINVAL),
    (dict(pgoff=1), 0),
    (dict(write=True), 0),
    (dict(shared=False, write=True), 0),
    (dict(execute=True), 0),
])
def test_legacy_status_mapping_refusals(vma: dict, expected: int) -> None:
    w = World("6.1")
    if expected:
        assert errno_of(lambda: w.map(**vma)) == expected
    else:
        w.map(**vma).unmapped()


@pytest.mark.parametrize(("mode", "kind", "perm", "first_line"), [
    ("5.18", FileKind.MAPPABLE_TEXT, 0o640, "1:test"),
    ("6.1", FileKind.MAPPABLE_TEXT, 0o640, "1:test"),
    # auto cannot name a byte and a bit on one line: the mainline text.
    ("auto", FileKind.MAPPABLE_TEXT, 0o640, "test"),
    ("mainline", FileKind.TEXT, 0o440, "test"),
])
def test_legacy_status_node_per_mode(mode: str, kind: FileKind, perm: int,
                                     first_line: str) -> None:
    w = World(mode)
    w.registry.create_persistent("test u32 a", Task(pid=1, tgid=1, perfmon=True))  # type: ignore[arg-type]
    node = user_events_status_node(w.registry, w.page)
    assert (node.kind, node.mode & 0o777) == (kind, perm)
    opened = node.open(0, Task(pid=1, tgid=1))  # type: ignore[arg-type]
    assert isinstance(opened, TextFile)
    assert opened.read(0, 4096).decode().split("\n")[0] == first_line


@pytest.mark.parametrize(("abi", "text"), [
    (Abi.V5_18, "3:__legacy_a\n2:c\n1:__legacy_b\n\nActive: 3\nBusy: 0\nMax: 4096\n"),
    (Abi.V6_1, "3:__legacy_a\n1:__legacy_b\n2:c\n\nActive: 3\nBusy: 0\nMax: 32768\n"),
])
def test_legacy_status_walks_the_eras_hash_table(abi: Abi, text: str) -> None:
    # 5.18 had DEFINE_HASHTABLE(register_table, 4); 6.1 widened it to 8 bits.
    # hash_32(jhash(name)) puts __legacy_b and c in 4-bit bucket 15 but 8-bit
    # buckets 240 and 241, __legacy_a in 2 and 33: within one 5.18 bucket the
    # newest comes first, 6.1 tells them apart by the wider hash.
    w = World(abi.value)
    c = w.client()
    f = w.open()
    for name in ("__legacy_b", "c", "__legacy_a"):
        w.reg(f, c, abi, name)
    assert render_legacy_status(w.registry, abi) == text


# -- processes, deletion, lifetime -----------------------------------------------------

@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_two_processes_share_the_page(abi: Abi) -> None:
    w = World(abi.value)
    a, b = w.client(100), w.client(200)
    fa, fb = w.open(), w.open()
    assert w.reg(fa, a, abi, "shared u32 x") == (1, 0)
    assert w.reg(fb, b, abi, "mine") == (2, 0)
    assert w.reg(fb, b, abi, "shared") == (1, 1)
    w.enable("shared")
    w.enable("mine")
    page = w.page_bytes()
    if abi is Abi.V5_18:
        assert page[1:3] == b"\x01\x01"
    else:
        assert page[0] == 0b110
    # Old-era events never auto-delete: both files closed, both remain.
    fa.release()
    fb.release()
    w.enable("shared", False)
    assert {e.name for e in w.registry} == {"shared", "mine"}


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_delete_rules(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    f, f2 = w.open(), w.open()
    w.reg(f, c, abi, "a u32 count")
    w.reg(f2, c, abi, "b")
    w.enable("a")
    # Linux 6.1.192: EBUSY while enabled or held by a file, ENOENT for an
    # unknown name (fields are part of the name here), 0 once unreferenced.
    assert errno_of(lambda: w.delete(f, c, "a")) == errno.EBUSY
    w.enable("a", False)
    assert errno_of(lambda: w.delete(f, c, "a")) == errno.EBUSY
    assert errno_of(lambda: w.delete(f, c, "nothere")) == errno.ENOENT
    assert errno_of(lambda: w.delete(f, c, "a u32 count")) == errno.ENOENT
    f.release()
    w.delete(f2, c, "a")
    assert errno_of(lambda: w.delete(f2, c, "a")) == errno.ENOENT
    assert w.table.find("user_events", "a") is None
    # The freed slot is the lowest free one again.
    assert w.reg(f2, c, abi, "c") == (1, 1)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_delete_zeroes_the_slot_and_survives_no_probe(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    w.reg(f, c, abi, "a")
    event = w.event("a")
    assert event.legacy and event.refcnt == 2  # self + the file's slot
    f.release()
    assert event.refcnt == 1
    w.delete(w.open(), c, "a")
    assert event.status_index is None and event.status_bit is None
    assert w.page_bytes() == bytes(STATUS_PAGE_SIZE)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_pinned_modes_have_no_unregister(abi: Abi) -> None:
    w = World(abi.value)
    c = w.client()
    assert errno_of(lambda: w.data.ioctl(w.open(), UNREG, c.user_unreg(), c.task)) == errno.ENOTTY


@pytest.mark.parametrize(("mode", "size", "expected"), [
    ("mainline", 20, errno.EINVAL),
    ("mainline", 24, errno.EINVAL),
    ("auto", 22, errno.EINVAL),
    ("auto", 27, errno.EINVAL),
])
def test_legacy_sizes_refused_where_no_era_takes_them(mode: str, size: int,
                                                      expected: int) -> None:
    w = World(mode)
    c = w.client()
    arg = c.legacy_reg(Abi.V6_1, "v u32 a", size=size, extra=bytes(8))
    assert errno_of(lambda: w.data.ioctl(w.open(), REG, arg, c.task)) == expected
    assert len(w.registry) == 0


# -- the full page ------------------------------------------------------------------

def fill_page(w: World, abi: Abi, leave: int = 0) -> list[UserEvent]:
    """Take every free slot but ``leave`` with placeholder events.

    Registering 32767 events one ioctl at a time costs minutes here (the
    registry counts its events and a file scans its slots on every
    registration, as the kernel's refs array does); placeholders fill the
    page directly and the EMFILE path is still the registration's.
    """
    assert w.page is not None
    fillers = []
    while w.page.has_room(abi):
        filler = UserEvent(w.registry, "filler", "filler", (), 0, legacy=True)
        w.page.claim(filler, abi)
        fillers.append(filler)
    for filler in fillers[len(fillers) - leave:]:
        w.page.release(filler)
    return fillers[:len(fillers) - leave]


@pytest.mark.parametrize(("abi", "capacity"), [
    (Abi.V5_18, STATUS_PAGE_SIZE - 1),
    pytest.param(Abi.V6_1, STATUS_PAGE_SIZE * 8 - 1, marks=pytest.mark.slow),
])
def test_legacy_full_page_is_emfile(abi: Abi, capacity: int) -> None:
    w = World(abi.value)
    c = w.client()
    f = w.open()
    fillers = fill_page(w, abi, leave=2)
    assert w.reg(f, c, abi, "f1") == (capacity - 1, 0)
    assert w.reg(f, c, abi, "f2") == (capacity, 1)
    before = (w.page_bytes(), len(w.registry), len(f.slots))
    assert errno_of(lambda: w.reg(f, c, abi, "one_more")) == errno.EMFILE
    # The page is checked before the fields are parsed (6.1.192 agrees).
    assert errno_of(lambda: w.reg(f, c, abi, "full u33 a")) == errno.EMFILE
    assert (w.page_bytes(), len(w.registry), len(f.slots)) == before
    assert w.reg(f, c, abi, "f1 u64 other") == (capacity - 1, 0)  # existing ones still do
    assert w.page is not None
    w.page.release(fillers[98])  # slot 99
    assert w.reg(f, c, abi, "new") == (99, 2)


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_full_page_refuses_u_lines_before_their_fields(abi: Abi) -> None:
    """dynamic_events goes through the same user_event_parse(): EMFILE first."""
    w = World(abi.value)
    fill_page(w, abi)
    task = Task(pid=1, tgid=1, perfmon=True)  # type: ignore[arg-type]
    for line in ("full u32 a", "full u33 a"):
        assert errno_of(lambda: w.registry.create_persistent(line, task)) == errno.EMFILE  # noqa: B023
    assert len(w.registry) == 0


@pytest.mark.parametrize("abi", [Abi.V5_18, Abi.V6_1])
def test_legacy_no_event_id_left_is_enodev_and_takes_no_slot(abi: Abi) -> None:
    """register_trace_event() fails after the page was checked: the slot is
    only taken once the event exists (set_bit after user_event_trace_register)."""
    w = World(abi.value)
    c = w.client()
    f = w.open()
    w.table._next_id = TRACE_EVENT_TYPE_MAX + 1  # type: ignore[attr-defined]
    assert w.page is not None
    before = (w.page.statistics(), w.page_bytes(), len(w.registry), len(f.slots))
    assert errno_of(lambda: w.reg(f, c, abi, "noid u32 a")) == errno.ENODEV
    assert (w.page.statistics(), w.page_bytes(), len(w.registry), len(f.slots)) == before


# -- auto: every era in one mount ------------------------------------------------------

def test_legacy_auto_mode_serves_all_eras_from_one_page() -> None:
    w = World("auto")
    old, new, cur = w.client(100), w.client(200), w.client(300)
    mapping = w.map()
    f_old, f_new, f_cur = w.open(), w.open(), w.open()
    assert w.reg(f_old, old, Abi.V5_18, "a u32 x") == (1, 0)
    assert w.reg(f_new, new, Abi.V6_1, "b u32 x") == (32767, 0)
    w.data.ioctl(f_cur, REG, cur.user_reg("c u32 x", bit=0), cur.task)
    c = w.event("c")
    assert (c.status_index, c.status_bit) == (None, None)
    # An existing event registered through another era gets that era's slot.
    assert w.reg(f_new, new, Abi.V6_1, "a") == (32766, 1)
    assert w.reg(f_old, old, Abi.V5_18, "c") == (2, 1)
    assert w.data.ioctl(f_new, REG, new.user_reg("a u32 x", bit=5), new.task) == 0
    w.enable("a")
    page = mapping.map_read(0, STATUS_PAGE_SIZE)
    assert page[1] == 0x01 and bit_set(page, 32766) and not bit_set(page, 32767)
    assert new.word() & 1 << 5
    w.enable("c")
    assert mapping.map_read(2, 1) == b"\x01" and cur.word() == 1
    # Mainline rules stay mainline: same name, other fields is EADDRINUSE...
    assert errno_of(lambda: w.data.ioctl(
        f_cur, REG, cur.user_reg("b u64 y", bit=1), cur.task)) == errno.EADDRINUSE
    # ...and old rules stay old, per file slot: the era of a file's first
    # registration of an event decides its writes there.
    assert [abi for _, abi in f_old.slots] == [Abi.V5_18, Abi.V5_18]
    assert [abi for _, abi in f_cur.slots] == [Abi.MAINLINE]
    w.enable("c", False)
    payload = (1).to_bytes(4, "little")
    assert write(w, f_old, old, 1, payload) == 8  # 5.18: disabled is a no-op
    assert errno_of(lambda: write(w, f_cur, cur, 0, payload)) == errno.EBADF
    assert w.page is not None
    assert w.page.statistics().byte_slots == 2 and w.page.statistics().bit_slots == 2


def test_legacy_auto_claim_of_existing_event_fails_cleanly_when_full() -> None:
    w = World("auto")
    c = w.client()
    f = w.open()
    w.data.ioctl(f, REG, c.user_reg("m", bit=0), c.task)
    fill_page(w, Abi.V5_18)
    m = w.event("m")
    refcnt = m.refcnt
    assert errno_of(lambda: w.reg(f, c, Abi.V5_18, "m")) == errno.EMFILE
    assert m.refcnt == refcnt and m.status_index is None


# -- differential: tests/oracle/clients/legacy_status_page.c on Linux 6.1.192 ----------

def read_golden() -> dict[str, str]:
    """The probe's key=value lines, unescaped (``\\n``, ``\\t``, ``\\\\``)."""
    golden = {}
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        golden[key] = value.encode("latin-1").decode("unicode_escape")
    return golden


class Replay:
    """legacy_status_page.c's steps against a ``--abi 6.1`` engine, same keys."""

    def __init__(self) -> None:
        self.w = World("6.1")
        self.out: dict[str, str] = {}
        self.c = self.w.client(100)

    def put(self, key: str, value: object) -> None:
        self.out[key] = str(value)

    def rc(self, call) -> str:  # type: ignore[no-untyped-def]
        try:
            call()
        except TracefsError as exc:
            return errno.errorcode[exc.errno]
        return "0"

    def reg(self, key: str, f: UserEventsFile, command: str, c: LegacyClient | None = None,
            **kw: int) -> tuple[int, int]:
        c = c or self.c
        try:
            slot, index = self.w.reg(f, c, Abi.V6_1, command, **kw)
        except TracefsError as exc:
            self.put(key, errno.errorcode[exc.errno])
            return 0, 0
        self.put(key, f"0 bit={slot} index={index}")
        return slot, index

    def text(self, key: str) -> None:
        status = user_events_status_node(self.w.registry, self.w.page).open(0, self.c.task)
        self.put(key, status.read(0, 1 << 20).decode("latin-1"))

    def page(self, key: str) -> None:
        page = self.w.page_bytes()
        self.put(key, " ".join(f"{i}:{b:02x}" for i, b in enumerate(page) if b) or "zero")

    def bit(self, key: str, slot: int) -> None:
        self.put(key, int(bit_set(self.w.page_bytes(), slot)))

    def write(self, key: str, f: UserEventsFile, index: int, payload: bytes) -> None:
        try:
            self.put(key, write(self.w, f, self.c, index, payload))
        except TracefsError as exc:
            self.put(key, errno.errorcode[exc.errno])

    def delete(self, key: str, f: UserEventsFile, name: str) -> None:
        self.put(key, self.rc(lambda: self.w.delete(f, self.c, name)))

    def run(self) -> dict[str, str]:
        w = self.w
        node = user_events_status_node(w.registry, w.page)
        self.put("mode.user_events_status", f"{node.mode & 0o7777:04o}")
        self.text("status.empty")
        self.registration_checks()
        self.example_flow()
        self.two_processes()
        self.text("status.final")
        return self.out

    def registration_checks(self) -> None:
        f = self.w.open()
        for key, kw in (("reg.size0", dict(size=0)), ("reg.size19", dict(size=19)),
                        ("reg.size20", dict(size=20)),
                        ("reg.size24_zero_tail", dict(size=24, extra=bytes(4))),
                        ("reg.size24_nonzero_tail", dict(size=24, extra=b"\1\0\0\0")),
                        ("reg.size4096", dict(size=4096)), ("reg.size4097", dict(size=4097))):
            self.reg(key, f, "__legacy_size u32 a", **kw)  # type: ignore[arg-type]
        self.reg("reg.name_null", f, "", name_args=0)
        self.reg("reg.bad_field", f, "__legacy_bad u33 a")
        self.reg("reg.after_bad_field", f, "__legacy_after")
        big = "__legacy" + "x" * 503
        long_file = self.w.open()
        self.reg("reg.name511", long_file, big)
        long_file.release()
        self.delete("reg.name511_deleted", f, big)
        self.reg("reg.name512", f, big + "x")
        self.put("ioctl.unreg", self.rc(lambda: self.w.data.ioctl(f, UNREG, Client.REG,
                                                                  self.c.task)))
        f.release()
        self.w.delete(self.w.open(), self.c, "__legacy_size")

    def example_flow(self) -> None:
        w = self.w
        f = w.open()
        a, a_index = self.reg("flow.reg_a", f, "__legacy_a u32 count")
        self.reg("flow.reg_a_again", f, "__legacy_a u32 count")
        self.reg("flow.reg_a_other_fields", f, "__legacy_a u64 other; char[8] s")
        self.reg("flow.reg_a_bad_fields", f, "__legacy_a u33 nonsense")
        self.reg("flow.reg_a_flags", f, "__legacy_a:BPF_ITER u32 count")
        b, _ = self.reg("flow.reg_b_flags", f, "__legacy_b:FOO,BAR char[8] s")
        f2 = w.open()
        self.reg("flow.reg_b_second_file", f2, "__legacy_b")
        self.text("flow.status_registered")
        self.page("flow.page_registered")
        count = (7).to_bytes(4, "little")
        self.write("flow.write_short_disabled", f, a_index, count[:2])
        self.write("flow.write_unknown_index", f, 9, count)
        self.write("flow.write_negative_index", f, -1, count)
        self.put("flow.write_no_index", self.rc(lambda: w.data.write(f, b"ab", 0, self.c.task)))
        w.enable("__legacy_a")
        self.bit("flow.bit_a_enabled", a)
        self.page("flow.page_a_enabled")
        self.text("flow.status_a_enabled")
        self.write("flow.write_enabled", f, a_index, count)
        self.write("flow.write_enabled_long", f, a_index, b"0123456789")
        self.write("flow.write_short_enabled", f, a_index, count[:2])
        event_b = w.event("__legacy_b")
        event_b.attach(Probe.PERF)  # perf_event_open() of the tracepoint
        self.bit("flow.bit_b_perf", b)
        w.enable("__legacy_b")
        self.text("flow.status_both")
        event_b.detach(Probe.PERF)
        self.bit("flow.bit_b_after_perf_close", b)
        w.enable("__legacy_b", False)
        self.delete("flow.del_enabled", f, "__legacy_a")
        w.enable("__legacy_a", False)
        self.bit("flow.bit_a_disabled", a)
        self.page("flow.page_disabled")
        self.delete("flow.del_referenced", f, "__legacy_a")
        self.delete("flow.del_missing", f, "__legacy_nothere")
        self.delete("flow.del_with_fields", f, "__legacy_a u32 count")
        f.release()
        self.delete("flow.del_b_other_file_open", f2, "__legacy_b")
        self.delete("flow.del_a_closed", f2, "__legacy_a")
        self.delete("flow.del_a_again", f2, "__legacy_a")
        self.reg("flow.reg_c_reuses_bit", f2, "__legacy_c")
        f2.release()
        self.text("flow.status_end")
        self.page("flow.page_end")
        for name in ("__legacy_b", "__legacy_c", "__legacy_after"):
            w.delete(w.open(), self.c, name)

    def two_processes(self) -> None:
        w = self.w
        child = w.client(200)
        f = w.open()
        bit, _ = self.reg("fork.child_bit", f, "__legacy_child u32 a", c=child)
        self.put("fork.child_bit", bit)
        f.release()  # the child exits
        w.enable("__legacy_child")
        self.bit("fork.parent_sees_bit", bit)
        w.enable("__legacy_child", False)
        self.bit("fork.parent_sees_clear", bit)
        self.delete("fork.del_after_child_exit", w.open(), "__legacy_child")


def test_legacy_6_1_replays_linux_6_1_192() -> None:
    golden = read_golden()
    replayed = Replay().run()
    assert {k: golden[k] for k in replayed} == replayed


def test_legacy_6_1_dynamic_events_replay_linux_6_1_192() -> None:
    golden = read_golden()
    replay = Replay()
    w = replay.w
    task = replay.c.task
    for key, command in (("dyn.create", "u:__legacy_dyn u32 x; u64 y\n"),
                         ("dyn.create_flags", "u:__legacy_dyn2:FLAG u32 x\n")):
        replay.put(key, replay.rc(lambda: w.dynamic_events.write(command.encode(), task)))  # noqa: B023
    replay.put("dyn.listing", w.dynamic_events.render())
    replay.text("dyn.status")
    f = w.open()
    replay.reg("dyn.reg_existing", f, "__legacy_dyn")
    f.release()
    for key, command in (("dyn.delete_by_name", "-:__legacy_dyn\n"),
                         ("dyn.delete_with_fields", "-:__legacy_dyn2 u32 x\n")):
        replay.put(key, replay.rc(lambda: w.dynamic_events.write(command.encode(), task)))  # noqa: B023
    assert {k: golden[k] for k in replay.out} == replay.out
