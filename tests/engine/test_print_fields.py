"""The generic fields printer and ``struct trace_seq``, case by case.

The replay of the oracle's output (test_output.py) covers what a real kernel
printed; these rows pin the rules behind it and the corners a user event
cannot reach through the kernel's validator.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.engine._field import TRACE_ENTRY, Field
from tracefs_fuse.engine._print_fields import (TRACE_SEQ_BUFFER_SIZE, FieldsPrinter, FilterType,
                                               TraceSeq, filter_assign_type, isprint,
                                               print_event_fields)
from tracefs_fuse.engine._user_command import parse_fields


def entry(payload: bytes) -> bytes:
    """A whole record as the buffer returns it: header, payload, padded to 4."""
    data = TRACE_ENTRY.pack(1000, 0, 0, 1) + payload
    return data + bytes(-len(data) % 4)


def printed(args: str | None, payload: bytes, name: str = "e") -> str:
    seq = TraceSeq()
    print_event_fields(seq, name, parse_fields(args), entry(payload))
    return seq.text()


def loc(offset: int, length: int) -> bytes:
    return struct.pack("<I", (length << 16) | offset)


@pytest.mark.parametrize(("args", "payload", "text"), [
    # 1 byte: 'c' when isprint, then the unsigned value.
    ("u8 a", b"A", " a='A'(65)"),
    ("s8 a", b"\xff", " a='\xff'(255)"),
    ("char a", b"\x7f", " a=(127)"),
    ("unsigned char a", b"\x9f", " a=(159)"),
    ("u8 a", b"\xa0", " a='\xa0'(160)"),
    ("u8 a", b"\0", " a=(0)"),
    # 2 bytes: unsigned both times (an unsigned short promoted to int).
    ("s16 a", b"\xfe\xff", " a=0xfffe (65534)"),
    ("u16 a", b"\x2c\x01", " a=0x12c (300)"),
    # 4 bytes: hex, then signed.
    ("u32 a", b"\x00\x5e\xd0\xb2", " a=0xb2d05e00 (-1294967296)"),
    ("int a", b"\x2a\0\0\0", " a=0x2a (42)"),
    # 8 bytes: hex (no kernel symbol), then signed.
    ("u64 a", b"\xff" * 8, " a=0xffffffffffffffff (-1)"),
    ("s64 a", b"\0" * 7 + b"\x80", " a=0x8000000000000000 (-9223372036854775808)"),
    # Static strings stop at the size or a NUL.
    ("char[4] s", b"abcd", " s=abcd"),
    ("char[4] s", b"a\0cd", " s=a"),
    ("unsigned char[2] s", b"\x01\xe9", " s=\x01\xe9"),
    # Dynamic strings: from the entry (data_loc) or after the word (rel_loc).
    ("__data_loc char[] s", loc(12, 3) + b"hi\0", " s=hi"),
    ("__rel_loc char[] s", loc(0, 3) + b"hi\0", " s=hi"),
    ("__data_loc char[] s", loc(12, 0), " s="),
    ("__data_loc char[] s", loc(13, 4) + b"abcd", " s=<OVERFLOW>"),
    ("__rel_loc char[] s", loc(1, 4) + b"abcd", " s=<OVERFLOW>"),
    # A negative length (bit 31 set) passes the bound check and prints nothing.
    ("__data_loc char[] s", struct.pack("<I", 0x8000000C), " s="),
    # Dynamic arrays: comma-separated hex bytes.
    ("__data_loc u8[] a", loc(12, 3) + b"\x01\xff\x00", " a=01,ff,00"),
    ("__rel_loc u32[] a", loc(0, 4) + b"\x10\0\0\0", " a=10,00,00,00"),
    ("__data_loc u8[] a", loc(12, 9) + b"\x01", " a=<OVERFLOW>"),
    ("__data_loc u8[] a", struct.pack("<I", 0xFFFF000C), " a="),
    # Types only the filter type decides.
    ("__data_loc unsigned char[] s", loc(12, 3) + b"ok\0", " s=ok"),
    ("__data_loc cpumask_t[] m", loc(12, 0), " m=<INVALID-TYPE>"),
    ("struct x[2] c 2", b"hi", " c=0x6968 (26984)"),
    ("struct char[2] c 2", b"hi", " c=hi"),
    ("struct s a 3; struct t b 16", bytes(19), " a=<INVALID-SIZE> b=<INVALID-SIZE>"),
    ("struct s a 1; struct t b 8", b"A" + bytes(8), " a='A'(65) b=0x0 (0)"),
])
def test_field_values(args: str, payload: bytes, text: str) -> None:
    assert printed(args, payload) == f"e:{text}\n"
    assert FieldsPrinter("e", parse_fields(args)).text(entry(payload)) == f"e:{text}\n"


def test_no_fields() -> None:
    assert printed(None, b"") == "e:No fields found\n"


def test_field_beyond_the_record_overflows_and_the_rest_still_prints() -> None:
    # Records of a deleted event whose id was reused: fields past ent_size.
    fields = (Field(type="u32", name="a", offset=8, size=4, is_signed=False),
              Field(type="u64", name="b", offset=12, size=8, is_signed=False),
              Field(type="u8", name="c", offset=10, size=1, is_signed=False))
    seq = TraceSeq()
    print_event_fields(seq, "e", fields, entry(b"\x01\0\x30\0"))
    assert seq.text() == "e: a=0x300001 (3145729) b=<OVERFLOW> c='0'(48)\n"


def test_pointer_strings_print_the_address() -> None:
    # "char *" never comes from user_events; the kernel cannot read it: (0x%px).
    fields = (Field(type="const char *", name="p", offset=8, size=8, is_signed=False),)
    seq = TraceSeq()
    print_event_fields(seq, "e", fields, entry(struct.pack("<Q", 0x7FFD1234)))
    assert seq.text() == "e: p=(0x000000007ffd1234)\n"


@pytest.mark.parametrize(("type_", "kind"), [
    ("u32", FilterType.OTHER),
    ("char", FilterType.OTHER),
    ("char[20]", FilterType.STATIC_STRING),
    ("unsigned char[4]", FilterType.STATIC_STRING),
    ("__data_loc char[]", FilterType.DYN_STRING),
    ("__data_loc unsigned char[]", FilterType.DYN_STRING),
    ("__data_loc u8[]", FilterType.OTHER),
    ("__data_loc cpumask_t[]", FilterType.CPUMASK),
    ("__rel_loc char[]", FilterType.RDYN_STRING),
    ("__rel_loc cpumask_t[]", FilterType.OTHER),
    ("struct char[2]", FilterType.STATIC_STRING),
    ("char *", FilterType.PTR_STRING),
    ("const char *", FilterType.PTR_STRING),
])
def test_filter_assign_type(type_: str, kind: FilterType) -> None:
    assert filter_assign_type(type_) is kind


def test_isprint_is_the_kernels_latin1_table() -> None:
    printable = [b for b in range(256) if isprint(b)]
    assert printable == list(range(0x20, 0x7F)) + list(range(0xA0, 0x100))


def test_trace_seq_takes_a_write_only_if_it_leaves_room_for_the_nul() -> None:
    seq = TraceSeq()
    seq.puts("x" * (TRACE_SEQ_BUFFER_SIZE - 2))
    seq.puts("ab")          # would reach 8156: dropped whole, and full
    assert (seq.len, seq.full) == (TRACE_SEQ_BUFFER_SIZE - 2, True)
    seq.puts("c")           # full: even what fits is dropped
    assert seq.len == TRACE_SEQ_BUFFER_SIZE - 2
    seq.full = False
    seq.puts("c")
    assert (seq.len, seq.full) == (TRACE_SEQ_BUFFER_SIZE - 1, False)
    seq.truncate(3)
    assert seq.text() == "xxx" and seq.len == 3


def test_long_array_is_cut_at_the_last_piece_that_fits() -> None:
    # Measured on 6.18 (raw_data, 3-byte pieces) and 6.12 (arrays, 2+1): the
    # line stops below 8156 with no newline.
    seq = TraceSeq()
    print_event_fields(seq, "e", parse_fields("__data_loc u8[] a"),
                       entry(loc(12, 3000) + bytes(3000)))
    text = seq.text()
    assert seq.full and not text.endswith("\n")
    assert len(text) == TRACE_SEQ_BUFFER_SIZE - 1 and text.endswith(",00")


# -- the compiled printer --------------------------------------------------------------

#: (type, size) of every kind of field the printer tells apart.
_FIELD_KINDS = [("u8", 1), ("s8", 1), ("char", 1), ("u16", 2), ("s16", 2), ("u32", 4),
                ("s32", 4), ("int", 4), ("u64", 8), ("s64", 8), ("char[5]", 5),
                ("unsigned char[3]", 3), ("__data_loc char[]", 4), ("__rel_loc char[]", 4),
                ("__data_loc u8[]", 4), ("__rel_loc u32[]", 4), ("__data_loc cpumask_t[]", 4),
                ("struct x[2]", 2), ("struct s", 3), ("struct t", 16), ("const char *", 8),
                ("char *", 8)]


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[tuple[Field, ...], bytes]:
    """Fields of any kind, laid out one after the other or anywhere, and a record."""
    kinds = draw(st.lists(st.sampled_from(_FIELD_KINDS), max_size=6))
    packed = draw(st.booleans())
    fields, offset = [], TRACE_ENTRY.size
    for i, (type_, size) in enumerate(kinds):
        if not packed:
            offset = draw(st.integers(TRACE_ENTRY.size, 40))
        fields.append(Field(type=type_, name=f"f{i}%", offset=offset, size=size,
                            is_signed=type_.startswith("s")))
        offset += size
    end = max((f.offset + f.size for f in fields), default=TRACE_ENTRY.size)
    length = draw(st.integers(TRACE_ENTRY.size, end + 24))
    # Small loc words point inside the record more often than random ones.
    byte = st.sampled_from([0, 1, 3, 12, 16, 0x41, 0x7F, 0xA0, 0xFF]) | st.integers(0, 255)
    body = draw(st.lists(byte, min_size=length - TRACE_ENTRY.size,
                         max_size=length - TRACE_ENTRY.size))
    return tuple(fields), TRACE_ENTRY.pack(1000, 0, 0, 1) + bytes(body)


@given(_layouts())
def test_the_compiled_printer_writes_what_the_pieces_write(
        layout: tuple[tuple[Field, ...], bytes]) -> None:
    fields, data = layout
    seq = TraceSeq()
    print_event_fields(seq, "e%s", fields, data)
    text = FieldsPrinter("e%s", fields).text(data)
    if text is None:  # too short for some field: left to the pieces
        assert len(data) < max(f.offset + f.size for f in fields)
    else:
        assert text == seq.text() and not seq.full


def test_the_compiled_printer_leaves_short_records_to_the_pieces() -> None:
    fields = parse_fields("u32 a; u64 b")
    assert FieldsPrinter("e", fields).text(entry(b"\x01\0\x30\0")) is None


def test_the_compiled_printer_returns_lines_longer_than_a_sequence_whole() -> None:
    # The caller sees that it does not fit and prints piece by piece instead.
    data = entry(loc(12, 3000) + bytes(3000))
    text = FieldsPrinter("e", parse_fields("__data_loc u8[] a")).text(data)
    assert text == "e: a=" + ",".join(["00"] * 3000) + "\n"
