"""Per-CPU ring buffers: sub-buffers, the reader page swap, overwrite, lost events.

One :class:`RingBuffer` per trace array (``struct trace_buffer``) holds one
:class:`CpuBuffer` per CPU (``struct ring_buffer_per_cpu``): a circular list
of sub-buffers plus a reader page that is swapped in from the head of the
ring. The writer appends at the tail page; in overwrite mode, a writer that
needs a page while the ring is full takes the head page, counting its events
as ``overrun``; the next page a reader swaps in then reports them as lost.

Rules:
  * The model follows kernel/trace/ring_buffer.c step by step, minus the
    lock-free machinery: one writer at a time, so ``commit == write`` after
    every call, the commit page is always the tail page, and the HEAD flag of
    a list pointer becomes "this page is ``head_page``" (except that a writer
    leaving the reader page never takes its next page for the head: the
    reader page's ``next`` pointer carries no HEAD flag).
  * Every counter is the kernel's (``entries``, ``overrun``, ``read``,
    ``entries_bytes``, ``read_bytes``, ``pages_touched``/``lost``/``read``,
    ``lost_events``/``last_overrun``) and changes where the kernel changes it,
    so ``stats``, the ``trace`` header and the mmap meta page come out exact,
    quirks included (a sub-buffer size change keeps stale counters; a reset
    keeps stale page time stamps).
  * The write path allocates nothing but a page's memory on its first use:
    each sub-buffer is a ``bytearray`` holding the whole page image, its
    16-byte header packed only when the page is handed out. The kernel
    allocates every page up front; we allocate a page's bytes when something
    first touches them (:meth:`BufferPage.__getattr__`: zeroed, as the
    kernel's are), because a ``run`` that never writes would otherwise pay
    2 × 355 pages of page faults before its first request (5 ms of a fixture
    test). Nothing a file shows depends on it: sizes, ``stats`` and the meta
    page come from ``nr_pages`` and the counters, never from the memory held.
  * Like the kernel, a ``read()`` of a page the writer has left trades the
    page's memory for the reader's spare (one spare is pooled per CPU), so
    stale time stamps travel between pages as they do on 6.18 (visible in
    ``oldest event ts`` after a reset).
  * Calls are all-or-nothing: a call that raises changed nothing.

Caveats:
  * The reader of an mmap cannot see a page grow live: the adapter pushes
    pages (:class:`MmapUpdate`) at map time and at each GET_READER.
  * Only delta time stamps (``timestamp_mode`` ``delta``): TIME_STAMP
    records, used by absolute mode and by writers interrupting writers, are
    never produced.
  * After a sub-buffer size change with unread events, 6.18's trace_pipe_raw
    read returns 0 rather than EAGAIN; this model (following the kernel
    source we could read) says EAGAIN.

Kernel: kernel/trace/ring_buffer.c, kernel/trace/trace.c
(``tracing_buffers_read``, ``tracing_stats_read``, ``tracing_entries_read``,
``tracing_entries_write``, ``tracing_total_entries_read``,
``get_total_entries``), include/uapi/linux/trace_mmap.h, Linux 6.18.
"""

from __future__ import annotations

import errno
import heapq
import struct
from typing import Callable, Iterator

import msgspec

from ._clock import ClockSource, TraceClock, format_ts
from ._errors import TracefsError, WouldBlock
from ._kstrto import kstrtoul_from_user
from ._page import (BUF_PAGE_HDR_SIZE, EVENT_HEADER_ARRAY0, MISSED_COUNT, PAGE_SIZE,
                    RB_EVNT_HDR_SIZE, RB_EVNT_MIN_SIZE, RB_LEN_TIME_EXTEND, RB_MAX_SMALL_DATA,
                    RINGBUF_TYPE_DATA_TYPE_LEN_MAX,
                    RINGBUF_TYPE_PADDING, TS_EXTEND_MAX, TS_MASK, TS_SHIFT, encode_commit,
                    encode_data_event, encode_discard_padding, encode_null_padding,
                    encode_page_header, encode_time_extend, rb_calculate_event_length,
                    subbuf_data_size)

#: ``TRACE_BUF_SIZE_DEFAULT``: what a buffer expands to (1408 KiB per CPU).
TRACE_BUF_SIZE_DEFAULT = 1441792
#: ``buffer_subbuf_size_kb`` is limited to 1..128 system pages (order 0..7).
MAX_SUBBUF_ORDER = 7
#: Pages a CPU buffer may hold before a resize says ENOMEM (the kernel asks
#: ``si_mem_available``); 256 MiB of 4 KiB sub-buffers.
DEFAULT_MAX_NR_PAGES = 65536

_NOT_TS = ~TS_MASK
#: A writer's last check of a reserved event, before it commits: given the
#: byte just before the event's body, False discards it. user_events' check
#: (``user_event_validate``) runs on the reserved entry, whose ``data - 1``
#: is that byte (``UserEvent.validate``).
Accept = Callable[[int], bool]
#: Event lengths of records shorter than a page, looked up on the write path.
_SMALL_RECORDS = PAGE_SIZE
_EVENT_LENGTHS = [rb_calculate_event_length(n) for n in range(_SMALL_RECORDS)]
#: ``info->read`` of a reader with no page to hand out (``(unsigned int)-1``).
_NO_PAGE = 1 << 32
_U64 = (1 << 64) - 1

# struct trace_buffer_meta {
#         __u32           meta_page_size;
#         __u32           meta_struct_len;
#         __u32           subbuf_size;
#         __u32           nr_subbufs;
#         struct {
#                 __u64   lost_events;
#                 __u32   id;
#                 __u32   read;
#         } reader;
#         __u64   flags;
#         __u64   entries;
#         __u64   overrun;
#         __u64   read;
#         __u64   Reserved1;
#         __u64   Reserved2;
# };
TRACE_BUFFER_META = struct.Struct("<IIIIQIIQQQQQQ")


class TraceRecord(msgspec.Struct, frozen=True):
    """One event as a text reader sees it.

    Attributes:
        cpu: the CPU buffer it came from.
        ts: its absolute time stamp in the buffer's clock.
        data: the event body: the record as written, padded to the event's
            length (``ring_buffer_event_length``: a 5-byte tail reads back as
            8) with whatever the page held there (zero in a fresh page).
        lost_events: events overwritten before this one since the last
            consuming read (``CPU:%d [LOST %lu EVENTS]``); always 0 from
            non-consuming iteration.
    """

    cpu: int
    ts: int
    data: bytes
    lost_events: int = 0


class TotalEntries(msgspec.Struct, frozen=True):
    """``get_total_entries``: the ``entries-in-buffer/entries-written`` header."""

    entries: int
    total: int


class CpuBufferStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one CPU buffer (``stats`` shows most of them)."""

    cpu: int
    nr_pages: int
    entries: int
    overrun: int
    commit_overrun: int
    bytes: int
    oldest_event_ts: int
    dropped_events: int
    read_events: int
    entries_written: int
    pages_touched: int
    pages_lost: int
    pages_read: int
    lost_events: int
    mapped: int
    resize_disabled: int
    #: Sub-buffers (the reader page included) whose memory exists: ours are
    #: allocated on first use, where the kernel allocates all ``nr_pages``.
    allocated_pages: int


class RingBufferStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """State of a whole ring buffer."""

    nr_cpus: int
    subbuf_size: int
    clock: str
    overwrite: bool
    record_on: bool
    expanded: bool
    cpus: tuple[CpuBufferStatistics, ...]


class MmapUpdate(msgspec.Struct, frozen=True):
    """Bytes the adapter must store into a client's mapping of ``trace_pipe_raw``.

    Attributes:
        stores: ``(file offset, bytes)`` pairs: the meta page at 0, then each
            sub-buffer that changed at ``meta_page_size + id * subbuf_size``.
    """

    stores: tuple[tuple[int, bytes], ...]


class BufferPage:
    """``struct buffer_page`` with its ``buffer_data_page`` (one sub-buffer).

    ``data`` is the whole page image; events start at byte 16. ``commit`` is
    the event size (``rb_page_size``); the flags a GET_READER adds to the
    page's ``commit`` are kept apart in ``missed`` (a signed addend).
    """

    __slots__ = ("size", "data", "view", "time_stamp", "commit", "missed", "entries", "read",
                 "real_end", "id", "next", "prev", "dirty")

    #: The page image, allocated on first use (:meth:`__getattr__`).
    data: bytearray
    #: Writes go through a view: slice stores into it are cheaper.
    view: memoryview

    def __init__(self, subbuf_size: int) -> None:
        self.size = subbuf_size
        self.time_stamp = 0
        self.commit = 0
        self.missed = 0
        self.entries = 0
        self.read = 0
        self.real_end = 0
        self.id = 0
        self.next = self
        self.prev = self
        #: Changed since the adapter last pushed it into a mapping.
        self.dirty = True

    def __getattr__(self, name: str) -> bytearray | memoryview:
        # Reached only while a slot is unset, i.e. for the page's memory until
        # its first use: a set slot never comes here, so the write path pays
        # nothing once the page exists.
        if name not in ("data", "view"):
            raise AttributeError(name)
        self.data = bytearray(self.size)
        self.view = memoryview(self.data)
        return self.data if name == "data" else self.view

    @property
    def allocated(self) -> bool:
        """Whether the page's memory exists yet (asking never allocates it)."""
        try:
            _PAGE_DATA.__get__(self, BufferPage)
        except AttributeError:
            return False
        return True

    def clear(self) -> None:
        """``rb_clear_buffer_page``: empty, but time stamp, real_end and bytes stay."""
        self.commit = self.missed = self.entries = self.read = 0
        self.dirty = True

    def render(self) -> bytes:
        """The page as a mapping shows it (header packed from the fields)."""
        encode_page_header(self.data, self.time_stamp, self.commit + self.missed)
        return bytes(self.data)


#: The slot behind :attr:`BufferPage.data`, read without the allocating fallback.
_PAGE_DATA = BufferPage.__dict__["data"]


class ReadPage:
    """``struct buffer_data_read_page``: a reader's spare sub-buffer."""

    __slots__ = ("data", "view", "time_stamp")

    def __init__(self, subbuf_size: int) -> None:
        self.data = bytearray(subbuf_size)
        self.view = memoryview(self.data)
        self.time_stamp = 0


def _event_body(page: BufferPage, off: int, header: int, array0: int) -> tuple[int, bytes]:
    """A data event's length and body: ``type_len`` words, or ``array[0]`` bytes
    (which count array[0] itself) for a long event (type_len 0)."""
    type_len = header & 31
    if type_len:
        length = type_len * 4 + 4
        return length, bytes(page.view[off + 4:off + length])
    return array0 + 4, bytes(page.view[off + 8:off + 4 + array0])


def _link_ring(pages: list[BufferPage]) -> None:
    for prev, page in zip(pages, pages[1:] + pages[:1]):
        prev.next = page
        page.prev = prev


class CpuBuffer:
    """``struct ring_buffer_per_cpu``: one CPU's ring of sub-buffers and its reader."""

    def __init__(self, cpu: int, nr_pages: int, subbuf_size: int, read_clock: ClockSource,
                 overwrite: bool) -> None:
        self.cpu = cpu
        #: ``buffer->clock``.
        self.read_clock = read_clock
        self.overwrite = overwrite
        self.subbuf_size = subbuf_size
        #: ``buffer->subbuf_size``: the data bytes of a page.
        self.bsize = subbuf_data_size(subbuf_size)
        #: ``buffer->max_data_size``: the largest record (the event length
        #: word and the header take 8 bytes).
        self.max_data_size = self.bsize - 8
        self.nr_pages = nr_pages
        #: trace.c's ``data->entries``: the size ``buffer_size_kb`` reports,
        #: updated by resizes only.
        self.entries_size = self.bsize * nr_pages
        self.resize_disabled = 0
        self.user_mapped = 0
        self._subbufs: list[BufferPage] = []
        self._meta = b""
        #: ``cpu_buffer->free_page``: one spare kept for the next reader.
        self.free_page: ReadPage | None = None
        #: Bumped when pages are replaced or cleared under open iterators.
        self.generation = 0
        self._alloc_pages(nr_pages)
        self._reset_counters()
        self.read_stamp = 0

    # -- allocation and reset ---------------------------------------------------

    def _alloc_pages(self, nr_pages: int) -> None:
        pages = [BufferPage(self.subbuf_size) for _ in range(nr_pages)]
        _link_ring(pages)
        self.reader_page = BufferPage(self.subbuf_size)
        #: ``cpu_buffer->pages``: where a reset puts the head.
        self.pages = pages[0]
        self.head_page = self.tail_page = pages[0]

    def _reset_counters(self) -> None:
        self.entries = 0
        self.overrun = 0
        self.commit_overrun = 0
        self.dropped_events = 0
        self.entries_bytes = 0
        self.read = 0
        self.read_bytes = 0
        self.pages_touched = 0
        self.pages_lost = 0
        self.pages_read = 0
        self.lost_events = 0
        self.last_overrun = 0
        self.write_stamp = 0

    def ring(self) -> Iterator[BufferPage]:
        """The ring pages from the head (the reader page is not in the ring)."""
        page = self.head_page
        for _ in range(self.nr_pages):
            yield page
            page = page.next

    def reset(self) -> None:
        """``rb_reset_cpu``: empty the buffer, head and tail at ``pages``."""
        self.head_page = self.tail_page = self.pages
        for page in self.ring():
            page.clear()
        reader = self.reader_page
        reader.clear()
        reader.next = reader.prev = reader  # INIT_LIST_HEAD
        self._reset_counters()
        self.generation += 1
        if self.user_mapped:
            self._update_meta_page()

    # -- writing ------------------------------------------------------------------

    def write(self, record: bytes | memoryview, stamp: int | None = None,
              accept: Accept | None = None) -> bool:
        """Reserve, fill and commit one event (``ring_buffer_write``).

        Args:
            record: the event body.
            stamp: the time stamp the writer took when it wrote (a record
                the native fast path staged: see :meth:`RingBuffer.take_in`);
                None reads the clock now, and again after a page move, as
                ``rb_reserve_next_event`` does.
            accept: asked, once the event is reserved, with the byte just
                before its body (the last byte of its header); False
                discards the event (see :data:`Accept`).

        Returns:
            False if the record is larger than ``max_data_size``, the ring
            is full in non-overwrite mode (counted in ``dropped_events``), or
            ``accept`` refused it.
        """
        n = len(record)
        if n > self.max_data_size:
            return False
        length = _EVENT_LENGTHS[n] if n < _SMALL_RECORDS else rb_calculate_event_length(n)
        page = self.tail_page
        w = page.commit
        ts = self.read_clock() if stamp is None else stamp
        if w:
            # __rb_reserve_next(): the first event on a page uses the page's
            # time stamp (delta 0); others need a TIME_EXTEND if the delta
            # does not fit 27 bits (a negative one, as a u64, never does).
            delta = ts - self.write_stamp
            total = length + RB_LEN_TIME_EXTEND if delta & _NOT_TS else length
        else:
            delta = 0
            total = length
        if w + total > self.bsize:
            if not self._move_tail(w, total):
                return False
            # The reservation starts over on the new page, clock included.
            page = self.tail_page
            w = delta = 0
            total = length
            if stamp is None:
                ts = self.read_clock()
        data = page.view
        off = BUF_PAGE_HDR_SIZE + w
        if total != length:
            # rb_add_timestamp(): deltas beyond 59 bits (or negative: the
            # clock went backwards) are recorded as 0.
            encode_time_extend(data, off, delta if 0 <= delta <= TS_EXTEND_MAX else 0)
            off += RB_LEN_TIME_EXTEND
            delta = 0
        encode_data_event(data, off, record, length, delta)
        if accept is not None:
            body = off + (RB_EVNT_HDR_SIZE if length - RB_EVNT_HDR_SIZE <= RB_MAX_SMALL_DATA
                          else 2 * RB_EVNT_HDR_SIZE)
            if not accept(data[body - 1]):
                return False  # __trace_event_discard_commit: nothing committed
        if not w:
            page.time_stamp = ts
        self._commit(page, w + total, total, ts)
        return True

    def _commit(self, page: BufferPage, commit: int, total: int, ts: int) -> None:
        """``rb_commit``: one more event of ``total`` bytes on ``page``, stamped ``ts``."""
        page.commit = commit
        page.entries += 1
        page.dirty = True
        self.entries += 1
        self.entries_bytes += total
        self.write_stamp = ts

    def take_in(self, staged: memoryview, at: int, copy_len: int, length: int, stamp: int,
                previous: int, event_length: int) -> bool:
        """Record an event the native fast path staged and encoded.

        The fast path encodes each event as :meth:`write` would right after
        the event it staged before on this CPU (``previous`` is that one's
        time stamp): ``time_delta`` from it, a TIME_EXTEND when the delta does
        not fit. That encoding is this buffer's own only while the buffer's
        last event is that one (``write_stamp == previous``) and the event
        continues a page it fits in; otherwise the record is written afresh.

        Args:
            staged: memory holding the encoding at ``at``: TIME_EXTEND (if
                any), event header and record, ``copy_len`` bytes, as
                :meth:`write` would lay them down; the record (what
                :meth:`write` takes, ``length`` bytes) ends it.
            stamp: the record's time stamp.
            previous: the time stamp the encoding's delta is relative to.
            event_length: the bytes the event takes, TIME_EXTEND included.

        Returns:
            As :meth:`write`.
        """
        page = self.tail_page
        w = page.commit
        end = at + copy_len
        if not w or w + event_length > self.bsize or self.write_stamp != previous:
            return self.write(staged[end - length:end], stamp)
        off = BUF_PAGE_HDR_SIZE + w
        page.view[off:off + copy_len] = staged[at:end]
        self._commit(page, w + event_length, event_length, stamp)
        return True

    def _move_tail(self, tail: int, length: int) -> bool:
        """``rb_move_tail``: pad the full tail page and move to the next one.

        Returns:
            False when the ring is full and overwrite is off: the event is
            dropped.
        """
        tail_page = self.tail_page
        next_page = tail_page.next
        if next_page is self.head_page and tail_page is not self.reader_page:
            if not self.overwrite:
                self.dropped_events += 1
                self._reset_tail(tail_page, tail, length)
                return False
            # rb_handle_head_page(): the oldest page is sacrificed.
            self.overrun += next_page.entries
            self.entries_bytes -= next_page.commit
            self.pages_lost += 1
            self.head_page = next_page.next
        # rb_tail_page_update()
        next_page.commit = next_page.entries = next_page.missed = 0
        next_page.dirty = True
        self.tail_page = next_page
        self.pages_touched += 1
        self._reset_tail(tail_page, tail, length)
        return True

    def _reset_tail(self, page: BufferPage, tail: int, length: int) -> None:
        """``rb_reset_tail``: fill the rest of the page the event did not fit in."""
        bsize = self.bsize
        if tail == bsize:
            # A page filled exactly: nothing to pad, and no real end to trim.
            # (The kernel also sees tail > bsize, from interrupting writers.)
            page.real_end = 0
            return
        # Remember where the events end: a reader trims the padding to it
        # (and may store the lost-events count there).
        page.real_end = tail
        page.dirty = True
        if tail > bsize - RB_EVNT_MIN_SIZE:
            encode_null_padding(page.data, BUF_PAGE_HDR_SIZE + tail)
            return
        encode_discard_padding(page.data, BUF_PAGE_HDR_SIZE + tail, bsize - tail)
        self.entries_bytes += bsize - tail
        page.commit = bsize

    # -- reading ------------------------------------------------------------------

    def entries_in_buffer(self) -> int:
        """``rb_num_of_entries``: committed minus overwritten minus read."""
        return self.entries - (self.overrun + self.read)

    def empty(self) -> bool:
        """``rb_per_cpu_empty``."""
        reader = self.reader_page
        if reader.read != reader.commit:
            return False
        if self.tail_page is reader:
            return True
        if self.tail_page is not self.head_page:
            return False
        return self.head_page.commit == 0

    def _get_reader_page(self) -> BufferPage | None:
        """``rb_get_reader_page``: the page to read, swapping in the head if done.

        The read reader page goes back into the ring in the head's place; the
        head page becomes the reader page. Events overwritten since the last
        swap become ``lost_events``.
        """
        current = self.reader_page
        if current.read < current.commit:  # the common case: more to read here
            if not current.read:
                self.read_stamp = current.time_stamp
            return current
        reader: BufferPage | None = None
        for _ in range(3):
            reader = self.reader_page
            if reader.read < reader.commit:
                break
            if self.tail_page is reader or not self.entries_in_buffer():
                reader = None
                break
            # 6.18 resets write, entries and real_end but no longer the
            # page's commit: a mapping still shows the old page (measured).
            # Nothing else looks at it before the writer arrives and clears it.
            reader.entries = reader.real_end = 0
            head = self.head_page
            reader.next = head.next
            reader.prev = head.prev
            head.prev.next = reader
            head.next.prev = reader
            self.pages = head.prev
            self.head_page = head.next
            self.pages_read += 1
            self.reader_page = head
            head.read = 0
            overrun = self.overrun
            if overrun != self.last_overrun:
                self.lost_events = overrun - self.last_overrun
                self.last_overrun = overrun
        else:  # pragma: no cover - RB_WARN_ON(++nr_loops > 3)
            reader = None
        if reader is not None and reader.read == 0:
            self.read_stamp = reader.time_stamp
        return reader

    def _advance(self, reader: BufferPage, budget: int) -> int:
        """``rb_advance_reader`` over events while they fit ``budget`` bytes.

        A TIME_EXTEND only goes with the event after it (``rb_event_ts_length``).

        Returns:
            The bytes consumed from the reader page.
        """
        data = reader.data
        start = read = reader.read
        commit = reader.commit
        stamp = self.read_stamp
        nread = 0
        unpack = EVENT_HEADER_ARRAY0.unpack_from
        while read < commit:
            header, array0 = unpack(data, BUF_PAGE_HDR_SIZE + read)
            type_len = header & 31
            if type_len <= RINGBUF_TYPE_DATA_TYPE_LEN_MAX:
                length = type_len * 4 + 4 if type_len else array0 + 4
                if length > budget:
                    break
                nread += 1
                stamp += header >> 5
            elif type_len == RINGBUF_TYPE_PADDING:
                length = array0 + 4
                if length > budget:
                    break
            else:
                length = RB_LEN_TIME_EXTEND
                nxt = EVENT_HEADER_ARRAY0.unpack_from(data, BUF_PAGE_HDR_SIZE + read + 8)
                pair = length + (nxt[0] & 31) * 4 + 4 if nxt[0] & 31 else length + nxt[1] + 4
                if pair > budget:
                    break
                stamp += (array0 << TS_SHIFT) + (header >> 5)
            read += length
            budget -= length
        consumed = read - start
        reader.read = read
        self.read_stamp = stamp
        self.read += nread
        self.read_bytes += consumed
        return consumed

    def alloc_read_page(self) -> ReadPage:
        """``ring_buffer_alloc_read_page``: the pooled spare, or a new zero page."""
        page = self.free_page
        if page is None:
            return ReadPage(self.subbuf_size)
        self.free_page = None
        return page

    def free_read_page(self, page: ReadPage) -> None:
        """``ring_buffer_free_read_page``: keep one spare of the current size."""
        if self.free_page is None and len(page.data) == self.subbuf_size:
            self.free_page = page

    def read_page(self, spare: ReadPage, length: int, full: bool = False) -> bool:
        """``ring_buffer_read_page``: move one sub-buffer's worth of events into ``spare``.

        A page the writer has left, unread, and not mapped trades places with
        the spare (the ring keeps the spare's memory, stale time stamp and
        all); its end padding is trimmed to ``real_end``. Otherwise the
        events after ``read`` that fit ``length - 16`` bytes are copied into
        the spare, stamped with ``read_stamp``. Events overwritten since the
        last read are flagged in ``commit`` and counted after the data if 8
        bytes are free; the rest of the page is zeroed.

        Args:
            spare: the reader's page (from :meth:`alloc_read_page`).
            length: the reader's buffer size.
            full: only take a page the writer has left (splice).

        Returns:
            False if nothing was read (empty, ``length`` too small for the
            next event, or ``full`` and no full page).
        """
        if length <= BUF_PAGE_HDR_SIZE:
            return False
        length -= BUF_PAGE_HDR_SIZE
        reader = self._get_reader_page()
        if reader is None:
            return False
        read = reader.read
        commit = reader.commit
        missed = self.lost_events
        busy = self.tail_page is reader
        if read or length < commit - read or busy or self.user_mapped:
            if full and (not read or length < commit - read or busy):
                return False
            # The copy's deltas build on the time of the last event read.
            time_stamp = self.read_stamp
            start = BUF_PAGE_HDR_SIZE + read
            size = self._advance(reader, min(length, commit - read))
            if not size:
                return False
            spare.view[BUF_PAGE_HDR_SIZE:BUF_PAGE_HDR_SIZE + size] = reader.view[start:start + size]
            spare.time_stamp = time_stamp
        else:
            self.read += reader.entries
            self.read_bytes += commit
            spare.data, reader.data = reader.data, spare.data
            spare.view, reader.view = reader.view, spare.view
            spare.time_stamp, reader.time_stamp = reader.time_stamp, spare.time_stamp
            size = reader.real_end or commit
            reader.commit = reader.entries = reader.read = reader.missed = 0
            reader.dirty = True
        self.lost_events = 0
        data = spare.data
        data[BUF_PAGE_HDR_SIZE + size:] = bytes(self.bsize - size)
        stored = False
        if missed and self.bsize - size >= MISSED_COUNT.size:
            MISSED_COUNT.pack_into(data, BUF_PAGE_HDR_SIZE + size, missed)
            stored = True
        encode_page_header(data, spare.time_stamp, encode_commit(
            size, missed_events=bool(missed), missed_stored=stored))
        return True

    def _next_data_event(self) -> tuple[BufferPage, int, int, int] | None:
        """``rb_buffer_peek`` plus ``ring_buffer_peek``'s padding loop.

        Time extends and padding before the next data event are consumed on
        the way, as the kernel's peek does, so ``read_stamp`` is that event's
        base.

        Returns:
            ``(reader page, offset, header word, array[0])`` of the event.
        """
        unpack = EVENT_HEADER_ARRAY0.unpack_from
        while True:
            reader = self._get_reader_page()
            if reader is None:
                return None
            off = BUF_PAGE_HDR_SIZE + reader.read
            header, array0 = unpack(reader.data, off)
            type_len = header & 31
            if type_len <= RINGBUF_TYPE_DATA_TYPE_LEN_MAX:
                return reader, off, header, array0
            if type_len == RINGBUF_TYPE_PADDING:
                length = array0 + 4
            else:
                length = RB_LEN_TIME_EXTEND
                self.read_stamp += (array0 << TS_SHIFT) + (header >> 5)
            reader.read += length
            self.read_bytes += length

    def peek(self) -> tuple[int, bytes] | None:
        """``ring_buffer_peek``: the next event's time stamp and body, not consumed."""
        found = self._next_data_event()
        if found is None:
            return None
        reader, off, header, array0 = found
        return self.read_stamp + (header >> 5), _event_body(reader, off, header, array0)[1]

    def consume(self) -> TraceRecord | None:
        """``ring_buffer_consume``: take the next event, with the events lost before it."""
        found = self._next_data_event()
        if found is None:
            return None
        reader, off, header, array0 = found
        length, body = _event_body(reader, off, header, array0)
        ts = self.read_stamp + (header >> 5)
        lost = self.lost_events
        self.lost_events = 0
        reader.read += length
        self.read_bytes += length
        self.read += 1
        self.read_stamp = ts
        return TraceRecord(self.cpu, ts, body, lost)

    def iterate(self) -> Iterator[TraceRecord]:
        """``ring_buffer_iter``: every unread event, oldest first, not consumed.

        Each page is copied when the iteration reaches it, so writes that
        land later in that page are not seen; a reset or sub-buffer size
        change ends the iteration (the kernel's iterator restarts on an empty
        buffer).
        """
        generation = self.generation
        cpu = self.cpu
        page = self.reader_page
        read = page.read
        stamp = self.read_stamp if read else page.time_stamp
        unpack = EVENT_HEADER_ARRAY0.unpack_from
        # Bounded by the page count: the reader page and the whole ring.
        for _ in range(self.nr_pages + 1):  # pragma: no branch
            commit = page.commit
            data = bytes(page.view[:BUF_PAGE_HDR_SIZE + commit])
            off = BUF_PAGE_HDR_SIZE + read
            end = BUF_PAGE_HDR_SIZE + commit
            while off < end:
                header, array0 = unpack(data, off)
                type_len = header & 31
                if type_len == RINGBUF_TYPE_PADDING:
                    off += array0 + 4
                elif type_len > RINGBUF_TYPE_DATA_TYPE_LEN_MAX:
                    stamp += (array0 << TS_SHIFT) + (header >> 5)
                    off += RB_LEN_TIME_EXTEND
                else:
                    stamp += header >> 5
                    if type_len:
                        stop = off + 4 + type_len * 4
                        body = data[off + 4:stop]
                    else:
                        stop = off + 4 + array0
                        body = data[off + 8:stop]
                    yield TraceRecord(cpu, stamp, body)
                    if self.generation != generation:
                        return
                    off = stop
            if page is self.tail_page or self.generation != generation:
                return
            page = self.head_page if page is self.reader_page else page.next
            read = 0
            stamp = page.time_stamp

    # -- polling ------------------------------------------------------------------

    def nr_dirty_pages(self) -> int:
        """``ring_buffer_nr_dirty_pages``: pages written and not yet read or lost."""
        # The reader may have swapped in a page the writer never left, and
        # removed pages count as lost: never below zero.
        return max(0, self.pages_touched - self.pages_lost - self.pages_read)

    def watermark_hit(self, full: int) -> bool:
        """``rb_watermark_hit``: is there data, and ``full`` percent of the ring?

        A page the writer is still on does not count, so a reader waiting
        for a percentage never wakes for the reader page alone.
        """
        if self.empty():
            return False
        if not full:
            return True
        if self.reader_page is self.tail_page:
            return False
        # full_hit(): the page the writer is on is never "dirty", so add it.
        return (self.nr_dirty_pages() + 1) * 100 >= full * self.nr_pages

    # -- memory mapping -----------------------------------------------------------

    def map(self, pgoff: int, nr_vma_pages: int, *, write: bool, execute: bool,
            shared: bool) -> MmapUpdate:
        """``ring_buffer_map``: map the meta page and sub-buffers (see RingBuffer.map)."""
        if write or execute or not shared:
            raise TracefsError(errno.EPERM, "trace buffers map shared and read-only")
        subbuf_pages = self.subbuf_size // PAGE_SIZE
        if subbuf_pages > 1 and pgoff % subbuf_pages:
            raise TracefsError(errno.EINVAL, "offset inside a sub-buffer")
        nr_pages = (self.nr_pages + 2) * subbuf_pages  # + reader, + meta
        if nr_pages <= pgoff or not nr_vma_pages or nr_vma_pages > nr_pages - pgoff:
            raise TracefsError(errno.EINVAL, "mapping beyond the buffer")
        if not self.user_mapped:
            # rb_setup_ids_meta_page(): the reader is 0, the ring follows
            # from the head; ids stay with their pages until unmapped.
            self._subbufs = [self.reader_page, *self.ring()]
            for page_id, page in enumerate(self._subbufs):
                page.id = page_id
            self.resize_disabled += 1
            self._update_meta_page()
        self.user_mapped += 1
        for page in self._subbufs:
            page.dirty = True
        return self.take_mmap_update()

    def unmap(self) -> None:
        """``ring_buffer_unmap``.

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        if not self.user_mapped:
            raise TracefsError(errno.ENODEV, "not mapped")
        self.user_mapped -= 1
        if not self.user_mapped:
            self._subbufs = []
            self._meta = b""
            self.resize_disabled -= 1

    def map_get_reader(self) -> MmapUpdate:
        """``ring_buffer_map_get_reader`` (``TRACE_MMAP_IOCTL_GET_READER``).

        If the reader page has unread events they are all marked read (the
        caller will read up to ``reader.read``); otherwise the next page is
        swapped in, flagged with the events lost before it, and marked read.
        The meta page changes here and nowhere else.

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        if not self.user_mapped:
            raise TracefsError(errno.ENODEV, "not mapped")
        while not self.empty():
            reader = self.reader_page
            if reader.read < reader.commit:
                self._advance(reader, reader.commit)
                break
            swapped = self._get_reader_page()
            assert swapped is not None  # not empty, and the old page is read
            reader = swapped
            missed = self.lost_events
            if missed and reader is not self.tail_page:
                if reader.real_end:
                    reader.commit = reader.real_end
                stored = self.bsize - reader.commit >= MISSED_COUNT.size
                if stored:
                    MISSED_COUNT.pack_into(reader.data, BUF_PAGE_HDR_SIZE + reader.commit, missed)
                reader.missed = encode_commit(0, missed_events=True, missed_stored=stored)
                reader.dirty = True
            self.lost_events = 0
        self._update_meta_page()
        return self.take_mmap_update()

    def _update_meta_page(self) -> None:
        """``rb_update_meta_page``: the counters as of now, for the mapping."""
        reader = self.reader_page
        meta = TRACE_BUFFER_META.pack(
            self.subbuf_size, TRACE_BUFFER_META.size, self.subbuf_size, self.nr_pages + 1,
            self.lost_events, reader.id, reader.read, 0,
            self.entries, self.overrun, self.read, 0, 0)
        # The meta page is a sub-buffer long since 6.11 (aligned mapping).
        self._meta = meta + bytes(self.subbuf_size - len(meta))

    def take_mmap_update(self) -> MmapUpdate:
        """The meta page and every mapped sub-buffer changed since the last update.

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        if not self.user_mapped:
            raise TracefsError(errno.ENODEV, "not mapped")
        stores = [(0, self._meta)]
        size = self.subbuf_size
        for page in self._subbufs:
            if page.dirty:
                page.dirty = False
                stores.append((size * (page.id + 1), page.render()))
        return MmapUpdate(stores=tuple(stores))

    def mmap_read(self, offset: int, size: int) -> bytes:
        """The mapping's bytes at a file offset (what a page fault would see).

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        if not self.user_mapped:
            raise TracefsError(errno.ENODEV, "not mapped")
        image = [self._meta] + [page.render() for page in self._subbufs]
        sub = self.subbuf_size
        out = bytearray()
        while size > 0 and offset // sub < len(image):
            chunk = image[offset // sub][offset % sub:offset % sub + size]
            out += chunk
            offset += len(chunk)
            size -= len(chunk)
        return bytes(out)

    # -- sizes ----------------------------------------------------------------------

    def check_resize(self, nr_pages: int, max_nr_pages: int) -> None:
        """Raise what ``ring_buffer_resize`` would for this CPU, change nothing.

        Raises:
            TracefsError: EBUSY while mapped or iterated, ENOMEM past the limit.
        """
        if self.resize_disabled:
            raise TracefsError(errno.EBUSY, "buffer is mapped or being read")
        if nr_pages > max_nr_pages:
            raise TracefsError(errno.ENOMEM, f"{nr_pages} pages exceed the limit")

    def resize(self, nr_pages: int) -> None:
        """``rb_update_pages``: add empty pages before the head, or drop pages after the tail.

        Dropped pages that held events count them as ``overrun`` (the next
        reader sees them as lost).
        """
        if nr_pages > self.nr_pages:
            # rb_insert_pages(): between the head and the page before it.
            new = [BufferPage(self.subbuf_size) for _ in range(nr_pages - self.nr_pages)]
            _link_ring(new)
            head = self.head_page
            first, last = new[0], new[-1]
            prev = head.prev
            prev.next = first
            first.prev = prev
            last.next = head
            head.prev = last
        elif nr_pages < self.nr_pages:
            # rb_remove_pages(): the pages after the tail (after the head when
            # the writer is on the reader page), i.e. the oldest ones.
            tail = self.tail_page
            if tail is self.reader_page:
                tail = tail.next
            page = tail
            head_removed = False
            for _ in range(self.nr_pages - nr_pages):
                page = page.next
                head_removed |= page is self.head_page
                if page.entries:
                    self.overrun += page.entries
                    self.entries_bytes -= page.commit
                    self.pages_lost += 1
            after = page.next
            tail.next = after
            after.prev = tail
            self.pages = after
            if head_removed:
                self.head_page = after
        self.nr_pages = nr_pages

    def set_subbuf_size(self, subbuf_size: int) -> None:
        """``ring_buffer_subbuf_order_set`` for this CPU: new, empty pages.

        The ring keeps its byte size (rounded up, at least two pages). The
        counters are left as they were, as the kernel leaves them.
        """
        nr_pages = max(2, -(-self.bsize * self.nr_pages // subbuf_data_size(subbuf_size)))
        self.subbuf_size = subbuf_size
        self.bsize = subbuf_data_size(subbuf_size)
        self.max_data_size = self.bsize - 8
        self.nr_pages = nr_pages
        self.free_page = None
        self._alloc_pages(nr_pages)
        self.generation += 1

    # -- reporting -----------------------------------------------------------------

    def oldest_event_ts(self) -> int:
        """``ring_buffer_oldest_event_ts``: the time stamp of the oldest page."""
        if self.tail_page is self.reader_page:
            return self.reader_page.time_stamp
        return self.head_page.time_stamp

    def statistics(self) -> CpuBufferStatistics:
        return CpuBufferStatistics(
            cpu=self.cpu, nr_pages=self.nr_pages, entries=self.entries_in_buffer(),
            overrun=self.overrun, commit_overrun=self.commit_overrun,
            bytes=self.entries_bytes - self.read_bytes,
            oldest_event_ts=self.oldest_event_ts(), dropped_events=self.dropped_events,
            read_events=self.read, entries_written=self.entries,
            pages_touched=self.pages_touched, pages_lost=self.pages_lost,
            pages_read=self.pages_read, lost_events=self.lost_events,
            mapped=self.user_mapped, resize_disabled=self.resize_disabled,
            allocated_pages=sum(page.allocated for page in (*self.ring(), self.reader_page)))


def _by_ts(record: TraceRecord) -> int:
    return record.ts


class TraceIterator:
    """A non-consuming read of every CPU's events in time order (``trace``).

    While open it keeps its CPU buffers from being resized (EBUSY), as the
    kernel's ``ring_buffer_read_prepare`` does; :meth:`close` releases them.
    Equal time stamps come out lowest CPU first (``__find_next_entry``).
    """

    def __init__(self, cpu_buffers: tuple[CpuBuffer, ...]) -> None:
        self._cpu_buffers = cpu_buffers
        for cpu_buffer in cpu_buffers:
            cpu_buffer.resize_disabled += 1
        records = [cb.iterate() for cb in cpu_buffers]
        self._merged: Iterator[TraceRecord] = (
            records[0] if len(records) == 1 else heapq.merge(*records, key=_by_ts))
        self._closed = False

    def __iter__(self) -> Iterator[TraceRecord]:
        return self._merged

    def __next__(self) -> TraceRecord:
        return next(self._merged)

    def __enter__(self) -> TraceIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """``ring_buffer_read_finish``: allow resizing again (idempotent)."""
        if not self._closed:
            self._closed = True
            for cpu_buffer in self._cpu_buffers:
                cpu_buffer.resize_disabled -= 1


class TracePipeRawReader:
    """One open ``per_cpu/cpuN/trace_pipe_raw`` (``struct ftrace_buffer_info``).

    Holds the spare page the last ring read filled and how much of it was
    handed out, so reads shorter than a sub-buffer return it piece by piece.
    :meth:`close` gives the spare back to the CPU buffer's pool.
    """

    def __init__(self, buffer: RingBuffer, cpu: int) -> None:
        self._buffer = buffer
        self.cpu = cpu
        self._spare: ReadPage | None = None
        self._read = _NO_PAGE

    def read_nowait(self, count: int) -> bytes:
        """``tracing_buffers_read``: at most one sub-buffer.

        A read smaller than a sub-buffer builds a page holding only the
        events that fit ``count - 16`` bytes and hands it out in
        ``count``-sized pieces (the zero tail included) before the next page
        is taken.

        Returns:
            The bytes read; empty for ``count == 0`` and when the buffer has
            data but not even one event fits ``count`` (the kernel returns 0).

        Raises:
            WouldBlock: the buffer is empty (EAGAIN for O_NONBLOCK).
        """
        if not count:
            return b""
        cpu_buffer = self._buffer.cpus[self.cpu]
        page_size = cpu_buffer.subbuf_size
        spare = self._spare
        if spare is not None and len(spare.data) != page_size:
            cpu_buffer.free_read_page(spare)
            spare = None
            self._read = _NO_PAGE
        if spare is None:
            spare = self._spare = cpu_buffer.alloc_read_page()
        if self._read >= page_size:
            if not cpu_buffer.read_page(spare, count):
                if cpu_buffer.empty():
                    raise WouldBlock("trace_pipe_raw is empty")
                return b""
            self._read = 0
        size = min(page_size - self._read, count)
        chunk = bytes(spare.view[self._read:self._read + size])
        self._read += size
        return chunk

    def close(self) -> None:
        """Release: the spare goes back to the pool."""
        if self._spare is not None:
            self._buffer.cpus[self.cpu].free_read_page(self._spare)
            self._spare = None
            self._read = _NO_PAGE


class RingBuffer:
    """``struct trace_buffer``: the per-CPU buffers of one trace array.

    Args:
        nr_cpus: CPUs (``per_cpu/cpu0`` .. ``cpuN-1``).
        clock: what events are stamped with (``trace_clock``).
        subbuf_size: sub-buffer size, ``PAGE_SIZE << order``.
        trace_buf_size: bytes per CPU once expanded (``trace_buf_size``).
        expanded: False for the top-level buffer at boot: it starts at the
            minimum (two pages) and shows ``N (expanded: M)`` until
            :meth:`expand` or a resize.
        overwrite: overwrite the oldest events when full (``options/overwrite``).
        max_nr_pages: sub-buffers per CPU beyond which resizes say ENOMEM.
    """

    def __init__(self, nr_cpus: int, clock: TraceClock, *, subbuf_size: int = PAGE_SIZE,
                 trace_buf_size: int = TRACE_BUF_SIZE_DEFAULT, expanded: bool = True,
                 overwrite: bool = True, max_nr_pages: int = DEFAULT_MAX_NR_PAGES) -> None:
        self.trace_buf_size = trace_buf_size
        self.expanded = expanded
        self.max_nr_pages = max_nr_pages
        self._clock = clock
        self._overwrite = overwrite
        self._record_on = True
        #: ``array_buffer.time_start``: the clock at the last full reset.
        self.time_start = 0
        nr_pages = self._nr_pages_for(subbuf_size, trace_buf_size if expanded else 1)
        self.cpus = tuple(CpuBuffer(cpu, nr_pages, subbuf_size, clock.read, overwrite)
                          for cpu in range(nr_cpus))

    @staticmethod
    def _nr_pages_for(subbuf_size: int, size: int) -> int:
        # ring_buffer_resize(): DIV_ROUND_UP(size, subbuf data), at least 2.
        # The rounding is unsigned long arithmetic: a size within a sub-buffer
        # of 2**64 wraps to 0 pages, hence 2 (buffer_size_kb=ULONG_MAX works).
        data = subbuf_data_size(subbuf_size)
        return max(2, ((size + data - 1) & _U64) // data)

    # -- recording ------------------------------------------------------------------

    @property
    def subbuf_size(self) -> int:
        return self.cpus[0].subbuf_size

    @property
    def clock(self) -> TraceClock:
        return self._clock

    def set_clock(self, clock: TraceClock) -> None:
        """``tracing_set_clock``: switch clocks and reset, even to the same clock."""
        self._clock = clock
        for cpu_buffer in self.cpus:
            cpu_buffer.read_clock = clock.read
        self.reset()

    @property
    def overwrite(self) -> bool:
        return self._overwrite

    @overwrite.setter
    def overwrite(self, value: bool) -> None:
        """``ring_buffer_change_overwrite``."""
        self._overwrite = value
        for cpu_buffer in self.cpus:
            cpu_buffer.overwrite = value

    def record_on(self) -> None:
        """``ring_buffer_record_on`` (``tracing_on`` 1)."""
        self._record_on = True

    def record_off(self) -> None:
        """``ring_buffer_record_off`` (``tracing_on`` 0): writes are refused."""
        self._record_on = False

    def record_is_on(self) -> bool:
        return self._record_on

    def write(self, cpu: int, record: bytes, accept: Accept | None = None) -> bool:
        """Record one trace entry on ``cpu``, stamped with the clock now.

        Args:
            cpu: the writer's CPU.
            record: the complete entry: 8-byte common header and fields.
            accept: see :meth:`CpuBuffer.write`; asked only if the entry
                was reserved.

        Returns:
            False if it was not recorded: recording off, larger than a
            sub-buffer can take, (overwrite off) the buffer full, which
            ``dropped events`` counts, or refused by ``accept``.
        """
        if not self._record_on:
            return False
        return self.cpus[cpu].write(record, accept=accept)

    def take_in(self, cpu: int, staged: memoryview, at: int, copy_len: int, length: int,
                stamp: int, previous: int, event_length: int) -> bool:
        """Record an entry the native fast path staged (see :meth:`CpuBuffer.take_in`).

        The fast path answered the write while recording was on (it checks
        the same state the engine published to it), so the record is kept
        even if ``tracing_on`` went to 0 since: a write that raced with the
        switch, as in the kernel. Copies the event once, from the staging
        memory into the page.
        """
        return self.cpus[cpu].take_in(staged, at, copy_len, length, stamp, previous,
                                      event_length)

    def reset(self, cpu: int | None = None) -> None:
        """Clear one CPU (``tracing_reset_cpu``) or all (``tracing_reset_online_cpus``).

        A full reset reads the clock for ``time_start`` (the counter clock
        advances).
        """
        if cpu is not None:
            self.cpus[cpu].reset()
            return
        self.time_start = self._clock.read()
        for cpu_buffer in self.cpus:
            cpu_buffer.reset()

    # -- reading ----------------------------------------------------------------------

    def empty(self, cpu: int | None = None) -> bool:
        """``ring_buffer_empty``/``ring_buffer_empty_cpu``: nothing left to read."""
        if cpu is not None:
            return self.cpus[cpu].empty()
        return all(cpu_buffer.empty() for cpu_buffer in self.cpus)

    def watermark_hit(self, cpu: int | None, full: int) -> bool:
        """Would ``poll`` on ``trace_pipe_raw`` say readable (``rb_watermark_hit``)?

        Args:
            cpu: the CPU, or None for all CPUs (any data will do).
            full: ``buffer_percent``; 0 means any data.
        """
        if cpu is None:
            return not self.empty()
        return self.cpus[cpu].watermark_hit(full)

    def read_page_nowait(self, cpu: int, size: int, full: bool = False) -> bytes:
        """One sub-buffer for a ``size``-byte read (``ring_buffer_read_page``).

        Like one read of a fresh ``trace_pipe_raw`` (see :meth:`CpuBuffer.read_page`);
        :class:`TracePipeRawReader` adds the
        piecewise hand-out of reads shorter than a page.

        Args:
            cpu: the CPU buffer.
            size: the reader's buffer size.
            full: only take a page the writer has left (splice).

        Returns:
            A whole sub-buffer, or empty bytes when there is data but none of
            it fits ``size``.

        Raises:
            WouldBlock: nothing to read (with ``full``: no complete page).
        """
        cpu_buffer = self.cpus[cpu]
        spare = cpu_buffer.alloc_read_page()
        done = cpu_buffer.read_page(spare, size, full)
        page = bytes(spare.data)
        cpu_buffer.free_read_page(spare)
        if not done:
            if full or cpu_buffer.empty():
                raise WouldBlock("no sub-buffer to read")
            return b""
        return page

    def open_raw_reader(self, cpu: int) -> TracePipeRawReader:
        """The state of one open ``trace_pipe_raw``."""
        return TracePipeRawReader(self, cpu)

    def _peek_cpu(self, cpu: int | None) -> tuple[int, tuple[int, bytes]] | None:
        cpus = range(len(self.cpus)) if cpu is None else (cpu,)
        best: tuple[int, tuple[int, bytes]] | None = None
        for c in cpus:
            peeked = self.cpus[c].peek()
            if peeked is not None and (best is None or peeked[0] < best[1][0]):
                best = (c, peeked)
        return best

    def peek(self, cpu: int | None = None) -> TraceRecord | None:
        """The event a consuming read would return next, left in place.

        Args:
            cpu: one CPU, or None for the oldest event of all CPUs.
        """
        best = self._peek_cpu(cpu)
        if best is None:
            return None
        c, (ts, data) = best
        return TraceRecord(cpu=c, ts=ts, data=data, lost_events=self.cpus[c].lost_events)

    def consume_nowait(self, cpu: int | None = None) -> TraceRecord:
        """Take the next event (``trace_pipe``: oldest of all CPUs, or of one).

        Raises:
            WouldBlock: no event (EAGAIN for O_NONBLOCK).
        """
        if cpu is None:
            best = self._peek_cpu(None)
            if best is None:
                raise WouldBlock("no events")
            cpu = best[0]
        record = self.cpus[cpu].consume()
        if record is None:
            raise WouldBlock("no events")
        return record

    def open_iterator(self, cpu: int | None = None) -> TraceIterator:
        """A non-consuming, time-ordered read of one CPU or all (``trace``)."""
        return TraceIterator(self.cpus if cpu is None else (self.cpus[cpu],))

    def get_total_entries(self) -> TotalEntries:
        """``get_total_entries``: unread entries, and those plus the overwritten ones."""
        entries = sum(cb.entries_in_buffer() for cb in self.cpus)
        return TotalEntries(entries=entries,
                            total=entries + sum(cb.overrun for cb in self.cpus))

    # -- sizes ---------------------------------------------------------------------------

    def resize(self, size: int, cpu: int | None = None) -> None:
        """``__tracing_resize_ring_buffer``: ``size`` bytes per CPU, kept or trimmed.

        Events survive a resize; shrinking drops the oldest pages and counts
        their events as ``overrun``. The buffer counts as expanded from the
        first attempt on, even one that fails.

        Raises:
            TracefsError: EBUSY while a CPU concerned is mapped or iterated,
                ENOMEM past ``max_nr_pages``.
        """
        self.expanded = True
        nr_pages = self._nr_pages_for(self.subbuf_size, size)
        targets = self.cpus if cpu is None else (self.cpus[cpu],)
        if cpu is not None and targets[0].nr_pages == nr_pages:
            targets[0].entries_size = targets[0].bsize * nr_pages
            return
        for cpu_buffer in targets:
            cpu_buffer.check_resize(nr_pages, self.max_nr_pages)
        for cpu_buffer in targets:
            cpu_buffer.resize(nr_pages)
            cpu_buffer.entries_size = cpu_buffer.bsize * nr_pages

    def write_buffer_size_kb(self, data: bytes, cpu: int | None = None) -> None:
        """A write to ``buffer_size_kb`` (``tracing_entries_write``).

        Raises:
            TracefsError: EINVAL for 0 or anything but a decimal number;
                EBUSY/ENOMEM as :meth:`resize`.
        """
        kb = kstrtoul_from_user(data, 10)
        if not kb:
            raise TracefsError(errno.EINVAL, "buffer_size_kb must be at least 1")
        self.resize((kb << 10) & _U64, cpu)

    def set_subbuf_order(self, order: int) -> None:
        """``ring_buffer_subbuf_order_set``: sub-buffers of ``PAGE_SIZE << order``.

        Every CPU gets new, empty pages holding at least the same bytes; the
        counters stay as they were and ``buffer_size_kb`` keeps showing the
        old size, as on the kernel.

        Raises:
            TracefsError: EINVAL outside 0..7, EBUSY while mapped, ENOMEM past
                ``max_nr_pages``.
        """
        if not 0 <= order <= MAX_SUBBUF_ORDER:
            raise TracefsError(errno.EINVAL, "sub-buffer order out of range")
        subbuf_size = PAGE_SIZE << order
        if subbuf_size == self.subbuf_size:
            return
        for cpu_buffer in self.cpus:
            if cpu_buffer.user_mapped:
                raise TracefsError(errno.EBUSY, "buffer is mapped")
            nr_pages = -(-cpu_buffer.bsize * cpu_buffer.nr_pages // subbuf_data_size(subbuf_size))
            if nr_pages > self.max_nr_pages:
                raise TracefsError(errno.ENOMEM, f"{nr_pages} pages exceed the limit")
        for cpu_buffer in self.cpus:
            cpu_buffer.set_subbuf_size(subbuf_size)

    def render_buffer_size_kb(self, cpu: int | None = None) -> bytes:
        """``buffer_size_kb``: KiB per CPU, ``X`` if they differ (``tracing_entries_read``)."""
        if cpu is not None:
            return f"{self.cpus[cpu].entries_size >> 10}\n".encode()
        sizes = {cb.entries_size for cb in self.cpus}
        if len(sizes) != 1:
            return b"X\n"
        size = sizes.pop() >> 10
        if not self.expanded:
            return f"{size} (expanded: {self.trace_buf_size >> 10})\n".encode()
        return f"{size}\n".encode()

    def render_buffer_total_size_kb(self) -> bytes:
        """``buffer_total_size_kb`` (``tracing_total_entries_read``)."""
        size = sum(cb.entries_size >> 10 for cb in self.cpus)
        if not self.expanded:
            expanded = (self.trace_buf_size >> 10) * len(self.cpus)
            return f"{size} (expanded: {expanded})\n".encode()
        return f"{size}\n".encode()

    def render_stats(self, cpu: int) -> bytes:
        """``per_cpu/cpuN/stats`` (``tracing_stats_read``); reads the clock for ``now ts``."""
        cpu_buffer = self.cpus[cpu]
        in_ns = self._clock.in_ns
        oldest = format_ts(cpu_buffer.oldest_event_ts(), in_ns)
        now = format_ts(self._clock.read(), in_ns)
        return (f"entries: {cpu_buffer.entries_in_buffer()}\n"
                f"overrun: {cpu_buffer.overrun}\n"
                f"commit overrun: {cpu_buffer.commit_overrun}\n"
                f"bytes: {cpu_buffer.entries_bytes - cpu_buffer.read_bytes}\n"
                f"oldest event ts: {oldest}\n"
                f"now ts: {now}\n"
                f"dropped events: {cpu_buffer.dropped_events}\n"
                f"read events: {cpu_buffer.read}\n").encode()

    # -- memory mapping ---------------------------------------------------------------

    def map(self, cpu: int, pgoff: int, nr_vma_pages: int, *, write: bool = False,
            execute: bool = False, shared: bool = True) -> MmapUpdate:
        """``ring_buffer_map``: a client maps ``trace_pipe_raw`` of ``cpu``.

        The first mapping numbers the sub-buffers (reader page 0, then the
        ring from the head) and fills the meta page; every mapping counts,
        and the buffer cannot be resized until the last one is gone.

        Args:
            cpu: the CPU buffer.
            pgoff: mmap offset in system pages (0 is the meta page).
            nr_vma_pages: mapping length in system pages.
            write: a writable mapping was asked for.
            execute: an executable mapping was asked for.
            shared: MAP_SHARED.

        Returns:
            The whole mapping's bytes, for the adapter to store.

        Raises:
            TracefsError: EPERM for writable, executable or private mappings;
                EINVAL for a range outside the buffer or an offset inside a
                sub-buffer.
        """
        return self.cpus[cpu].map(pgoff, nr_vma_pages, write=write, execute=execute,
                                  shared=shared)

    def unmap(self, cpu: int) -> None:
        """``ring_buffer_unmap``: one mapping of ``cpu`` went away.

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        self.cpus[cpu].unmap()

    def map_get_reader(self, cpu: int) -> MmapUpdate:
        """``TRACE_MMAP_IOCTL_GET_READER`` on ``cpu``; see :meth:`CpuBuffer.map_get_reader`.

        Returns:
            The meta page and the sub-buffers changed since the last update.

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        return self.cpus[cpu].map_get_reader()

    def mmap_read(self, cpu: int, offset: int, size: int) -> bytes:
        """The bytes of ``cpu``'s mapping at a file offset.

        Raises:
            TracefsError: ENODEV if not mapped.
        """
        return self.cpus[cpu].mmap_read(offset, size)

    def statistics(self) -> RingBufferStatistics:
        return RingBufferStatistics(
            nr_cpus=len(self.cpus), subbuf_size=self.subbuf_size, clock=self._clock.name,
            overwrite=self._overwrite, record_on=self._record_on, expanded=self.expanded,
            cpus=tuple(cb.statistics() for cb in self.cpus))
