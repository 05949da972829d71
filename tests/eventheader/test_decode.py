"""EventHeader events built byte by byte from the spec, and what they decode to."""

from __future__ import annotations

import math
import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.eventheader import (Encoding, EventHeaderDecoder, EventHeaderError, Format,
                                      TracepointName, parse_tracepoint_name)
from tracefs_fuse.eventheader._spec import USABLE_FORMATS

from .build import (EXT_ACTIVITY_ID, EXT_METADATA, FLAGS_LE64, FLAGS_LE64_NO_EXT, event,
                    extension, field, header, metadata)

# event_field_encoding
STRUCT, V8, V16, V32, V64, V128 = 1, 2, 3, 4, 5, 6
Z8, Z16, Z32, S8, S16, S32, B8 = 7, 8, 9, 10, 11, 12, 13
CARRAY, VARRAY = 0x20, 0x40
# event_field_format
UNSIGNED, SIGNED, HEX, ERRNO, PID, TIME, BOOL, FLOAT, HEXBYTES = 1, 2, 3, 4, 5, 6, 7, 8, 9
STRING8, UTF, UTF_BOM, XML, JSON, UUID, PORT, IP, IP_OBSOLETE = 10, 11, 12, 13, 14, 15, 16, 17, 18

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
    ("value32 ip_address", field("f", V32, IP), b"\x7f\x00\x00\x01", "127.0.0.1"),
    ("value32 ip_address_obsolete (was ipv6)", field("f", V32, IP_OBSOLETE), b"\x0a\0\0\x01",
     "10.0.0.1"),
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
    ("value128 ip_address_obsolete (was ipv6)", field("f", V128, IP_OBSOLETE),
     bytes(15) + b"\x01", "::1"),
    ("value128 ip_address", field("f", V128, IP), bytes(10) + b"\xff\xff\x7f\0\0\x01",
     "::ffff:127.0.0.1"),  # inet_ntop's notation, as their decoders write it
    ("value128 ip: IPv4-compatible", field("f", V128, IP), bytes(12) + b"\x01\x02\x03\x04",
     "::1.2.3.4"),
    ("value128 ip: zero run in the middle", field("f", V128, IP),
     b"\x20\x01\x0d\xb8" + bytes(10) + b"\x00\x07", "2001:db8::7"),
    ("value128 ip: all zero", field("f", V128, IP), bytes(16), "::"),
    ("value128 unusable format", field("f", V128, SIGNED), b"\x01" * 16, "01" * 16),
    ("zstring8 default is UTF-8", field("f", Z8), "héllo".encode() + b"\0", "héllo"),
    ("zstring8 empty", field("f", Z8), b"\0", ""),
    ("zstring8 string8 is Latin-1", field("f", Z8, STRING8), b"h\xe9\0", "hé"),
    ("zstring8 bad UTF-8 bytes are Latin-1", field("f", Z8), b"a\xffb\xc3\0", "aÿbÃ"),
    ("counted string8 bad UTF-8 amid good", field("f", S8), b"\x05\x00\xc3\xa9\xe9\xc3\xa9",
     "ééé"),
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
    # v1.4: binary_length16_char8 is string_length16_char8 with hex_bytes by default.
    ("binary default is hex", field("f", B8), b"\x03\x00\x00\xffa", "00ff61"),
    ("binary empty", field("f", B8), b"\x00\x00", ""),
    ("binary as text", field("f", B8, UTF), b"\x02\x00hi", "hi"),
    ("binary string8", field("f", B8, STRING8), b"\x01\x00\xe9", "é"),
    ("binary utf_bom", field("f", B8, UTF_BOM), b"\x05\x00\xef\xbb\xbfok", "ok"),
    ("binary unknown format: hex", field("f", B8, 99), b"\x01\x00\x07", "07"),
    # v1.4: counted char8 values with a fixed-size format: a value of the
    # format's size is shown in it, an empty one is null, others as default.
    ("counted string8 unsigned 4 bytes", field("f", S8, UNSIGNED), b"\x04\x00\x05\0\0\0", 5),
    ("counted string8 unsigned empty is null", field("f", S8, UNSIGNED), b"\x00\x00", None),
    ("counted string8 unsigned 3 bytes: text", field("f", S8, UNSIGNED), b"\x03\x00abc", "abc"),
    ("binary unsigned 3 bytes: hex", field("f", B8, UNSIGNED), b"\x03\x00abc", "616263"),
    ("binary unsigned 1 byte", field("f", B8, UNSIGNED), b"\x01\x00\xff", 255),
    ("binary unsigned 2 bytes", field("f", B8, UNSIGNED), b"\x02\x00\x34\x12", 0x1234),
    ("binary unsigned 8 bytes", field("f", B8, UNSIGNED), b"\x08\x00" + b"\xff" * 8, 2**64 - 1),
    ("binary signed 1 byte", field("f", B8, SIGNED), b"\x01\x00\xff", -1),
    ("binary signed 2 bytes", field("f", B8, SIGNED), b"\x02\x00\xfe\xff", -2),
    ("binary signed 4 bytes", field("f", B8, SIGNED), b"\x04\x00" + struct.pack("<i", -5), -5),
    ("binary signed 8 bytes", field("f", B8, SIGNED), b"\x08\x00" + struct.pack("<q", -6), -6),
    ("binary signed empty", field("f", B8, SIGNED), b"\x00\x00", None),
    ("binary hex_int", field("f", B8, HEX), b"\x02\x00\xff\x00", 255),
    ("binary hex_int empty", field("f", B8, HEX), b"\x00\x00", None),
    ("binary errno", field("f", B8, ERRNO), b"\x04\x00" + struct.pack("<i", -22), -22),
    ("binary errno 2 bytes: hex", field("f", B8, ERRNO), b"\x02\x00\x01\x02", "0102"),
    ("binary pid", field("f", B8, PID), b"\x04\x00" + struct.pack("<i", 42), 42),
    ("binary time 4 bytes", field("f", B8, TIME), b"\x04\x00" + struct.pack("<i", 17), 17),
    ("binary time 8 bytes", field("f", B8, TIME), b"\x08\x00" + struct.pack("<q", -1), -1),
    ("binary boolean 1 byte", field("f", B8, BOOL), b"\x01\x00\x01", True),
    ("binary boolean 2 bytes", field("f", B8, BOOL), b"\x02\x00\x00\x00", False),
    ("binary boolean 4 bytes other", field("f", B8, BOOL), b"\x04\x00\xff\xff\xff\xff", -1),
    ("binary boolean empty", field("f", B8, BOOL), b"\x00\x00", None),
    ("binary boolean 8 bytes: hex", field("f", B8, BOOL), b"\x08\x00" + bytes(8), "00" * 8),
    ("binary float 4 bytes", field("f", B8, FLOAT), b"\x04\x00" + struct.pack("<f", 0.5), 0.5),
    ("binary float 8 bytes", field("f", B8, FLOAT), b"\x08\x00" + struct.pack("<d", -2.0),
     -2.0),
    ("binary float empty", field("f", B8, FLOAT), b"\x00\x00", None),
    ("binary uuid", field("f", B8, UUID), b"\x10\x00" + bytes(range(16)),
     "00010203-0405-0607-0809-0a0b0c0d0e0f"),
    ("binary uuid empty", field("f", B8, UUID), b"\x00\x00", None),
    ("binary port", field("f", B8, PORT), b"\x02\x00\x1f\x90", 8080),
    ("binary port empty", field("f", B8, PORT), b"\x00\x00", None),
    ("binary ip_address 4 bytes", field("f", B8, IP), b"\x04\x00\xc0\xa8\x00\x01",
     "192.168.0.1"),
    ("binary ip_address 16 bytes", field("f", B8, IP), b"\x10\x00" + bytes(15) + b"\x01", "::1"),
    ("binary ip_address_obsolete", field("f", B8, IP_OBSOLETE), b"\x04\x00\x01\x02\x03\x04",
     "1.2.3.4"),
    ("binary ip_address empty", field("f", B8, IP), b"\x00\x00", None),
    ("binary ip_address 5 bytes: hex", field("f", B8, IP), b"\x05\x00" + bytes(5), "00" * 5),
    ("counted string8 signed 2 bytes", field("f", S8, SIGNED), b"\x02\x00\xff\xff", -1),
    ("counted string8 float empty is null", field("f", S8, FLOAT), b"\x00\x00", None),
    ("counted string8 text formats keep the empty string", field("f", S8, UTF), b"\x00\x00", ""),
    ("counted string8 hex_bytes", field("f", S8, HEXBYTES), b"\x01\x00\x09", "09"),
    ("counted string8 json", field("f", S8, JSON), b"\x02\x00{}", "{}"),
    ("counted string8 xml", field("f", S8, XML), b"\x04\x00<a/>", "<a/>"),
    ("counted string8 uuid of 3 bytes: text", field("f", S8, UUID), b"\x03\x00abc", "abc"),
    # Every format the spec lists for an encoding, the rest of them.
    ("value8 unsigned", field("f", V8, UNSIGNED), b"\x80", 128),
    ("value16 unsigned", field("f", V16, UNSIGNED), b"\xff\xff", 65535),
    ("value16 hex", field("f", V16, HEX), b"\xff\x7f", 0x7FFF),
    ("value16 hex_bytes", field("f", V16, HEXBYTES), b"\x01\x02", "0102"),
    ("value32 unsigned", field("f", V32, UNSIGNED), b"\xff\xff\xff\xff", 2**32 - 1),
    ("value32 hex", field("f", V32, HEX), b"\x01\x00\x00\x80", 0x80000001),
    ("value32 hex_bytes", field("f", V32, HEXBYTES), b"\x01\x02\x03\x04", "01020304"),
    ("value64 unsigned", field("f", V64, UNSIGNED), struct.pack("<Q", 2**63), 2**63),
    ("value64 hex", field("f", V64, HEX), struct.pack("<Q", 0xABC), 0xABC),
    ("value128 hex_bytes", field("f", V128, HEXBYTES), b"\xaa" * 16, "aa" * 16),
    ("zstring16 utf", field("f", Z16, UTF), "ok".encode("utf-16-le") + b"\0\0", "ok"),
    ("zstring16 hex_bytes", field("f", Z16, HEXBYTES), b"\x01\x02\0\0", "0102"),
    ("zstring16 json", field("f", Z16, JSON), "{}".encode("utf-16-le") + b"\0\0", "{}"),
    ("zstring32 utf", field("f", Z32, UTF), "ok".encode("utf-32-le") + bytes(4), "ok"),
    ("zstring32 hex_bytes", field("f", Z32, HEXBYTES), b"\x01\0\0\0" + bytes(4), "01000000"),
    ("zstring32 utf_bom", field("f", Z32, UTF_BOM),
     b"\xff\xfe\0\0" + "x".encode("utf-32-le") + bytes(4), "x"),
    ("zstring32 xml", field("f", Z32, XML), "<a/>".encode("utf-32-le") + bytes(4), "<a/>"),
    ("counted string16 utf", field("f", S16, UTF), b"\x01\x00" + "é".encode("utf-16-le"), "é"),
    ("counted string16 hex_bytes", field("f", S16, HEXBYTES), b"\x01\x00\x01\x02", "0102"),
    ("counted string16 utf_bom", field("f", S16, UTF_BOM),
     b"\x02\x00\xfe\xff" + "x".encode("utf-16-be"), "x"),
    ("counted string16 xml", field("f", S16, XML), b"\x01\x00" + "x".encode("utf-16-le"), "x"),
    ("counted string16 json", field("f", S16, JSON), b"\x01\x00" + "1".encode("utf-16-le"), "1"),
    ("counted string32 utf", field("f", S32, UTF), b"\x01\x00" + "é".encode("utf-32-le"), "é"),
    ("counted string32 hex_bytes", field("f", S32, HEXBYTES), b"\x01\x00\x01\0\0\0",
     "01000000"),
    ("counted string32 utf_bom", field("f", S32, UTF_BOM),
     b"\x02\x00\0\0\xfe\xff" + "x".encode("utf-32-be"), "x"),
    ("counted string32 xml", field("f", S32, XML), b"\x01\x00" + "x".encode("utf-32-le"), "x"),
    ("counted string32 json", field("f", S32, JSON), b"\x01\x00" + "1".encode("utf-32-le"), "1"),
    ("counted string8 boolean", field("f", S8, BOOL), b"\x01\x00\x01", True),
    ("counted string8 errno", field("f", S8, ERRNO), b"\x04\x00" + struct.pack("<i", 5), 5),
    ("counted string8 hex_int", field("f", S8, HEX), b"\x01\x00\x10", 16),
    ("counted string8 ip_address", field("f", S8, IP), b"\x04\x00\x7f\0\0\x01", "127.0.0.1"),
    ("counted string8 ip_address_obsolete", field("f", S8, IP_OBSOLETE),
     b"\x10\x00" + bytes(15) + b"\x02", "::2"),
    ("counted string8 pid", field("f", S8, PID), b"\x04\x00" + struct.pack("<i", 7), 7),
    ("counted string8 port", field("f", S8, PORT), b"\x02\x00\x00\x50", 80),
    ("counted string8 utf_bom", field("f", S8, UTF_BOM), b"\x04\x00\xef\xbb\xbfz", "z"),
    ("counted string8 time", field("f", S8, TIME), b"\x08\x00" + struct.pack("<q", 9), 9),
    ("binary hex_bytes", field("f", B8, HEXBYTES), b"\x01\x00\x0a", "0a"),
    ("binary json", field("f", B8, JSON), b"\x02\x00[]", "[]"),
    ("binary xml", field("f", B8, XML), b"\x04\x00<a/>", "<a/>"),
    # Booleans other than 0 and 1 as their decoders show them: an int32.
    ("value16 boolean other", field("f", V16, BOOL), b"\xff\xff", 65535),
    ("value32 boolean other is signed", field("f", V32, BOOL), b"\x00\x00\x00\x80", -2**31),
    ("value32 boolean other, small", field("f", V32, BOOL), b"\x02\x00\x00\x00", 2),
    # Floats JSON cannot hold, as their decoders write them.
    ("value32 float NaN", field("f", V32, FLOAT), struct.pack("<f", math.nan), "nan"),
    ("value32 float -NaN", field("f", V32, FLOAT), struct.pack("<f", -math.nan), "-nan"),
    ("value32 float +Inf", field("f", V32, FLOAT), struct.pack("<f", math.inf), "inf"),
    ("value32 float -Inf", field("f", V32, FLOAT), struct.pack("<f", -math.inf), "-inf"),
    ("value64 float NaN", field("f", V64, FLOAT), struct.pack("<d", math.nan), "nan"),
    ("value64 float +Inf", field("f", V64, FLOAT), struct.pack("<d", math.inf), "inf"),
    ("value64 float -Inf", field("f", V64, FLOAT), struct.pack("<d", -math.inf), "-inf"),
    ("value64 float -0.0", field("f", V64, FLOAT), struct.pack("<d", -0.0), -0.0),
]


@pytest.mark.parametrize(("definition", "payload", "value"),
                         [case[1:] for case in SCALARS], ids=[case[0] for case in SCALARS])
def test_eventheader_field_values(definition: bytes, payload: bytes, value: object) -> None:
    got = one_field(definition, payload)
    assert got == value and type(got) is type(value)


def _encoding_and_format(definition: bytes) -> tuple[int, int]:
    """A field definition's encoding (flags removed) and format (0 if absent)."""
    at = definition.index(0) + 1
    encoding = definition[at]
    fmt = definition[at + 1] & 0x7F if encoding & 0x80 else 0
    return encoding & 0x1F, fmt


def test_eventheader_every_encoding_and_format_has_a_case() -> None:
    covered = {_encoding_and_format(case[1]) for case in SCALARS}
    assert {e for e, _ in covered} >= {e.value for e in Encoding} - {Encoding.INVALID,
                                                                       Encoding.STRUCT}
    assert {f for _, f in covered} >= {f.value for f in Format}
    # Each fixed-size encoding with each format the spec lists for it.
    for encoding, (_, usable) in USABLE_FORMATS.items():
        missing = {f.value for f in usable} - {f for e, f in covered if e == encoding}
        assert not missing, (encoding, missing)


#: LinuxTracepoints' own v1.4 test set (EventHeaderDynamic's TestDynamic):
#: every format on string_length16_char8 and binary_length16_char8, each with
#: the value 1 written in 0, 1, 2, 4, 8 and 16 little-endian bytes. Per format,
#: what each size shows; DEFAULT: the encoding's default (text for string,
#: hex for binary).
ONES = {0: b"", 1: b"\x01", 2: b"\x01\0", 4: b"\x01" + bytes(3), 8: b"\x01" + bytes(7),
        16: bytes(15) + b"\x01"}
DEFAULT = object()
ONES_SHOWN: dict[int, dict[int, object]] = {
    0: {},
    UNSIGNED: {0: None, 1: 1, 2: 1, 4: 1, 8: 1},
    SIGNED: {0: None, 1: 1, 2: 1, 4: 1, 8: 1},
    HEX: {0: None, 1: 1, 2: 1, 4: 1, 8: 1},
    ERRNO: {0: None, 4: 1},
    PID: {0: None, 4: 1},
    TIME: {0: None, 4: 1, 8: 1},
    BOOL: {0: None, 1: True, 2: True, 4: True},
    FLOAT: {0: None, 4: 1.401298464324817e-45, 8: 5e-324},
    HEXBYTES: {n: ONES[n].hex() for n in ONES},
    STRING8: {n: ONES[n].decode("latin-1") for n in ONES},
    UTF: {n: ONES[n].decode() for n in ONES},
    UTF_BOM: {n: ONES[n].decode() for n in ONES},
    XML: {n: ONES[n].decode() for n in ONES},
    JSON: {n: ONES[n].decode() for n in ONES},
    UUID: {0: None, 16: "00000000-0000-0000-0000-000000000001"},
    PORT: {0: None, 2: 256},
    IP: {0: None, 4: "1.0.0.0", 16: "::1"},
    IP_OBSOLETE: {0: None, 4: "1.0.0.0", 16: "::1"},
}


@pytest.mark.parametrize("encoding", [S8, B8], ids=["string", "binary"])
@pytest.mark.parametrize("fmt", sorted(ONES_SHOWN))
def test_eventheader_linuxtracepoints_v14_set(encoding: int, fmt: int) -> None:
    for size, raw in ONES.items():
        shown = ONES_SHOWN[fmt].get(size, DEFAULT)
        if shown is DEFAULT:
            shown = raw.hex() if encoding == B8 else raw.decode()
        got = one_field(field("f", encoding, fmt), struct.pack("<H", size) + raw)
        assert got == shown and type(got) is type(shown), (size, got)


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
    ("invalid encoding 0", event("E", [field("a", 0)], b"\x01"), {}, "invalid encoding"),
    ("empty constant-length array", event("E", [field("a", V8 | CARRAY, length=0)], b""), {},
     "empty constant-length array"),
    ("both array flags", event("E", [field("a", V8 | CARRAY | VARRAY, length=1)], b"\x01"),
     {}, "both a constant and a variable array"),
    ("struct without fields", event("E", [field("p", STRUCT, 0)], b""), {}, "has no fields"),
    ("unknown encoding", event("E", [field("a", 14)], b"\x01"), {}, "unknown encoding 14"),
    ("unknown encoding after fields", event("E", [field("a", V8), field("b", 31), field("c", V8)],
                                            b"\x01\x02\x03"), {"a": 1}, "unknown encoding 31"),
    ("unknown encoding in a struct", event("E", [field("p", STRUCT, 2), field("x", V8),
                                                 field("y", 20), field("z", V8)], b"\x07\x08"),
     {"p": {"x": 7}}, "'y' has unknown encoding 20"),
    ("structs nested 9 deep", event("E", [field(f"s{i}", STRUCT, 1) for i in range(9)]
                                    + [field("v", V8)], b"\x01"),
     {"s0": {"s1": {"s2": {"s3": {"s4": {"s5": {"s6": {"s7": {}}}}}}}}},
     "struct 's8' nests deeper than 8 levels"),
    ("field name without NUL", header() + extension(EXT_METADATA, b"E\0abc"), {}, "has no NUL"),
    ("event name without NUL", header() + extension(EXT_METADATA, b"E"), {}, "has no NUL"),
    ("format byte missing", header() + extension(EXT_METADATA, b"E\0a\0\x82"), {},
     "ends early"),
    ("extension header cut", header() + b"\x01\x00", {}, "extension header at 8"),
    ("extension data cut", header() + extension(EXT_METADATA, b"E\0")[:-1], {},
     "runs past the event"),
    ("activity id of 8 bytes", header() + extension(EXT_ACTIVITY_ID, bytes(8)), {},
     "activity id extension of 8 bytes"),
    ("unknown header flags", header(flags=FLAGS_LE64_NO_EXT | 0x10) + b"\x01", {},
     "unknown header flags 0x10"),
    ("extension of the invalid kind 0", header() + extension(0, b"\x01", chain=True)
     + extension(EXT_METADATA, metadata("E", field("a", V8))) + b"\x05", {"a": 5},
     "an extension of the invalid kind 0 (1 bytes)"),
    ("a second metadata extension", header() + extension(EXT_METADATA, metadata(
        "E", field("a", V8)), chain=True) + extension(EXT_METADATA, metadata("F")) + b"\x05",
     {"a": 5}, "a second metadata extension (the first is used)"),
    ("a second activity id", header() + extension(EXT_ACTIVITY_ID, ACTIVITY, chain=True)
     + extension(EXT_ACTIVITY_ID, PARENT, chain=True)
     + extension(EXT_METADATA, metadata("E", field("a", V8))) + b"\x05", {"a": 5},
     "a second activity id extension (the first is used)"),
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


def test_eventheader_a_broken_definition_keeps_the_event_name() -> None:
    info, fields, error = decode(event("Named", [field("a", V8), field("b", 14)], b"\x01\x02"))
    assert (info.event, fields, info.payload) == ("Named", {"a": 1}, None)
    assert error == "metadata: field 'b' has unknown encoding 14"


# (what, field definitions, payload, fields, missing fields by struct)
SHORT_STRUCTS = [
    ("declares 3, holds 1", [field("p", STRUCT, 3), field("x", V8)], b"\x01",
     {"p": {"x": 1}}, {"p": 2}),
    ("declares 2 at the end, holds none", [field("a", V8), field("p", STRUCT, 2)], b"\x05",
     {"a": 5, "p": {}}, {"p": 2}),
    ("nested, both short", [field("o", STRUCT, 2), field("i", STRUCT, 5), field("v", V8)], b"\x09",
     {"o": {"i": {"v": 9}}}, {"o": 1, "o.i": 4}),
    ("an array of empty structs", [field("s", STRUCT | VARRAY, 1)], b"\x03\x00",
     {"s": [{}, {}, {}]}, {"s": 1}),
    ("the large count idiom: all the rest", [field("a", V8), field("rest", STRUCT, 127),
                                             field("b", V8), field("c", Z8)], b"\x01\x02c\0",
     {"a": 1, "rest": {"b": 2, "c": "c"}}, {"rest": 125}),
]


@pytest.mark.parametrize(("definitions", "payload", "fields", "missing"),
                         [case[1:] for case in SHORT_STRUCTS],
                         ids=[case[0] for case in SHORT_STRUCTS])
def test_eventheader_a_struct_with_fewer_fields_than_declared(
        definitions: list[bytes], payload: bytes, fields: dict, missing: dict) -> None:
    # Legal, as LinuxTracepoints' decoders read it: the struct holds the
    # fields up to the metadata's end. The shortfall is marked, no error.
    info, got, error = decode(event("E", definitions, payload))
    assert (error, info.event, got, info.missing_fields) == (None, "E", fields, missing)


def test_eventheader_arrays_of_empty_structs_are_bounded() -> None:
    data = event("E", [field("s", STRUCT | CARRAY, 1, length=0xFFFF),
                       field("t", STRUCT | CARRAY, 1, length=0xFFFF)], b"")
    info, fields, error = decode(data)
    assert error is not None and "more than 131072 structs in one event" in error
    assert info.event == "E" and info.missing_fields == {"s.t": 1}


def test_eventheader_deeply_nested_definitions_are_refused_not_recursed() -> None:
    block = metadata("E", *[field("", STRUCT, 1)] * 20000)  # 60 kB of nested structs
    info, fields, error = decode(header() + extension(EXT_METADATA, block))
    assert error is not None and "nests deeper than 8 levels" in error


def test_eventheader_field_tags() -> None:
    info, fields, error = decode(event("E", [
        field("a", V8, tag=0x1234), field("p", STRUCT, 2, tag=7), field("x", V8, SIGNED, tag=0xFFFF),
        field("q", V8), field("a", V8, tag=2), field("s", STRUCT | VARRAY, 1), field("y", V8, tag=3),
    ], b"\x01\xff\x02\x03\x01\x00\x04"))
    assert error is None
    assert fields == {"a": 1, "p": {"x": -1, "q": 2}, "a;2": 3, "s": [{"y": 4}]}
    assert info.field_tags == {"a": 0x1234, "p": 7, "p.x": 0xFFFF, "a;2": 2, "s.y": 3}


def test_eventheader_no_field_tags_no_missing_fields() -> None:
    info, _, _ = decode(event("E", [field("a", V8, SIGNED)], b"\x01"))
    assert (info.field_tags, info.missing_fields) == ({}, {})
    assert "field_tags" not in msgspec.json.encode(info).decode()


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
