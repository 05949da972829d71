"""Sub-buffers ("pages") of ``trace_pipe_raw``: where the records are, and when.

Rules:
  * Written from the kernel's page format (the layouts are quoted below),
    independently of the engine's encoder, so it reads pages from any tracefs.
  * Reading is strict about structure (an event running past ``commit``, a
    page shorter than its header) and raises :class:`PageError`; it never
    interprets record bodies, which are the format's business.
  * Time stamps follow the reader's rules: every data event adds its
    ``time_delta``; a TIME_EXTEND adds its 59-bit delta; an absolute
    TIME_STAMP replaces the time (its 5 lost top bits taken from the time so
    far, ``rb_fix_abs_ts``); padding adds nothing (``rb_update_read_stamp``).

Kernel: kernel/trace/ring_buffer.c (``struct buffer_data_page``,
``rb_event_length``, ``rb_update_read_stamp``, ``rb_fix_abs_ts``,
``ring_buffer_read_page``), include/linux/ring_buffer.h.
"""

from __future__ import annotations

import struct

import msgspec

# struct buffer_data_page {
#         u64             time_stamp;     /* page time stamp */
#         local_t         commit;         /* write committed index */
#         unsigned char   data[] RB_ALIGN_DATA;   /* data of buffer page */
# };
# (commit read unsigned: the missed-events flags sign-extend into bits 32-63.)
_PAGE_HEADER = struct.Struct("<QQ")
_PAGE_HEADER_SIZE = 16
# struct ring_buffer_event {
#         u32             type_len:5, time_delta:27;
#         u32             array[];
# };
_WORD = struct.Struct("<I")
# The count ring_buffer_read_page() stores after the data: an unsigned long.
_MISSED_COUNT = struct.Struct("<Q")

#: Bits of ``commit`` that are the data size (libtraceevent's COMMIT_MASK).
_COMMIT_MASK = (1 << 27) - 1
RB_MISSED_EVENTS = 1 << 31
RB_MISSED_STORED = 1 << 30
_PADDING = 29
_TIME_EXTEND = 30
_TIME_STAMP = 31
_TS_SHIFT = 27
#: ``TS_MSB``: the top 5 bits an absolute time stamp does not carry.
_TS_MSB = ((1 << 64) - 1) ^ ((1 << 59) - 1)


class PageError(ValueError):
    """The bytes are not a well-formed sub-buffer."""


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """What one sub-buffer holds.

    Attributes:
        time_stamp: the page's base time.
        missed: events were lost (overwritten) before this page.
        lost: how many, when the page had room to say (else None).
        records: ``(timestamp, start, end)`` of each record's bytes in the page;
            ``end`` is rounded up to 4 bytes, as the ring stores them.
    """

    time_stamp: int
    missed: bool
    lost: int | None
    records: list[tuple[int, int, int]]


def _fix_abs_ts(absolute: int, saved: int) -> int:
    if saved & _TS_MSB:
        absolute |= saved & _TS_MSB
        if absolute < saved:
            absolute += 1 << 59
    return absolute


def read_page(page: bytes | memoryview) -> Page:
    """Find the records of one sub-buffer.

    Args:
        page: the sub-buffer as ``read()`` from ``trace_pipe_raw`` returned it.

    Raises:
        PageError: the page is shorter than its header or its commit, or an
            event runs past the committed data.
    """
    if len(page) < _PAGE_HEADER_SIZE:
        raise PageError(f"a page of {len(page)} bytes has no header")
    ts, commit = _PAGE_HEADER.unpack_from(page, 0)
    end = _PAGE_HEADER_SIZE + (commit & _COMMIT_MASK)
    if end > len(page):
        raise PageError(f"commit {end - _PAGE_HEADER_SIZE} runs past a {len(page)}-byte page")
    lost = None
    if commit & RB_MISSED_STORED and end + 8 <= len(page):
        lost = _MISSED_COUNT.unpack_from(page, end)[0]
    time_stamp = ts
    records: list[tuple[int, int, int]] = []
    append = records.append
    unpack_word = _WORD.unpack_from
    off = _PAGE_HEADER_SIZE
    while off < end:
        if off + 4 > end:
            raise PageError(f"event header at {off} runs past commit {end}")
        header = unpack_word(page, off)[0]
        type_len = header & 31
        delta = header >> 5
        if 0 < type_len < _PADDING:
            start = off + 4
            off = start + 4 * type_len
            ts += delta
        elif type_len == 0:
            # Long record: array[0] is the body length, itself included.
            if off + 8 > end:
                raise PageError(f"long event at {off} runs past commit {end}")
            length = unpack_word(page, off + 4)[0]
            if length < 4:
                raise PageError(f"long event at {off} says {length} bytes")
            start = off + 8
            off += 4 + length
            ts += delta
        elif type_len == _PADDING:
            if delta == 0:
                break  # null padding: nothing more on this page
            if off + 8 > end:
                raise PageError(f"padding at {off} runs past commit {end}")
            off += 4 + unpack_word(page, off + 4)[0]
            continue
        else:
            if off + 8 > end:
                raise PageError(f"time stamp at {off} runs past commit {end}")
            value = (unpack_word(page, off + 4)[0] << _TS_SHIFT) + delta
            ts = ts + value if type_len == _TIME_EXTEND else _fix_abs_ts(value, ts)
            off += 8
            continue
        if off > end:
            raise PageError(f"event at {start - 4} runs past commit {end}")
        append((ts, start, off))
    return Page(time_stamp=time_stamp, missed=bool(commit & RB_MISSED_EVENTS), lost=lost,
                records=records)
