"""``events/*/*/inject``: parser, records, file rules; synthetic and user events.

The cases named ``inj-*``, ``uinj-*`` and ``unone-*`` of the "probes" capture
(6.12.117 with CONFIG_TRACE_EVENT_INJECT) are replayed: the write's result
and the record that landed in the ring buffer, byte for byte (common_type and
common_pid masked unless the write set them).
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._ftrace_events import TRACE_PRINT
from tracefs_fuse.engine._inject import (INJECT_MODE, FilterType, filter_assign_type, find_field,
                                         parse_entry)
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._tree import Dir, File

from .synth_oracle import ROOT, golden, new_tracefs, replay

PROBES = golden("probes")
INJECT_CASES = [case for case in PROBES if case.startswith(("inj", "uinj-", "unone-"))
                and "op" in PROBES[case]]
#: comm="x": the kernel stores a pointer over the record's header; we refuse.
COMM_CASE = "inj-29"


@pytest.fixture(scope="module")
def probes_replay() -> dict:
    return replay("probes")


@pytest.mark.parametrize("case", INJECT_CASES)
def test_oracle_case(probes_replay: dict, case: str) -> None:
    for part, (kernel, engine) in probes_replay[case].items():
        if case == COMM_CASE:
            kernel = {"result": "write EINVAL\n", "raw": []}.get(part, kernel)
        assert engine == kernel, f"{case} {part}: {PROBES[case]['op']!r}"


def test_comm_capture_shows_the_kernels_corruption() -> None:
    """Why we refuse comm=: the kernel's record starts with a kernel address."""
    assert PROBES[COMM_CASE]["result"] == "ok 8\n"
    assert "Unknown type" in PROBES[COMM_CASE]["file:trace"]


# -- units -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("type_", "kind"), [
    ("__data_loc char[]", FilterType.DYN_STRING), ("__data_loc u8[]", FilterType.OTHER),
    ("__rel_loc char[]", FilterType.RDYN_STRING), ("char[16]", FilterType.STATIC_STRING),
    ("unsigned char[4]", FilterType.STATIC_STRING), ("char *", FilterType.PTR_STRING),
    ("const char *", FilterType.PTR_STRING), ("u64", FilterType.OTHER),
    ("__data_loc long[]", FilterType.OTHER), ("struct foo", FilterType.OTHER),
])
def test_filter_assign_type(type_: str, kind: FilterType) -> None:
    assert filter_assign_type(type_) is kind


def _event(tfs: Tracefs, command: str):  # noqa: ANN202
    tfs.synth_events.run_command(command)
    return tfs.synth_events.find(command.split()[0])


def test_find_field_order() -> None:
    """The event's fields first (last defined wins), then generic, then common."""
    tfs = new_tracefs()
    tfs.dynamic_events.write(b"u:dup u32 x; u64 x; u32 common_pid", ROOT)
    event = tfs.events.find("user_events", "dup")
    assert find_field(event, "x").size == 8
    assert find_field(event, "common_pid").offset == 20  # the event's own
    assert find_field(event, "CPU").filter_type is FilterType.CPU
    assert find_field(event, "common_type").offset == 0
    assert find_field(event, "nosuch") is None


@pytest.mark.parametrize(("text", "code"), [
    ("a=18446744073709551615", None), ("a=18446744073709551616", errno.ERANGE),
    ("a=0x", errno.EINVAL), ("a=08", errno.EINVAL), ("a=010", None), ("a=-0", errno.EINVAL),
    ("i=-2147483648", None), ("i=-9223372036854775809", errno.ERANGE), ("i=-", errno.EINVAL),
    ("a=1\tb='x'", None), ("a =\t1", None), ("b=\"a'b\"", None), ("b='" + "x" * 255 + "'", None),
    ("b='" + "x" * 256 + "'", errno.EINVAL), ("b='x'a=1", None), ("b=", errno.EINVAL),
    ("\xe9=1", errno.ENOENT), ("a==1", errno.EINVAL), ("a=1 =2", errno.EINVAL),
    # Generic fields have size 0, so any number that parses is EINVAL; int
    # ones parse signed, char * ones (is_signed_type: no) unsigned.
    ("CPU=1", errno.EINVAL), ("common_cpu=-1", errno.EINVAL),
    ("CPU=9223372036854775808", errno.ERANGE), ("stacktrace=1", errno.EINVAL),
    ("stacktrace=9223372036854775808", errno.EINVAL),
    ("STACKTRACE=18446744073709551615", errno.EINVAL),
    ("stacktrace=18446744073709551616", errno.ERANGE), ("stacktrace=-1", errno.EINVAL),
    ("comm=1", errno.EINVAL),
])
def test_parse(text: str, code: int | None) -> None:
    tfs = new_tracefs()
    event = _event(tfs, "e u64 a; char[8] b; s32 i")
    if code is None:
        parse_entry(event, text, ROOT)
    else:
        with pytest.raises(TracefsError) as info:
            parse_entry(event, text, ROOT)
        assert info.value.errno == code


def test_record_layout() -> None:
    """Static strings are cut to the field; dynamic ones go after the extra NUL."""
    tfs = new_tracefs()
    event = _event(tfs, "e u16 a; char[4] s; char[] d")
    entry = parse_entry(event, "a=0x12345 s='abcdef' d='xy' d='z'", ROOT)
    # fields: a @8 (2), s @16 (4), d @272 (8): entry_size 280, +1, then "xy\0" "z\0".
    assert entry[8:10] == b"\x45\x23"
    assert entry[16:20] == b"abc\0"
    assert int.from_bytes(entry[272:276], "little") == (2 << 16) | 284
    assert len(entry) == 281 + 3 + 2 and entry[281:] == b"xy\0z\0"
    assert event.print_trace(entry) == "e: a=9029 s=abc d=z\n"


def test_rel_loc_is_relative_to_the_field_end() -> None:
    tfs = new_tracefs()
    tfs.dynamic_events.write(b"u:r u32 n; __rel_loc char[] s", ROOT)
    event = tfs.events.find("user_events", "r")
    empty = parse_entry(event, "", ROOT)
    assert int.from_bytes(empty[12:16], "little") == 16 - 16  # entry_size - (12 + 4), len 0
    entry = parse_entry(event, "s='ab'", ROOT)
    assert int.from_bytes(entry[12:16], "little") == (3 << 16) | (17 - 16)


class Injector:
    def __init__(self) -> None:
        self.tfs = new_tracefs()
        self.event = _event(self.tfs, "e u64 a")
        self.records: list[bytes] = []
        record = self.tfs.top.record
        self.tfs.top.record = lambda entry, task: (  # type: ignore[method-assign]
            self.records.append(bytes(entry)), record(entry, task))[1]

    def node(self) -> File:
        node = self.tfs.lookup("events/synthetic/e/inject")
        assert isinstance(node, File)
        return node


def test_file_rules() -> None:
    inj = Injector()
    node = inj.node()
    assert node.mode & 0o777 == INJECT_MODE
    handle = node.open(os.O_RDWR, ROOT)
    with pytest.raises(TracefsError) as info:
        handle.read(0, 10)
    assert info.value.errno == errno.EPERM
    with pytest.raises(TracefsError) as info:
        handle.write(b"a=" + b"1" * 4094, 0, ROOT)
    assert info.value.errno == errno.EINVAL
    assert handle.write(b"  a=1\n\0junk", 0, ROOT) == 11  # NUL ends it, strim'd
    assert inj.records[-1][8:16] == (1).to_bytes(8, "little")
    inj.tfs.top.set_tracing_on(False)
    assert handle.write(b"a=2", 0, ROOT) == 3  # accepted, nothing recorded
    inj.tfs.top.set_tracing_on(True)
    inj.tfs.top.cpumask = 0b10  # ROOT writes from CPU 0
    assert handle.write(b"a=2", 0, ROOT) == 3
    assert len(inj.records) == 1
    inj.tfs.synth_events.delete("e")
    with pytest.raises(TracefsError) as info:
        handle.write(b"a=3", 0, ROOT)
    assert info.value.errno == errno.ENODEV


#: event_callback(): inject where id is (call->event.type && call->class->reg).
EVENT_FILES = {
    "synthetic/e": ["enable", "filter", "trigger", "format", "id", "inject"],
    "ftrace/print": ["trigger", "format", "id", "inject"],  # FTRACE_ENTRY_REG
    "ftrace/raw_data": ["format"],  # no reg
}


@pytest.mark.parametrize(("path", "files"), EVENT_FILES.items())
def test_inject_is_where_id_is(path: str, files: list[str]) -> None:
    tfs = new_tracefs()
    _event(tfs, "e u64 a")
    node = tfs.lookup(f"events/{path}")
    assert isinstance(node, Dir)
    assert [n.name for n in node.entries()] == files


def test_ftrace_files_match_this_kernel_but_inject(real_tracefs_root: Path) -> None:
    """This 6.18 has no CONFIG_TRACE_EVENT_INJECT: the rest of the lists match."""
    for path in ("ftrace/print", "ftrace/raw_data"):
        kernel = os.listdir(real_tracefs_root / "events" / path)
        assert [name for name in EVENT_FILES[path] if name != "inject"] == kernel


def test_inject_into_ftrace_print() -> None:
    """parse_entry(): ``buf`` (char[], size 0) takes no bytes; the record is
    the header, ``ip`` and the extra NUL (entry_size + 1 = 17)."""
    tfs = new_tracefs()
    records: list[bytes] = []
    record = tfs.top.record
    tfs.top.record = lambda entry, task: (  # type: ignore[method-assign]
        records.append(bytes(entry)), record(entry, task))[1]
    handle = tfs.file("events/ftrace/print/inject").open(os.O_WRONLY, ROOT)
    assert handle.write(b"ip=0x1234 buf='hello'", 0, ROOT) == 21
    assert records == [struct.pack("<HBBiQ", TRACE_PRINT, 0, 0, ROOT.pid, 0x1234) + b"\0"]
    assert tfs.buffer.get_total_entries().entries == 1


@settings(max_examples=300)
@given(st.binary(max_size=120) | st.text(alphabet="abs=0x1-'\" \\", max_size=40)
       .map(lambda s: s.encode()))
def test_any_bytes_succeed_or_raise_tracefs_error(data: bytes) -> None:
    inj = Injector()
    handle = inj.node().open(os.O_WRONLY, ROOT)
    try:
        handle.write(data, 0, ROOT)
    except TracefsError:
        pass
