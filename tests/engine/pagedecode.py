"""An independent decoder of ring-buffer sub-buffers, for tests only.

Written from the format as readers implement it (libtraceevent's
``kbuffer-parse.c``: ``COMMIT_MASK``, ``MISSING_EVENTS``/``MISSING_STORED``,
``translate_data``), not from the engine's encoder, so a page the engine
produces and this decoder accepts is what trace-cmd would accept. It is
strict: anything a well-formed page cannot contain raises ``PageError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

COMMIT_MASK = (1 << 27) - 1
MISSING_EVENTS = 1 << 31
MISSING_STORED = 1 << 30


class PageError(ValueError):
    """The bytes are not a well-formed sub-buffer."""


@dataclass(frozen=True)
class Event:
    """A data record: absolute time, the delta in its header, its body."""

    ts: int
    time_delta: int
    type_len: int
    offset: int
    data: bytes
    extended: bool = False


@dataclass
class Page:
    time_stamp: int
    commit_raw: int
    size: int
    missed_events: bool
    missed_stored: bool
    lost: int | None
    events: list[Event] = field(default_factory=list)
    paddings: list[tuple[int, int, int]] = field(default_factory=list)  # (offset, delta, length)
    null_padding_at: int | None = None


def _u32(buf: bytes, off: int) -> int:
    return int(struct.unpack_from("<I", buf, off)[0])


def decode_page(buf: bytes, subbuf_size: int = 4096, *, zero_tail: bool = True) -> Page:
    """Decode one sub-buffer.

    Args:
        buf: exactly ``subbuf_size`` bytes.
        subbuf_size: the sub-buffer size.
        zero_tail: require every byte after the data (and stored count) to be
            zero, as ``read()`` guarantees.
    """
    if len(buf) != subbuf_size:
        raise PageError(f"page is {len(buf)} bytes, not {subbuf_size}")
    time_stamp, commit_raw = struct.unpack_from("<QQ", buf, 0)
    size = commit_raw & COMMIT_MASK
    flags = commit_raw & ~COMMIT_MASK
    missed = bool(commit_raw & MISSING_EVENTS)
    stored = bool(commit_raw & MISSING_STORED)
    if missed:
        # The flags are added as ints, so bit 31 sign-extends into 63..32.
        if commit_raw >> 32 != 0xFFFFFFFF:
            raise PageError(f"missed flag not sign-extended: {commit_raw:#x}")
    elif flags:
        raise PageError(f"flags without MISSING_EVENTS: {commit_raw:#x}")
    if size > subbuf_size - 16:
        raise PageError(f"commit {size} beyond the page")
    lost = None
    end = 16 + size
    if stored:
        if end + 8 > subbuf_size:
            raise PageError("stored count does not fit")
        lost = struct.unpack_from("<Q", buf, end)[0]
        end += 8
    page = Page(time_stamp, commit_raw, size, missed, stored, lost)
    off = 16
    ts = time_stamp
    extend_pending = False
    while off < 16 + size:
        if off % 4:
            raise PageError(f"event at {off} not 4-aligned")
        if off + 4 > 16 + size:
            raise PageError("event header past commit")
        header = _u32(buf, off)
        type_len = header & 31
        delta = header >> 5
        if type_len == 29:
            if extend_pending:
                raise PageError("padding after a time extend")
            if delta == 0:
                page.null_padding_at = off
                break
            length = 4 + _u32(buf, off + 4)
            page.paddings.append((off, delta, length))
            off += length
            continue
        if type_len == 30:
            if extend_pending:
                raise PageError("two time extends in a row")
            ts += (_u32(buf, off + 4) << 27) + delta
            extend_pending = True
            off += 8
            continue
        if type_len == 31:
            raise PageError("absolute time stamps are never written in delta mode")
        if extend_pending and delta:
            raise PageError("data after a time extend must have delta 0")
        ts += delta
        if type_len == 0:
            length_word = _u32(buf, off + 4)
            if length_word < 4 + 113 or length_word % 4:
                raise PageError(f"bad long-record length {length_word}")
            data = bytes(buf[off + 8:off + 4 + length_word])
            length = 4 + length_word
        else:
            data = bytes(buf[off + 4:off + 4 + 4 * type_len])
            length = 4 + 4 * type_len
        if off + length > 16 + size:
            raise PageError(f"event at {off} runs past commit")
        page.events.append(Event(ts, delta, type_len, off, data, extend_pending))
        extend_pending = False
        off += length
    if extend_pending:
        raise PageError("time extend without an event")
    if page.null_padding_at is None and off != 16 + size:
        raise PageError(f"events end at {off}, commit says {16 + size}")
    if zero_tail and any(buf[end:]):
        raise PageError("bytes after the data are not zero")
    return page
