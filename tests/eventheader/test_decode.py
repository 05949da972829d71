"""EventHeader events built byte by byte from the spec, and what they decode to."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.eventheader import (EventHeaderDecoder, EventHeaderError, TracepointName,
                                      parse_tracepoint_name)

from .build import (EXT_ACTIVITY_ID, EXT_METADATA, FLAGS_LE64, FLAGS_LE64_NO_EXT, event,
                    extension, field, header, metadata)

# event_field_encoding
STRUCT, V8, V16, V32, V64, V128 = 1, 2, 3, 4, 5, 6
Z8, Z16, Z32, S8, S16, S32 = 7, 8, 9, 10, 11, 12
CARRAY, VARRAY = 0x20, 0x40
# event_field_format
UNSIGNED, SIGNED, HEX, ERRNO, PID, TIME, BOOL, FLOAT, HEXBYTES = 1, 2, 3, 4, 5, 6, 7, 8, 9
STRING8, UTF, UTF_BOM, XML, JSON, UUID, PORT, IPV4, IPV6 = 10, 11, 12, 13, 14, 15, 16, 17, 18

TRACEPOINT = TracepointName(provider="Prov", level=4, keyword=1)
ACTIVITY = bytes(range(16))
PARENT = bytes(range(16, 32))


def decode(data: bytes, tracepoint: TracepointName = TRACEPOINT):  # type: ignore[no-untyped-def]
    return EventHeaderDecoder().decode(tracepoint, data)


def one_field(definition: bytes, payload: bytes) -> object:
    info, fields, error = decode(event("E", [definition], payload))
    assert error is None, error
    (value,) = fields.values()
    return value


# (what, field definition, payload, value)
SCALARS = [
    ("value8 default is unsigned", field("f", V8), b"\xff", 255),
    ("value8 signed", field("f", V8, SIGNED), b"\xff", -1),
    ("value8 hex is an int", field("f", V8, HEX), b"\xff", 255),
    ("value8 boolean true", field("f", V8, BOOL), b"\x01", True),
    ("value8 boolean false", field("f", V8, BOOL), b"\x00", False),
    ("value8 boolean other", field("f", V8, BOOL), b"\x02", 2),
    ("value8 string8", field("f", V8, STRING8), b"\xe9", "é"),
    ("value8 hex_bytes", field("f", V8, HEXBYTES), b"\xab", "ab"),
    ("value8 unusable format: default", field("f", V8, UUID), b"\x07", 7),
    ("value8 unknown format: default", field("f", V8, 99), b"\x07", 7),
    ("value8 with a tag", field("f", V8, SIGNED, tag=0x1234), b"\xfe", -2),
    ("value8 with a tag, no format", field("f", V8, tag=5), b"\x05", 5),
    ("value16 default", field("f", V16), b"\x34\x12", 0x1234),
    ("value16 signed", field("f", V16, SIGNED), b"\xff\xff", -1),
    ("value16 port: network order", field("f", V16, PORT), b"\x1f\x90", 8080),
    ("value16 string_utf: a UTF-16 unit", field("f", V16, UTF), b"\xe9\x00", "é"),
    ("value16 lone surrogate", field("f", V16, UTF), b"\x00\xd8", "\ufffd"),
    ("value32 default", field("f", V32), b"\xef\xbe\xad\xde", 0xDEADBEEF),
    ("value32 signed", field("f", V32, SIGNED), b"\xfe\xff\xff\xff", -2),
    ("value32 errno is signed", field("f", V32, ERRNO), b"\xfe\xff\xff\xff", -2),
    ("value32 pid", field("f", V32, PID), struct.pack("<i", 1234), 1234),
    ("value32 time", field("f", V32, TIME), struct.pack("<i", 1700000000), 1700000000),
    ("value32 boolean", field("f", V32, BOOL), b"\x01\x00\x00\x00", True),
    ("value32 float", field("f", V32, FLOAT), struct.pack("<f", 1.5), 1.5),
    ("value32 ipv4", field("f", V32, IPV4), b"\x7f\x00\x00\x01", "127.0.0.1"),
    ("value32 string_utf: a code point", field("f", V32, UTF), struct.pack("<I", 0x1F600),
     "\U0001F600"),
    ("value32 code point too large", field("f", V32, UTF), struct.pack("<I", 0x110000),
     "\ufffd"),
    ("value32 port is not usable there", field("f", V32, PORT), b"\x01\x00\x00\x00", 1),
    ("value64 default", field("f", V64), b"\xff" * 8, 2**64 - 1),
    ("value64 signed", field("f", V64, SIGNED), b"\xff" * 8, -1),
    ("value64 float", field("f", V64, FLOAT), struct.pack("<d", 2.5), 2.5),
    ("value64 time", field("f", V64, TIME), struct.pack("<q", -5), -5),
    ("value64 hex_bytes", field("f", V64, HEXBYTES), bytes(range(8)), "0001020304050607"),
    ("value128 default is hex", field("f", V128), bytes(range(16)),
     "000102030405060708090a0b0c0d0e0f"),
    ("value128 uuid", field("f", V128, UUID), bytes(range(16)),
     "00010203-0405-0607-0809-0a0b0c0d0e0f"),
    ("value128 ipv6", field("f", V128, IPV6), bytes(15) + b"\x01", "::1"),
    ("value128 unusable format", field("f", V128, SIGNED), b"\x01" * 16, "01" * 16),
    ("zstring8 default is UTF-8", field("f", Z8), "héllo".encode() + b"\0", "héllo"),
    ("zstring8 empty", field("f", Z8), b"\0", ""),
    ("zstring8 string8 is Latin-1", field("f", Z8, STRING8), b"h\xe9\0", "hé"),
    ("zstring8 bad UTF-8", field("f", Z8), b"a\xffb\0", "a\\xffb"),
    ("zstring8 hex_bytes", field("f", Z8, HEXBYTES), b"\x01\x02\0", "0102"),
    ("zstring8 utf_bom strips the BOM", field("f", Z8, UTF_BOM), b"\xef\xbb\xbfok\0", "ok"),
    ("zstring8 plain utf keeps a BOM", field("f", Z8, UTF), b"\xef\xbb\xbfok\0", "\ufeffok"),
    ("zstring8 json stays text", field("f", Z8, JSON), b'{"a": 1}\0', '{"a": 1}'),
    ("zstring8 xml", field("f", Z8, XML), b"<a/>\0", "<a/>"),
    ("zstring16", field("f", Z16), "hé".encode("utf-16-le") + b"\0\0", "hé"),
    ("zstring16 NUL byte inside a unit", field("f", Z16), b"\x00\x01\0\0", "\u0100"),
    ("zstring16 big-endian BOM", field("f", Z16, UTF_BOM),
     b"\xfe\xff" + "hi".encode("utf-16-be") + b"\0\0", "hi"),
    ("zstring16 little-endian BOM", field("f", Z16, XML),
     b"\xff\xfe" + "hi".encode("utf-16-le") + b"\0\0", "hi"),
    ("zstring16 string8 not usable: utf", field("f", Z16, STRING8),
     "a".encode("utf-16-le") + b"\0\0", "a"),
    ("zstring32", field("f", Z32), "\U0001F600".encode("utf-32-le") + bytes(4), "\U0001F600"),
    ("zstring32 big-endian BOM", field("f", Z32, JSON),
     b"\x00\x00\xfe\xff" + "x".encode("utf-32-be") + bytes(4), "x"),
    ("counted string8", field("f", S8), b"\x05\x00hello", "hello"),
    ("counted string8 with NULs kept", field("f", S8), b"\x03\x00a\0b", "a\0b"),
    ("counted binary", field("f", S8, HEXBYTES), b"\x02\x00\x00\xff", "00ff"),
    ("counted string8 latin-1", field("f", S8, STRING8), b"\x01\x00\xe9", "é"),
    ("counted string16 counts units", field("f", S16), b"\x02\x00" + "hé".encode("utf-16-le"),
     "hé"),
    ("counted string32", field("f", S32), b"\x01\x00" + "Z".encode("utf-32-le"), "Z"),
]


@pytest.mark.parametrize(("definition", "payload", "value"),
                         [case[1:] for case in SCALARS], ids=[case[0] for case in SCALARS])
def test_eventheader_field_values(definition: bytes, payload: bytes, value: object) -> None:
    got = one_field(definition, payload)
    assert got == value and type(got) is type(value)


# (what, field definitions, payload, fields)
COMPOSITES = [
    ("constant-length array", [field("a", V16 | CARRAY, length=3)],
     struct.pack("<3H", 1, 2, 3), {"a": [1, 2, 3]}),
    ("constant-length array with a format", [field("a", V8 | CARRAY, SIGNED, length=2)],
     b"\xff\x01", {"a": [-1, 1]}),
    ("variable-length array", [field("a", V32 | VARRAY)],
     struct.pack("<H2I", 2, 7, 8), {"a": [7, 8]}),
    ("empty variable-length array", [field("a", V32 | VARRAY), field("b", V8)],
     b"\x00\x00\x09", {"a": [], "b": 9}),
    ("array of strings", [field("a", Z8 | VARRAY)], b"\x02\x00a\0bc\0", {"a": ["a", "bc"]}),
    ("array of counted strings", [field("a", S8 | CARRAY, length=2)],
     b"\x01\x00x\x00\x00", {"a": ["x", ""]}),
    ("struct", [field("p", STRUCT, 2), field("x", V32, SIGNED), field("y", V32, SIGNED),
                field("after", V8)],
     struct.pack("<iiB", -3, 7, 1), {"p": {"x": -3, "y": 7}, "after": 1}),
    ("nested structs", [field("outer", STRUCT, 2), field("inner", STRUCT, 1), field("v", V8),
                        field("w", V8)],
     b"\x01\x02", {"outer": {"inner": {"v": 1}, "w": 2}}),
    ("constant array of structs", [field("s", STRUCT | CARRAY, 2, length=2), field("a", V8),
                                   field("b", Z8)],
     b"\x01x\0\x02yz\0", {"s": [{"a": 1, "b": "x"}, {"a": 2, "b": "yz"}]}),
    ("variable array of structs", [field("s", STRUCT | VARRAY, 1), field("a", V16)],
     b"\x02\x00\x05\x00\x06\x00", {"s": [{"a": 5}, {"a": 6}]}),
    ("array of structs holding arrays", [field("s", STRUCT | VARRAY, 1), field("v", V8 | VARRAY)],
     b"\x02\x00\x01\x00\x07\x00\x00", {"s": [{"v": [7]}, {"v": []}]}),
    ("a name used twice", [field("a", V8), field("a", V8), field("a", V8)], b"\x01\x02\x03",
     {"a": 1, "a;2": 2, "a;3": 3}),
    ("field name attributes are not part of the name", [field("n;unit=ms", V8)], b"\x05",
     {"n": 5}),
    ("trailing bytes are ignored", [field("a", V8)], b"\x01\xee\xee\xee", {"a": 1}),
    ("no fields", [], b"", {}),
]


@pytest.mark.parametrize(("definitions", "payload", "fields"),
                         [case[1:] for case in COMPOSITES], ids=[case[0] for case in COMPOSITES])
def test_eventheader_composite_fields(definitions: list[bytes], payload: bytes,
                                      fields: dict) -> None:
    info, got, error = decode(event("E", definitions, payload))
    assert error is None, error
    assert got == fields


def test_eventheader_header_and_activity_ids() -> None:
    data = (header(version=3, id=0x1234, tag=0xBEEF, opcode=1, level=4)
            + extension(EXT_ACTIVITY_ID, ACTIVITY + PARENT, chain=True)
            + extension(EXT_METADATA, metadata("Start;owner=me;note=a;;b", field("n", V8)))
            + b"\x09")
    info, fields, error = decode(data, TracepointName(provider="P", level=4, keyword=0x2a,
                                                      options={"G": "grp"}))
    assert error is None
    assert fields == {"n": 9}
    assert (info.provider, info.event, info.level, info.keyword, info.group) == (
        "P", "Start", 4, 0x2A, "grp")
    assert (info.flags, info.version, info.id, info.tag, info.opcode) == (
        FLAGS_LE64, 3, 0x1234, 0xBEEF, 1)
    assert info.attributes == {"owner": "me", "note": "a;b"}
    assert info.activity_id == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert info.related_activity_id == "10111213-1415-1617-1819-1a1b1c1d1e1f"
    assert info.payload is None


def test_eventheader_activity_id_alone_has_no_parent() -> None:
    info, _, error = decode(event("E", [], b"", activity=ACTIVITY))
    assert error is None
    assert info.activity_id is not None and info.related_activity_id is None


def test_eventheader_big_endian_event() -> None:
    data = (header(flags=0x04, id=0x0102, tag=0x0304, big=True)
            + extension(EXT_METADATA, metadata("E", field("a", V32), field("b", V16 | VARRAY),
                                               field("c", V16 | CARRAY, tag=1, length=1,
                                                     big=True)), big=True)
            + b"\x00\x00\x01\x02" + b"\x00\x02\x00\x05\x00\x06" + b"\x00\x07")
    info, fields, error = decode(data)
    assert error is None
    assert (info.id, info.tag) == (0x0102, 0x0304)
    assert fields == {"a": 258, "b": [5, 6], "c": [7]}


def test_eventheader_without_metadata_keeps_the_payload() -> None:
    info, fields, error = decode(header(flags=FLAGS_LE64_NO_EXT, id=7, version=1) + b"\x01\x02")
    assert error is None and fields == {}
    assert (info.event, info.id, info.version, info.payload) == (None, 7, 1, "0102")
    info, _, _ = decode(header() + extension(EXT_ACTIVITY_ID, ACTIVITY) + b"\xaa")
    assert info.payload == "aa" and info.activity_id is not None


def test_eventheader_unknown_extensions_are_kept() -> None:
    data = (header() + extension(0x7FFF, b"\x01\x02", chain=True)
            + extension(EXT_METADATA, metadata("E", field("a", V8))) + b"\x05")
    info, fields, error = decode(data)
    assert error is None and fields == {"a": 5}
    assert info.extensions == {0x7FFF: "0102"}


# (what, event bytes, fields decoded anyway, the problem, in part)
BROKEN = [
    ("payload ends inside a field", event("E", [field("a", V8), field("b", V32)], b"\x01\x02"),
     {"a": 1}, "b: 4 bytes at"),
    ("string without its NUL", event("E", [field("s", Z8)], b"abc"), {}, "no terminating NUL"),
    ("array count past the end", event("E", [field("a", V8 | VARRAY)], b"\x05\x00\x01"),
     {"a": [1]}, "a: 1 bytes at"),
    ("struct cut short", event("E", [field("p", STRUCT, 2), field("x", V8), field("y", V8)],
                               b"\x01"), {"p": {"x": 1}}, "y:"),
    ("unknown encoding", event("E", [field("a", 13)], b"\x01"), {}, "unknown encoding 13"),
    ("invalid encoding 0", event("E", [field("a", 0)], b"\x01"), {}, "invalid encoding"),
    ("empty constant-length array", event("E", [field("a", V8 | CARRAY, length=0)], b""), {},
     "empty constant-length array"),
    ("both array flags", event("E", [field("a", V8 | CARRAY | VARRAY, length=1)], b"\x01"),
     {}, "both a constant and a variable array"),
    ("struct without fields", event("E", [field("p", STRUCT, 0)], b""), {}, "has no fields"),
    ("struct missing its fields", event("E", [field("p", STRUCT, 2), field("x", V8)], b"\x01"),
     {}, "where a name should be"),
    ("field name without NUL", header() + extension(EXT_METADATA, b"E\0abc"), {}, "has no NUL"),
    ("event name without NUL", header() + extension(EXT_METADATA, b"E"), {}, "has no NUL"),
    ("format byte missing", header() + extension(EXT_METADATA, b"E\0a\0\x82"), {},
     "ends early"),
    ("extension header cut", header() + b"\x01\x00", {}, "extension header at 8"),
    ("extension data cut", header() + extension(EXT_METADATA, b"E\0")[:-1], {},
     "runs past the event"),
    ("activity id of 8 bytes", header() + extension(EXT_ACTIVITY_ID, bytes(8)), {},
     "activity id extension of 8 bytes"),
    ("header level differs from the name's", event("E", [], b"", level=5), {},
     "header level 5 differs from the tracepoint's L4"),
]


@pytest.mark.parametrize(("data", "fields", "problem"), [case[1:] for case in BROKEN],
                         ids=[case[0] for case in BROKEN])
def test_eventheader_broken_events_report_and_keep_what_they_can(
        data: bytes, fields: dict, problem: str) -> None:
    info, got, error = decode(data)
    assert got == fields
    assert error is not None and problem in error


def test_eventheader_shorter_than_a_header_is_an_error() -> None:
    with pytest.raises(EventHeaderError):
        decode(b"\x07" * 7)


@given(st.binary(min_size=8, max_size=300))
def test_eventheader_any_bytes_decode_without_raising(data: bytes) -> None:
    info, fields, error = decode(data)
    assert isinstance(fields, dict)


@given(st.binary(max_size=120), st.binary(max_size=120))
def test_eventheader_any_metadata_decodes_without_raising(block: bytes, payload: bytes) -> None:
    decode(header() + extension(EXT_METADATA, block) + payload)


# -- tracepoint names ---------------------------------------------------------------------

@pytest.mark.parametrize(("name", "multi", "expected"), [
    ("MyProvider_L4K1", False, ("MyProvider", 4, 1, {})),
    ("My_Company_Thing_L5Kff", False, ("My_Company_Thing", 5, 0xFF, {})),
    ("P_L1K0Gmygroup", False, ("P", 1, 0, {"G": "mygroup"})),
    ("P_L1K0Ggrp1Xabc", False, ("P", 1, 0, {"G": "grp1", "X": "abc"})),
    ("P_L1K0G", False, ("P", 1, 0, {"G": ""})),
    ("P_L4K1_L5K2", False, ("P_L4K1", 5, 2, {})),
    ("P_Lff" + "K" + "f" * 16, False, ("P", 255, 2**64 - 1, {})),
    ("P_L4K1.1f", True, ("P", 4, 1, {})),
    ("P_L4K1.1f", False, None),
    ("P_LAK1", False, None),
    ("P_L4K", False, None),
    ("P_L4K1g", False, None),
    ("hello", False, None),
    ("P_L100K1", False, None),
    ("P_L1K" + "1" * 17, False, None),
    ("_L4K1", False, None),
    ("P Q_L4K1", False, None),
    ("A:B_L4K1", False, None),
    ("P" * 250 + "_L4K1", False, ("P" * 250, 4, 1, {})),
    ("P" * 251 + "_L4K1", False, None),
])
def test_eventheader_tracepoint_names(name: str, multi: bool, expected: tuple | None) -> None:
    parsed = parse_tracepoint_name(name, multi_format=multi)
    if expected is None:
        assert parsed is None
    else:
        assert parsed is not None
        assert (parsed.provider, parsed.level, parsed.keyword, parsed.options) == expected
