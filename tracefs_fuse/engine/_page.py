"""The ring buffer's sub-buffer ("page") format: encoders and the two header files.

A sub-buffer is what ``trace_pipe_raw`` hands out and what an mmap reader
sees: a 16-byte ``buffer_data_page`` header followed by compressed events.
This module knows the byte layout and nothing about rings, readers or time.

Rules:
  * Host order is little-endian (x86_64); ``local_t`` is a signed 64-bit long.
  * ``RB_ALIGNMENT`` is 4: x86_64 has no ``CONFIG_HAVE_64BIT_ALIGNED_ACCESS``,
    so there is no forced 8-byte alignment and short records use ``type_len``.
  * Encoders write into caller-owned ``bytearray``s (the ring's preallocated
    pages) and return how many bytes they wrote; they never allocate on the
    data path.
  * ``render_header_page``/``HEADER_EVENT`` are byte-identical to this
    kernel's ``events/header_page`` and ``events/header_event``.

Kernel: kernel/trace/ring_buffer.c (``struct buffer_data_page``,
``rb_update_event``, ``rb_calculate_event_length``, ``rb_add_time_stamp``,
``rb_reset_tail``, ``ring_buffer_print_page_header``,
``ring_buffer_print_entry_header``), include/linux/ring_buffer.h
(``struct ring_buffer_event``), Linux 6.18.
"""

from __future__ import annotations

import struct

#: x86_64 system page; a sub-buffer is ``PAGE_SIZE << order`` bytes.
PAGE_SIZE = 4096

#: ``BUF_PAGE_HDR_SIZE = offsetof(struct buffer_data_page, data)``.
BUF_PAGE_HDR_SIZE = 16
#: ``RB_EVNT_HDR_SIZE = offsetof(struct ring_buffer_event, array)``.
RB_EVNT_HDR_SIZE = 4
RB_ALIGNMENT = 4
#: ``RB_EVNT_MIN_SIZE``: two 32-bit words; less room than this at the end of a
#: page gets a null padding instead of a discarded event.
RB_EVNT_MIN_SIZE = 8
RB_LEN_TIME_EXTEND = 8

RINGBUF_TYPE_DATA_TYPE_LEN_MAX = 28
RINGBUF_TYPE_PADDING = 29
RINGBUF_TYPE_TIME_EXTEND = 30
RINGBUF_TYPE_TIME_STAMP = 31
#: ``RB_MAX_SMALL_DATA = RB_ALIGNMENT * RINGBUF_TYPE_DATA_TYPE_LEN_MAX``.
RB_MAX_SMALL_DATA = RB_ALIGNMENT * RINGBUF_TYPE_DATA_TYPE_LEN_MAX

#: ``time_delta`` is 27 bits; larger deltas need a TIME_EXTEND.
TS_SHIFT = 27
TS_MASK = (1 << TS_SHIFT) - 1
#: A TIME_EXTEND carries 27 + 32 bits; ``rb_add_timestamp`` zeroes anything
#: above ``1 << 59`` (a clock that went backwards looks like that too).
TS_EXTEND_MAX = 1 << 59

#: Flags a reader adds to ``commit`` (``local_add(1 << 31, ...)``: an ``int``,
#: so the addition sign-extends into the 64-bit ``local_t``).
RB_MISSED_EVENTS = 1 << 31
RB_MISSED_STORED = 1 << 30

# struct buffer_data_page {
#         u64             time_stamp;     /* page time stamp */
#         local_t         commit;         /* write committed index */
#         unsigned char   data[] RB_ALIGN_DATA;   /* data of buffer page */
# };
BUFFER_DATA_PAGE = struct.Struct("<Qq")

# struct ring_buffer_event {
#         u32             type_len:5, time_delta:27;
#         u32             array[];
# };
# (bitfields are allocated from bit 0 on little-endian: type_len is the low 5.)
EVENT_HEADER = struct.Struct("<I")
#: The header plus ``array[0]``: long data records, TIME_EXTEND, padding.
EVENT_HEADER_ARRAY0 = struct.Struct("<II")
#: The missed-events count stored after the data: an ``unsigned long``.
MISSED_COUNT = struct.Struct("<Q")

_pack_header = EVENT_HEADER.pack_into
_pack_header_array0 = EVENT_HEADER_ARRAY0.pack_into


def subbuf_data_size(subbuf_size: int) -> int:
    """``buffer->subbuf_size``: the data bytes of a sub-buffer (4080 for 4 KiB)."""
    return subbuf_size - BUF_PAGE_HDR_SIZE


def rb_calculate_event_length(length: int) -> int:
    """The bytes an event with a ``length``-byte body takes, header included.

    ``rb_calculate_event_length``: a zero length counts as one byte; bodies
    over ``RB_MAX_SMALL_DATA`` carry their length in ``array[0]``; the result
    is 4-aligned, and a 12-byte event is grown to 16 because a TIME_EXTEND
    (8 bytes) must be able to replace the front of any event and leave room
    for an 8-byte padding.
    """
    if not length:
        length = 1
    if length > RB_MAX_SMALL_DATA:
        length += 4
    length = (length + RB_EVNT_HDR_SIZE + RB_ALIGNMENT - 1) & ~(RB_ALIGNMENT - 1)
    if length == RB_LEN_TIME_EXTEND + RB_ALIGNMENT:
        length += RB_ALIGNMENT
    return length


def encode_commit(size: int, *, missed_events: bool = False,
                  missed_stored: bool = False) -> int:
    """``commit`` as a signed ``local_t``, flags sign-extended like the kernel.

    ``local_add(RB_MISSED_EVENTS, &bpage->commit)`` adds the ``int``
    ``1 << 31``, i.e. -2**31, so a flagged commit reads
    ``0xffffffff8000xxxx`` as an unsigned 64-bit value.
    """
    commit = size
    if missed_stored:
        commit += RB_MISSED_STORED
    if missed_events:
        commit -= RB_MISSED_EVENTS
    return commit


def encode_page_header(page: bytearray | memoryview, time_stamp: int, commit: int) -> None:
    """Fill the 16-byte ``buffer_data_page`` header (``commit`` from :func:`encode_commit`)."""
    BUFFER_DATA_PAGE.pack_into(page, 0, time_stamp, commit)


def encode_data_event(page: bytearray | memoryview, offset: int, record: bytes | memoryview,
                      length: int, time_delta: int) -> None:
    """Write a data event of ``length`` bytes (from :func:`rb_calculate_event_length`).

    ``rb_update_event``: bodies up to ``RB_MAX_SMALL_DATA`` say their size in
    ``type_len`` (in 4-byte words), longer ones use ``type_len`` 0 and put the
    body length (rounded, plus the 4 bytes of ``array[0]``) in ``array[0]``.
    The bytes between the record's end and the event's end keep whatever
    the page held: the kernel's writers (``trace_marker_raw``, user_events)
    copy only the record, so stale bytes show through (zero in a fresh
    page; measured on 6.18). This is the ring's hot path: pass a
    ``memoryview`` of the page.
    """
    body = length - RB_EVNT_HDR_SIZE
    if body > RB_MAX_SMALL_DATA:
        _pack_header_array0(page, offset, time_delta << 5, body)
        start = offset + 8
    else:
        _pack_header(page, offset, (body >> 2) | (time_delta << 5))
        start = offset + 4
    page[start:start + len(record)] = record


def encode_time_extend(page: bytearray | memoryview, offset: int, delta: int) -> None:
    """Write an 8-byte TIME_EXTEND carrying ``delta`` (``rb_add_time_stamp``).

    ``delta = (array[0] << 27) + time_delta``; the caller has already zeroed
    deltas beyond 59 bits, as ``rb_add_timestamp`` does (``array[0]`` is a
    u32: exactly ``1 << 59`` stores 0 there, as in C).
    """
    EVENT_HEADER_ARRAY0.pack_into(
        page, offset,
        RINGBUF_TYPE_TIME_EXTEND | ((delta & TS_MASK) << 5), (delta >> TS_SHIFT) & 0xFFFFFFFF)


def encode_discard_padding(page: bytearray, offset: int, length: int) -> None:
    """Fill ``length`` bytes with a discarded event (``rb_reset_tail``).

    ``array[0]`` is the body length and ``time_delta`` is 1: a non-zero delta
    tells readers this is not the null padding that ends a page.
    """
    EVENT_HEADER_ARRAY0.pack_into(page, offset, RINGBUF_TYPE_PADDING | (1 << 5),
                                  length - RB_EVNT_HDR_SIZE)


def encode_null_padding(page: bytearray, offset: int) -> None:
    """Mark the end of a page that has < ``RB_EVNT_MIN_SIZE`` bytes left.

    ``rb_event_set_padding``: type 29 with ``time_delta`` 0; only the header
    word is written (there may be just 4 bytes of room).
    """
    EVENT_HEADER.pack_into(page, offset, RINGBUF_TYPE_PADDING)


def render_header_page(subbuf_size: int) -> bytes:
    """``events/header_page`` (``ring_buffer_print_page_header``).

    The ``field:`` lines have a space after the colon, unlike format files;
    ``overwrite`` is a legacy field overlapping ``commit``.
    """
    return (
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
        "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
        "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
        f"\tfield: char data;\toffset:{BUF_PAGE_HDR_SIZE};"
        f"\tsize:{subbuf_data_size(subbuf_size)};\tsigned:0;\n"
    ).encode()


#: ``events/header_event`` (``ring_buffer_print_entry_header``; the
#: ``time_stamp :`` line really has one space fewer).
HEADER_EVENT = (
    "# compressed entry header\n"
    "\ttype_len    :    5 bits\n"
    "\ttime_delta  :   27 bits\n"
    "\tarray       :   32 bits\n"
    "\n"
    f"\tpadding     : type == {RINGBUF_TYPE_PADDING}\n"
    f"\ttime_extend : type == {RINGBUF_TYPE_TIME_EXTEND}\n"
    f"\ttime_stamp : type == {RINGBUF_TYPE_TIME_STAMP}\n"
    f"\tdata max type_len  == {RINGBUF_TYPE_DATA_TYPE_LEN_MAX}\n"
).encode()
