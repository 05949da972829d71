"""A perf event's ring (``struct perf_buffer``): the user page and the data pages.

Rules:
  * The mapping is 1 + 2^n pages (n >= 0; 1 page alone is the user page with
    no data), shared; ``perf_mmap`` refuses anything else with EINVAL.
  * A writable mapping makes a ring that respects the reader: a record that
    does not fit between ``data_head`` and the reader's ``data_tail`` is
    lost, counted, and reported by a ``PERF_RECORD_LOST`` written before the
    next record that fits with it (``perf_output_begin``). A read-only
    mapping overwrites: the reader cannot move a tail.
  * Space is the kernel's ``CIRC_SPACE(head, tail, size)``: one byte short of
    the ring (a full ring would look empty), the tail taken modulo the ring
    whatever the reader wrote there (``ring_buffer_has_space``).
  * The tail only moves forward, so the last one read is a lower bound: the
    reader's page is read again only when a record does not fit behind it.
    A tail that cannot be read (None) lets the record overwrite, as a
    read-only mapping's ring does. A tail that comes later (the reader's
    page is read off the engine's thread) raises :class:`TailAwaited` from
    ``read_tail``, before anything changed: the caller places the record
    once it has the tail (``_perf_events``).
  * ``data_head`` is stored after the record's bytes, so a reader that sees
    the head sees the record.
  * A wakeup (what makes ``poll()`` say POLLIN) comes every ``wakeup_events``
    samples, or with ``watermark`` when ``wakeup_watermark`` bytes are past
    the last wakeup (half the ring when 0).
  * A paused ring (``PERF_EVENT_IOC_PAUSE_OUTPUT``, or one without data pages,
    which ``ring_buffer_init`` pauses for good) writes nothing; with data
    pages each record it refuses is lost and counted as a full ring's are.
  * Where a record goes and what a full ring is are the direction's
    (``_claim``, ``_fits``): here forward; ``_perf_backward`` for
    ``write_backward``.

Kernel: include/uapi/linux/perf_event.h (``struct perf_event_mmap_page``),
kernel/events/core.c (``perf_mmap``, ``perf_event_init_userpage``,
``perf_event_update_userpage``, ``perf_poll``), kernel/events/ring_buffer.c
(``perf_output_begin``, ``perf_output_space``, ``ring_buffer_init``).
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable
from typing import NamedTuple

from ._errors import TracefsError

PAGE_SIZE = 4096

#: struct perf_event_mmap_page, up to ``__reserved`` (96 bytes)::
#:
#:     __u32 version; __u32 compat_version; __u32 lock; __u32 index;
#:     __s64 offset; __u64 time_enabled; __u64 time_running;
#:     __u64 capabilities;         /* bit 1: cap_bit0_is_deprecated */
#:     __u16 pmc_width; __u16 time_shift; __u32 time_mult;
#:     __u64 time_offset; __u64 time_zero;
#:     __u32 size; __u32 __reserved_1;
#:     __u64 time_cycles; __u64 time_mask;
#:     __u8 __reserved[116*8];
#:     __u64 data_head;    /* 1024 */
#:     __u64 data_tail;    /* 1032: written by the reader */
#:     __u64 data_offset;  /* 1040 */
#:     __u64 data_size;    /* 1048 */
#:     __u64 aux_head, aux_tail, aux_offset, aux_size;
USER_PAGE_HEAD = struct.Struct("=IIIIqQQQHHIQQIIQQ")
assert USER_PAGE_HEAD.size == 96
DATA_HEAD = 1024
DATA_TAIL = 1032
DATA_OFFSET = 1040
CAP_BIT0_IS_DEPRECATED = 1 << 1

_U64 = struct.Struct("=Q")
#: ``data_head`` is an unsigned long: a backward ring's goes below 0 and wraps.
U64_MASK = (1 << 64) - 1


class WakeupState(NamedTuple):
    """A ring's wakeup counters (:meth:`PerfBuffer._wakeup`)."""

    written: int
    wakeup_at: int
    watermark: int
    events_left: int
    wakeup_events: int


class TailAwaited(Exception):
    """The reader's ``data_tail`` is being read and comes later: the record
    that asked for it was not placed, nothing changed (the adapter reads a
    client's page off the engine's thread: issue 19, item 3)."""


def check_mapping(nr_pages: int, shared: bool, pgoff: int) -> int:
    """``perf_mmap``'s checks; the number of data pages."""
    if not shared or pgoff != 0:
        raise TracefsError(errno.EINVAL, "perf mappings are shared, from offset 0")
    data_pages = nr_pages - 1
    if data_pages < 0 or data_pages & (data_pages - 1):
        raise TracefsError(errno.EINVAL, "perf mappings are 1 + 2^n pages")
    return data_pages


class PerfBuffer:
    """One ring, as bytes; every change is reported as (offset, bytes) of the file."""

    def __init__(self, data_pages: int, *, writable: bool, wakeup_events: int,
                 watermark: int | None) -> None:
        self.size = data_pages * PAGE_SIZE
        self.writable = writable
        self.data = bytearray(self.size)
        self.head = 0
        #: The reader's ``data_tail`` as last read.
        self.tail = 0
        #: Records lost since the last LOST record was written (``rb->lost``).
        self.lost = 0
        #: Records lost in all (what the events' ``lost_samples`` add up).
        self.dropped = 0
        #: Bytes written in all: what the watermark counts, either direction.
        self.written = 0
        # ring_buffer_init: a ring without data pages is paused for good.
        self.paused = not self.size
        self._wakeup_events = wakeup_events
        self._events_left = wakeup_events
        # ring_buffer_init: no watermark asked for means half the ring.
        self._watermark = watermark or self.size // 2
        self._wakeup_at = 0
        self.lock = 0

    def user_page(self, *, enabled_ns: int = 0, running_ns: int = 0, count: int = 0) -> bytes:
        """Page 0 as ``perf_event_init_userpage`` and ``perf_event_update_userpage`` leave it."""
        head = USER_PAGE_HEAD.pack(0, 0, self.lock, 0, count, enabled_ns, running_ns,
                                   CAP_BIT0_IS_DEPRECATED, 0, 0, 0, 0, 0, USER_PAGE_HEAD.size,
                                   0, 0, 0)
        page = bytearray(PAGE_SIZE)
        page[:len(head)] = head
        page[DATA_HEAD:DATA_HEAD + 32] = struct.pack("=QQQQ", self.head & U64_MASK, 0, PAGE_SIZE,
                                                     self.size)
        return bytes(page)

    def output(self, record: bytes, read_tail: Callable[[], int | None],
               lost_record: Callable[[int], bytes], *,
               paused: bool | None = None) -> tuple[list[tuple[int, bytes]], bool]:
        """Write ``record``, after a LOST record if some are owed.

        ``read_tail``: the reader's ``data_tail`` now (a writable ring's
        reader page; None when it cannot be read); it may raise
        :class:`TailAwaited`, which leaves the ring as it was.
        ``paused``: the ring's :attr:`paused` when the record was written,
        if that was before now (a record placed once its tail came).
        Returns the file's changed ranges (data first, then ``data_head``) and
        whether a wakeup is due.
        """
        if self.paused if paused is None else paused:
            if self.size:
                self._lose()
            return [], False
        out = lost_record(self.lost) + record if self.lost else record
        if self.writable and not self._fits(len(out)):
            tail = read_tail()
            if tail is not None:
                self.tail = tail
                if not self._fits(len(out)):
                    self._lose()
                    return [], False
        self.lost = 0
        changes = self._store(self._claim(len(out)), out)
        changes.append((DATA_HEAD, _U64.pack(self.head & U64_MASK)))
        self.written += len(out)
        return changes, self._wakeup(len(out))

    def took(self, record: bytes) -> bool:
        """A record the fast path wrote and stored, where :meth:`output`
        would have put it (it wrote only what fits with no LOST record
        owed); the ring as output would leave it. Returns whether a wakeup
        is due (the fast path leaves those to :meth:`output`: never)."""
        self._store(self._claim(len(record)), record)
        self.written += len(record)
        return self._wakeup(len(record))

    def wakeup_state(self) -> WakeupState:
        """What decides the next wakeups, for the fast path to decide them alike."""
        return WakeupState(written=self.written, wakeup_at=self._wakeup_at,
                           watermark=self._watermark, events_left=self._events_left,
                           wakeup_events=self._wakeup_events)

    def _lose(self) -> None:
        self.lost += 1
        self.dropped += 1

    def _fits(self, size: int) -> bool:
        # include/linux/circ_buf.h: CIRC_SPACE(head, tail, size) = (tail - head - 1) & (size - 1)
        return (self.tail - self.head - 1) % self.size >= size

    def _claim(self, size: int) -> int:
        """Move the head past a record of ``size``; where the record starts."""
        start = self.head
        self.head += size
        return start

    def _store(self, position: int, out: bytes) -> list[tuple[int, bytes]]:
        start = position % self.size
        first = out[:self.size - start]
        self.data[start:start + len(first)] = first
        changes = [(PAGE_SIZE + start, first)]
        rest = out[len(first):]
        if rest:
            self.data[:len(rest)] = rest
            changes.append((PAGE_SIZE, rest))
        return changes

    def _wakeup(self, size: int) -> bool:
        due = False
        if self.written - self._wakeup_at > self._watermark:
            self._wakeup_at = self.written
            due = True
        if self._wakeup_events:
            self._events_left -= 1
            if self._events_left <= 0:
                self._events_left = self._wakeup_events
                due = True
        return due

    def file_bytes(self, offset: int, size: int) -> bytes:
        """What a page fill at ``offset`` reads (the user page, then the data)."""
        whole = self.user_page() + bytes(self.data)
        return whole[offset:offset + size].ljust(size, b"\0")
