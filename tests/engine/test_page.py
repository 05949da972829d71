"""The sub-buffer format: encoders against the kernel's rules and real bytes.

Byte values marked "6.18" were read from the real tracefs of Linux 6.18
(reference notes section 1, and tests/data/ringbuf-captures-6.18.44.json).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.engine.pagedecode import PageError, decode_page
from tracefs_fuse.engine import _page
from tracefs_fuse.engine._page import (HEADER_EVENT, encode_commit, encode_data_event,
                                       encode_discard_padding, encode_null_padding,
                                       encode_page_header, encode_time_extend,
                                       rb_calculate_event_length, render_header_page)

# (record length, event length, type_len): RB_MAX_SMALL_DATA is 112; the
# 12-byte event grows to 16 (rb_calculate_event_length).
EVENT_LENGTHS = [
    (0, 8, 1), (1, 8, 1), (4, 8, 1), (5, 16, 3), (8, 16, 3), (9, 16, 3), (12, 16, 3),
    (13, 20, 4), (16, 20, 4), (17, 24, 5), (108, 112, 27), (112, 116, 28),
    (113, 124, 0), (116, 124, 0), (117, 128, 0), (212, 220, 0), (4072, 4080, 0),
]


@pytest.mark.parametrize(("record", "length", "type_len"), EVENT_LENGTHS)
def test_page_event_length_rules(record: int, length: int, type_len: int) -> None:
    assert rb_calculate_event_length(record) == length
    page = bytearray(4096)
    encode_data_event(page, 16, b"\xaa" * record, length, 0)
    header = struct.unpack_from("<I", page, 16)[0]
    assert header & 31 == type_len
    if type_len:
        assert 4 + 4 * type_len == length
    else:
        # array[0] is the rounded body plus its own 4 bytes.
        assert struct.unpack_from("<I", page, 20)[0] == length - 4


# (size, missed, stored, u64 as read from the page): sign extension, 6.18.
COMMITS = [
    (0x134, False, False, 0x134),
    (4032, True, True, 0xFFFFFFFFC0000FC0),
    (4080, True, False, 0xFFFFFFFF80000FF0),
    (4028, True, True, 0xFFFFFFFFC0000FBC),
    (4060, True, True, 0xFFFFFFFFC0000FDC),
]


@pytest.mark.parametrize(("size", "missed", "stored", "raw"), COMMITS)
def test_page_commit_flags_sign_extend(size: int, missed: bool, stored: bool, raw: int) -> None:
    page = bytearray(4096)
    encode_page_header(page, 12345, encode_commit(size, missed_events=missed,
                                                  missed_stored=stored))
    assert struct.unpack_from("<QQ", page) == (12345, raw)


def test_page_header_bytes_of_section_1_7() -> None:
    page = bytearray(16)
    encode_page_header(page, 734383515906, encode_commit(308))
    assert page.hex(" ") == "02 29 ab fc aa 00 00 00 34 01 00 00 00 00 00 00"


def test_page_data_event_bytes_of_section_1_7() -> None:
    # hdr 0x003f1765: type_len 5, delta 129211; the 5-byte buf padded to 8.
    record = bytes.fromhex("130000012d190000420000000102030405")
    page = bytearray(64)
    encode_data_event(page, 0, record, rb_calculate_event_length(len(record)), 129211)
    assert page[:24].hex() == "65173f00" + record.hex() + "000000"


def test_page_data_event_leaves_stale_tail() -> None:
    """The kernel copies only the record: the rest of the event is stale."""
    page = bytearray(b"\xff" * 32)
    encode_data_event(page, 0, b"\x01" * 5, 16, 0)
    assert page[:16] == bytes.fromhex("03000000") + b"\x01" * 5 + b"\xff" * 7


def test_page_time_extend_bytes_of_section_1_7() -> None:
    page = bytearray(8)
    encode_time_extend(page, 0, (2 << 27) + 35149958)
    assert page.hex(" ") == "de 10 0b 43 02 00 00 00"


def test_page_time_extend_keeps_32_bits_of_array0() -> None:
    page = bytearray(8)
    encode_time_extend(page, 0, 1 << 59)  # array[0] would be 2**32: a u32 keeps 0
    assert page == bytes.fromhex("1e00000000000000")


def test_page_paddings() -> None:
    page = bytearray(b"\xff" * 64)
    encode_discard_padding(page, 0, 52)
    # type 29, time_delta 1, array[0] = 48 (RB_EVNT_HDR_SIZE excluded).
    assert page[:8].hex() == "3d00000030000000"
    encode_null_padding(page, 60)
    assert page[60:64].hex() == "1d000000"


def test_page_round_trip_through_independent_decoder() -> None:
    page = bytearray(4096)
    records = [bytes([i]) * n for i, n in enumerate((8, 12, 17, 112, 113, 300))]
    deltas = [0, 5, (1 << 27) + 3, 0, 99, 1 << 40]
    off = 16
    now = 1000
    times = []
    for record, delta in zip(records, deltas):
        now += delta
        times.append(now)
        if delta >> 27:
            encode_time_extend(page, off, delta)
            off += 8
            delta = 0
        length = rb_calculate_event_length(len(record))
        encode_data_event(page, off, record, length, delta)
        off += length
    encode_discard_padding(page, off, 4096 - off)
    encode_page_header(page, 1000, encode_commit(4080))
    decoded = decode_page(bytes(page))
    assert [e.ts for e in decoded.events] == times
    assert [e.data[:len(r)] for e, r in zip(decoded.events, records)] == records
    assert [e.extended for e in decoded.events] == [False, False, True, False, False, True]
    assert decoded.paddings == [(off, 1, 4096 - off)]


def test_page_decoder_rejects_unextended_flags() -> None:
    page = bytearray(4096)
    struct.pack_into("<QQ", page, 0, 0, (1 << 31) | 8)  # bit 31 without the 0xffffffff
    with pytest.raises(PageError):
        decode_page(bytes(page))


# events/header_page and events/header_event of 6.18 (the 16 KiB variant was
# read in an instance with buffer_subbuf_size_kb 16).
HEADER_PAGE_4K = (
    b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    b"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    b"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    b"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n")
HEADER_EVENT_6_18 = (
    b"# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n"
    b"\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n"
    b"\ttime_stamp : type == 31\n\tdata max type_len  == 28\n")


def test_page_header_files_match_6_18() -> None:
    assert render_header_page(4096) == HEADER_PAGE_4K
    assert render_header_page(16384) == HEADER_PAGE_4K.replace(b"size:4080", b"size:16368")
    assert len(HEADER_PAGE_4K) == len(HEADER_EVENT) == 205
    assert HEADER_EVENT == HEADER_EVENT_6_18


def test_page_header_files_match_this_kernel(real_tracefs_root: Path) -> None:
    """Compare with the running kernel's tracefs, mounted privately."""
    real_page = (real_tracefs_root / "events/header_page").read_bytes()
    real_event = (real_tracefs_root / "events/header_event").read_bytes()
    assert render_header_page(4096) == real_page
    assert HEADER_EVENT == real_event


def test_page_module_constants_are_the_kernels() -> None:
    assert (_page.RB_MAX_SMALL_DATA, _page.BUF_PAGE_HDR_SIZE, _page.TS_MASK) == (112, 16, 2**27 - 1)
    assert _page.BUFFER_DATA_PAGE.size == 16
