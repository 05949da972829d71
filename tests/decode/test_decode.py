"""Records decoded from their formats: format files, fields, pages, JSON Lines."""

from __future__ import annotations

import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.decode import (Event, EventFormat, FieldFormat, FormatError, Lost, PageError,
                                 RecordDecoder, encode_lines, parse_format, read_lines,
                                 render_record)
from tracefs_fuse.engine import ManualClock, TraceClocks
from tracefs_fuse.engine._ringbuf import RingBuffer
from tracefs_fuse.engine._user_command import parse_fields, print_fmt
from tracefs_fuse.engine._field import render_format

from ..eventheader.build import event as eventheader_event, field as eventheader_field

#: This machine's events/ftrace/print/format (Linux 6.18): a flexible char[].
KERNEL_PRINT_FORMAT = """name: print
ID: 5
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;

print fmt: "%ps: %s", (void *)REC->ip, REC->buf
"""
#: And the start of sched_switch's: arrays the kernel prints with their length.
KERNEL_SCHED_SWITCH_FIELDS = """name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:28;\tsize:8;\tsigned:1;

print fmt: "prev_comm=%s"
"""


def user_format(command_fields: str, name: str = "ev", event_id: int = 1000) -> EventFormat:
    """The format our engine prints for a user event, parsed back."""
    fields = parse_fields(command_fields)
    return parse_format(render_format(name, event_id, fields, print_fmt(fields)), "user_events")


def record(event_id: int, payload: bytes, pid: int = 42) -> bytes:
    return struct.pack("<HBBi", event_id, 0, 0, pid) + payload


# -- format files ---------------------------------------------------------------------

def test_parse_format_of_a_user_event() -> None:
    fmt = user_format("u32 a; char[16] msg; __data_loc char[] s; __rel_loc u8[] r; "
                      "struct foo blob 12; unsigned int b")
    assert (fmt.system, fmt.name, fmt.id) == ("user_events", "ev", 1000)
    assert [(f.type, f.name, f.offset, f.size, f.signed) for f in fmt.fields] == [
        ("u32", "a", 8, 4, False),
        ("char[]", "msg", 12, 16, True),  # f_show prints "char msg[]"
        ("__data_loc char[]", "s", 28, 4, True),
        ("__rel_loc u8[]", "r", 32, 4, True),
        ("struct foo", "blob", 36, 12, True),
        ("unsigned int", "b", 48, 4, False),
    ]
    assert fmt.print_fmt.startswith('"a=%u msg=%s')


def test_parse_format_of_the_kernels_own_events() -> None:
    fmt = parse_format(KERNEL_PRINT_FORMAT, "ftrace")
    assert fmt.fields == (FieldFormat(type="unsigned long", name="ip", offset=8, size=8,
                                      signed=False),
                          FieldFormat(type="char[]", name="buf", offset=16, size=0, signed=False))
    fmt = parse_format(KERNEL_SCHED_SWITCH_FIELDS, "sched")
    assert fmt.fields[0].type == "char[16]" and fmt.fields[0].name == "prev_comm"


def test_parse_format_without_fields() -> None:
    fields = parse_fields(None)
    fmt = parse_format(render_format("bare", 7, fields, print_fmt(fields)), "user_events")
    assert (fmt.name, fmt.id, fmt.fields) == ("bare", 7, ())


@pytest.mark.parametrize("text", [
    "", "ID: 5\n", "name: x\n", "name: x\nID: five\n",
    "name: x\nID: 5\nformat:\n\tfield:u32;\toffset:8;\tsize:4;\tsigned:0;\n",
    "name: x\nID: 5\nformat:\n\tfield:u32 a;\toffset:x;\tsize:4;\tsigned:0;\n",
])
def test_parse_format_refuses_what_is_no_format(text: str) -> None:
    with pytest.raises(FormatError):
        parse_format(text, "s")


# -- fields ---------------------------------------------------------------------------

def decode_one(fmt: EventFormat, payload: bytes) -> Event:
    decoder = RecordDecoder({fmt.id: fmt}.get)
    return decoder.decode_record(0, 123, record(fmt.id, payload))


# (what, declared fields, payload after the common fields, decoded fields)
FIELDS = [
    ("unsigned and signed scalars", "u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h",
     struct.pack("<BbHhIiQq", 255, -1, 65535, -2, 2**32 - 1, -3, 2**64 - 1, -4),
     {"a": 255, "b": -1, "c": 65535, "d": -2, "e": 2**32 - 1, "f": -3, "g": 2**64 - 1,
      "h": -4}),
    ("C spellings", "int a; unsigned int b; short c; unsigned short d; char e; unsigned char f",
     struct.pack("<iIhHbB", -1, 1, -2, 2, -3, 3),
     {"a": -1, "b": 1, "c": -2, "d": 2, "e": -3, "f": 3}),
    ("unaligned fields", "u8 a; u64 b", struct.pack("<BQ", 1, 2**40), {"a": 1, "b": 2**40}),
    ("char array: text to the first NUL", "char[8] s", b"hi\0junk\0", {"s": "hi"}),
    ("char array filled to the end", "char[4] s", b"abcd", {"s": "abcd"}),
    ("char array with bad UTF-8", "char[4] s", b"a\xff\0\0", {"s": "a\\xff"}),
    ("char array of UTF-8", "char[8] s", "héllo".encode() + b"\0\0", {"s": "héllo"}),
    ("unsigned char array: numbers", "unsigned char[3] b", b"\x01\x02\xff", {"b": [1, 2, 255]}),
    ("__data_loc string", "u32 a; __data_loc char[] s",
     struct.pack("<II", 7, (6 << 16) | 16) + b"hello\0", {"a": 7, "s": "hello"}),
    ("__rel_loc string", "__rel_loc char[] s; u32 a",
     struct.pack("<II", (3 << 16) | 4, 9) + b"ok\0", {"s": "ok", "a": 9}),
    ("__rel_loc empty string", "__rel_loc char[] s", struct.pack("<I", (1 << 16) | 0) + b"\0",
     {"s": ""}),
    ("__data_loc u32 array", "__data_loc u32[] v",
     struct.pack("<I", (8 << 16) | 12) + struct.pack("<2I", 5, 6), {"v": [5, 6]}),
    ("__data_loc unknown element type: hex", "__data_loc struct_x[] v",
     struct.pack("<I", (2 << 16) | 12) + b"\xab\xcd", {"v": "abcd"}),
    ("struct: hex", "struct point p 8", bytes(range(8)), {"p": "0001020304050607"}),
    ("a name used twice", "u8 a; char[2] a; u8 a", b"\x01x\0\x02",
     {"a": 1, "a;2": "x", "a;3": 2}),
]


@pytest.mark.parametrize(("declared", "payload", "fields"), [case[1:] for case in FIELDS],
                         ids=[case[0] for case in FIELDS])
def test_fields_decode_to_json_values(declared: str, payload: bytes, fields: dict) -> None:
    event = decode_one(user_format(declared), payload)
    assert event.error is None
    assert event.fields == fields
    assert list(event.fields) == list(fields)  # format order


def test_fields_of_the_kernels_print_event() -> None:
    fmt = parse_format(KERNEL_PRINT_FORMAT, "ftrace")
    payload = struct.pack("<Q", 0xFFFFFFFF81000000) + b"hello\n\0\0\0"
    event = decode_one(fmt, payload)
    assert event.fields == {"ip": 0xFFFFFFFF81000000, "buf": "hello\n"}
    assert (event.system, event.name, event.pid) == ("ftrace", "print", 42)


@pytest.mark.parametrize(("declared", "payload", "fields", "problem"), [
    ("u32 a; u32 b", b"\x01\0\0\0", {"a": None, "b": None}, "shorter than its fields"),
    ("__data_loc char[] s", struct.pack("<I", (50 << 16) | 12) + b"x\0",
     {"s": None}, "s: 50 bytes at 12 past the record"),
    ("__rel_loc char[] s", struct.pack("<I", (2 << 16) | 40), {"s": None}, "s: 2 bytes at 52"),
    ("char[8] s", b"abc", {"s": None}, "s: 8 bytes at 8 past the record"),
    ("struct x p 8", b"", {"p": None}, "p: 8 bytes at 8"),
])
def test_fields_past_the_record_are_none_and_reported(declared: str, payload: bytes,
                                                      fields: dict, problem: str) -> None:
    event = decode_one(user_format(declared), payload)
    assert event.fields == fields
    assert event.error is not None and problem in event.error


def test_record_of_an_unknown_event_says_so() -> None:
    event = RecordDecoder(lambda i: None).decode_record(1, 5, record(77, b"\x01"))
    assert (event.id, event.pid, event.fields) == (77, 42, {})
    assert event.error == f"no usable format for event id 77: {record(77, bytes([1])).hex()}"


def test_a_format_that_changes_under_an_id_is_compiled_again() -> None:
    formats = {1000: user_format("u32 a")}
    decoder = RecordDecoder(formats.get)
    assert decoder.decode_record(0, 0, record(1000, b"\x01\0\0\0")).fields == {"a": 1}
    formats[1000] = user_format("u16 b; u16 c", name="other")
    event = decoder.decode_record(0, 0, record(1000, b"\x01\0\x02\0"))
    assert (event.name, event.fields) == ("other", {"b": 1, "c": 2})


def test_comm_and_tgid_come_from_the_lookups() -> None:
    fmt = user_format("u8 a")
    decoder = RecordDecoder({fmt.id: fmt}.get, comm={42: "prog"}.get, tgid={42: 40}.get)
    event = decoder.decode_record(0, 0, record(fmt.id, b"\x01"))
    assert (event.comm, event.tgid) == ("prog", 40)


@given(st.binary(max_size=200))
def test_any_record_decodes_without_raising(payload: bytes) -> None:
    fmt = user_format("u32 a; char[8] s; __data_loc char[] d; __rel_loc u16[] r; "
                      "struct x y 6; s64 z")
    decode_one(fmt, payload)


# -- EventHeader tracepoints ----------------------------------------------------------

EVENTHEADER_FIELDS = "u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode;u8 level"


def test_eventheader_tracepoints_are_decoded_as_such() -> None:
    fmt = user_format(EVENTHEADER_FIELDS, name="Prov_L4K1Gteam")
    payload = eventheader_event("Hello", [eventheader_field("n", 4)], b"\x05\0\0\0")
    event = decode_one(fmt, payload)
    assert event.error is None
    assert event.fields == {"n": 5}
    assert event.eventheader is not None
    assert (event.eventheader.provider, event.eventheader.event, event.eventheader.group) == (
        "Prov", "Hello", "team")


@pytest.mark.parametrize(("name", "declared"), [
    ("NotEventHeader", EVENTHEADER_FIELDS),
    ("Prov_L4K1", "u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode"),
    ("Prov_L4K1", EVENTHEADER_FIELDS + ";u8 extra"),
])
def test_other_events_are_not_taken_for_eventheader(name: str, declared: str) -> None:
    event = decode_one(user_format(declared, name=name), bytes(16))
    assert event.eventheader is None
    assert "eventheader_flags" in event.fields


def test_a_multi_format_eventheader_tracepoint() -> None:
    fields = parse_fields(EVENTHEADER_FIELDS)
    fmt = parse_format(render_format("Prov_L5K2.1f", 1001, fields, print_fmt(fields)),
                       "user_events_multi")
    event = decode_one(fmt, eventheader_event("E", [], b"", level=5))
    assert event.eventheader is not None and event.eventheader.provider == "Prov"
    assert event.error is None


def test_an_eventheader_record_too_short_for_its_header() -> None:
    fmt = user_format(EVENTHEADER_FIELDS, name="Prov_L4K1")
    event = RecordDecoder({fmt.id: fmt}.get).decode_record(0, 0, record(fmt.id, b"\x07\0\0"))
    assert event.eventheader is None
    assert event.error == "3 bytes cannot hold an eventheader"


# -- pages ----------------------------------------------------------------------------

def buffer_with(clock: ManualClock, nr_pages_kb: int = 8) -> RingBuffer:
    return RingBuffer(1, TraceClocks.from_source(clock)["local"], trace_buf_size=nr_pages_kb << 10)


def test_pages_round_trip_records_and_times() -> None:
    clock = ManualClock(1000)
    buffer = buffer_with(clock)
    fmt = user_format("u32 n; __rel_loc char[] s")
    payloads = []
    for n, gap in enumerate([0, 5, 1 << 27, 3, 1 << 40]):  # big gaps: time extends
        clock.advance(gap)
        text = b"x" * (n * 60) + b"\0"  # the long ones need array[0] lengths
        payloads.append((clock.now, n, text.rstrip(b"\0").decode()))
        assert buffer.write(0, record(fmt.id, struct.pack("<II", n, len(text) << 16) + text))
    decoder = RecordDecoder({fmt.id: fmt}.get)
    events = decoder.decode_page(0, buffer.read_page_nowait(0, 4096))
    assert [(e.timestamp, e.fields["n"], e.fields["s"]) for e in events] == payloads
    assert all(isinstance(e, Event) and e.cpu == 0 and e.error is None for e in events)


def test_pages_report_what_the_ring_lost() -> None:
    clock = ManualClock(1)
    buffer = buffer_with(clock)  # 8 KiB: a few pages, overwritten in turn
    fmt = user_format("u32 n; char[100] pad")
    written = 600
    for n in range(written):
        clock.advance(1)
        buffer.write(0, record(fmt.id, struct.pack("<I", n) + bytes(100)))
    decoder = RecordDecoder({fmt.id: fmt}.get)
    records = []
    while not buffer.empty(0):
        records += decoder.decode_page(0, buffer.read_page_nowait(0, 4096))
    lost = [r for r in records if isinstance(r, Lost)]
    events = [r for r in records if isinstance(r, Event)]
    assert len(lost) == 1 and lost[0].count is not None
    assert lost[0].count + len(events) == written
    assert [e.fields["n"] for e in events] == list(range(lost[0].count, written))


@pytest.mark.parametrize(("page", "problem"), [
    (b"\0" * 15, "has no header"),
    (struct.pack("<QQ", 0, 100) + bytes(20), "runs past a 36-byte page"),
    (struct.pack("<QQ", 0, 4) + struct.pack("<I", 4), "runs past commit"),  # type_len 4
    (struct.pack("<QQ", 0, 6) + struct.pack("<IH", 0, 0), "long event at 16 runs past"),
    (struct.pack("<QQ", 0, 8) + struct.pack("<II", 0, 2), "says 2 bytes"),
    (struct.pack("<QQ", 0, 6) + struct.pack("<IH", 30, 0), "time stamp at 16 runs past"),
    (struct.pack("<QQ", 0, 6) + struct.pack("<IH", 29 | 1 << 5, 0), "padding at 16"),
])
def test_broken_pages_raise(page: bytes, problem: str) -> None:
    with pytest.raises(PageError, match=problem):
        RecordDecoder(lambda i: None).decode_page(0, page)


def test_absolute_time_stamps_keep_the_top_bits() -> None:
    # A TIME_STAMP carries 59 bits; the reader takes the top 5 from the time so far.
    base = (3 << 59) + 100
    absolute = 500
    page = struct.pack("<QQ", base, 16) + struct.pack("<II", 31 | (absolute & ((1 << 27) - 1))
                                                      << 5, absolute >> 27)
    fmt = user_format("u32 n")
    page += struct.pack("<I", 3 | (7 << 5)) + record(fmt.id, b"\x01\0\0\0")
    page = page[:8] + struct.pack("<Q", len(page) - 16) + page[16:]
    (event,) = RecordDecoder({fmt.id: fmt}.get).decode_page(0, page)
    assert isinstance(event, Event)
    assert event.timestamp == (3 << 59) + absolute + 7


# -- JSON Lines and text ---------------------------------------------------------------

def test_records_round_trip_through_json_lines() -> None:
    fmt = user_format("u32 a; char[8] s; __rel_loc u16[] v")
    eh = user_format(EVENTHEADER_FIELDS, name="P_L4K1", event_id=1001)
    decoder = RecordDecoder({fmt.id: fmt, eh.id: eh}.get, comm={42: "c"}.get)
    records = [
        decoder.decode_record(0, 1, record(fmt.id, struct.pack("<I8sI", 1, b"ab", 4 << 16)
                                           + struct.pack("<2H", 3, 4))),
        Lost(cpu=1, timestamp=2, count=None),
        Lost(cpu=1, timestamp=3, count=12),
        decoder.decode_record(1, 4, record(eh.id, eventheader_event(
            "E", [eventheader_field("p", 1, 1), eventheader_field("x", 4 | 0x40)],
            b"\x02\0\x01\0\0\0\x02\0\0\0", activity=bytes(16)))),
    ]
    data = encode_lines(records)
    assert data.count(b"\n") == 4
    assert list(read_lines(data + b"\n")) == records
    assert records[3].fields == {"p": {"x": [1, 2]}}


def _issue23_event() -> Event:
    """An EventHeader record with what issue 23 found lost: v1.4 binary and
    nullable fields, a tag, non-finite floats, a boolean of 2^31, a short struct."""
    eh = user_format(EVENTHEADER_FIELDS, name="P_L4K1", event_id=1001)
    payload = eventheader_event("E", [
        eventheader_field("bin", 13), eventheader_field("n", 10, 2),
        eventheader_field("none", 13, 1), eventheader_field("t", 2, 1, tag=0x2A),
        eventheader_field("f", 5 | 0x20, 8, length=3), eventheader_field("b", 4, 7),
        eventheader_field("s", 1, 3), eventheader_field("x", 2, tag=1)],
        b"\x02\x00\xab\xcd" + b"\x04\x00\x05\0\0\0" + b"\x00\x00" + b"\x07"
        + struct.pack("<3d", float("nan"), float("inf"), float("-inf"))
        + b"\x00\x00\x00\x80" + b"\x09")
    return RecordDecoder({eh.id: eh}.get, comm={42: "c"}.get).decode_record(
        0, 1_000_000_000, record(eh.id, payload))


def test_eventheader_values_in_json_lines() -> None:
    event = _issue23_event()
    assert event.error is None
    line = encode_lines([event]).decode()
    assert line == (
        '{"kind":"event","system":"user_events","name":"P_L4K1","id":1001,"cpu":0,'
        '"timestamp":1000000000,"pid":42,"comm":"c","fields":{"bin":"abcd","n":5,"none":null,'
        '"t":7,"f":["nan","inf","-inf"],"b":-2147483648,"s":{"x":9}},"eventheader":{'
        '"provider":"P","event":"E","level":4,"keyword":1,"flags":7,"version":0,"id":0,'
        '"tag":0,"opcode":0,"field_tags":{"t":42,"s.x":1},"missing_fields":{"s":2}}}\n')
    assert list(read_lines(line.encode())) == [event]


def test_eventheader_values_rendered_for_people() -> None:
    assert render_record(_issue23_event()) == (
        "            c-42 [000]     1.000000: P:E level=4 keyword=0x1 "
        'missing_fields={"s":2} bin="abcd" n=5 none=null t;tag=0x2A=7 '
        'f=["nan","inf","-inf"] b=-2147483648 s={"x;tag=0x1":9}')


def test_reading_json_lines_names_the_bad_line() -> None:
    with pytest.raises(msgspec.DecodeError, match="line 2"):
        list(read_lines(b'{"kind":"lost","cpu":0,"timestamp":1}\n{"kind":"what"}\n'))


def test_render_records_for_people() -> None:
    fmt = user_format("u32 count; char[8] who")
    event = RecordDecoder({fmt.id: fmt}.get, comm={42: "hello"}.get).decode_record(
        1, 1_500_000_000, record(fmt.id, struct.pack("<I8s", 3, b"world")))
    assert render_record(event) == (
        "        hello-42 [001]     1.500000: user_events:ev count=3 who=\"world\"")
    assert render_record(Lost(cpu=2, timestamp=3_000_000_000, count=None)) == (
        "# [002]     3.000000: lost some events")
