"""The text trace files: ``trace``, ``trace_pipe`` and their ``per_cpu/cpuN`` twins.

Rules:
  * A line is what ``print_trace_line`` prints with the default options:
    ``CPU:%d [LOST %lu EVENTS]`` first if events were lost, the context
    ``"%16s-%-7d [%03d] "`` plus five flag characters and the time stamp,
    then the event's own text (:func:`print_event`), or
    ``Unknown type %d`` for an id no event has. Everything is written into a
    :class:`~._print_fields.TraceSeq`, so over-long lines are cut like the
    kernel's (an event that cannot fit ends in ``[LINE TOO BIG]`` only when
    that marker still fits; measured on 6.18: it usually does not).
  * Speed without a second rule: a line that fits is written whole, built by
    one format from pieces compiled per event and kept for the read
    (:class:`LinePrinter`); only a line that does not fit goes write by
    write. What fits whole is, by the sequence's rule, its writes joined,
    and tests check that the two ways agree.
  * ``trace`` (:class:`TraceFile`) is a seq_file over a non-consuming
    iterator: a header with ``entries-in-buffer/entries-written`` for the
    whole buffer (also in ``per_cpu/cpuN/trace``), then one record per line;
    each read returns the whole lines that fit the seq_file buffer (4 KiB,
    doubled for a line that does not fit), like ``seq_read_iter``, so read
    sizes match the kernel's. Opening it with O_TRUNC for writing clears the
    buffer (one CPU for ``per_cpu/cpuN/trace``); writes are accepted and
    ignored.
  * ``trace_pipe`` (:class:`TracePipe`) consumes: each read formats whole
    lines until the read size is reached, consuming each record as it is
    formatted, and keeps what did not fit for the next reads
    (``tracing_read_pipe``). Empty means :class:`~._errors.WouldBlock`. One
    reader at a time per CPU (EBUSY), as since 6.6.
  * The event's text (:func:`print_event`): ftrace's own events by their
    fixed type, an event kind with its own ``print_trace`` (synthetic
    events, ``TraceEvent.print_trace``), else the fields printer user events use.

Kernel: kernel/trace/trace.c (``s_show``, ``s_start``, ``s_next``,
``print_trace_line``, ``print_trace_fmt``, ``test_cpu_buff_start``,
``print_func_help_header_irq``, ``print_event_info``, ``tracing_open``,
``__tracing_open``, ``tracing_open_pipe``, ``open_pipe_on_cpu``,
``tracing_read_pipe``), kernel/trace/trace_output.c (``trace_print_context``,
``trace_print_lat_fmt``, ``trace_print_time``, ``seq_print_ip_sym``,
``trace_print_print``, ``trace_raw_data``), fs/seq_file.c
(``seq_read_iter``), Linux 6.18.
"""

from __future__ import annotations

import errno
import os  # open-flag constants only
import struct
from typing import Callable, Iterator

import msgspec

from ._clock import ns2usecs
from ._errors import TracefsError, WouldBlock
from ._events import EventTable, TraceEvent
from ._field import TRACE_ENTRY
from ._ftrace_events import TRACE_PRINT, TRACE_RAW_DATA, FtraceEvent
from ._page import PAGE_SIZE
from ._print_fields import (TRACE_SEQ_BUFFER_SIZE, FieldsPrinter, TraceSeq,
                           print_event_fields)
from ._ringbuf import RingBuffer, TraceIterator, TraceRecord
from ._task import Task
from ._trace_array import SavedCmdlines, TraceArray
from ._tree import (POLLIN, POLLRDNORM, TRACE_MODE_READ, TRACE_MODE_WRITE, File, FileKind,
                    OpenFile)

#: The only tracer there is.
TRACER_NAME = "nop"

# enum trace_flag_type (include/linux/trace_events.h, 6.13+: bit 1 became
# NEED_RESCHED_LAZY when IRQS_NOSUPPORT went away).
TRACE_FLAG_IRQS_OFF = 0x01
TRACE_FLAG_NEED_RESCHED_LAZY = 0x02
TRACE_FLAG_NEED_RESCHED = 0x04
TRACE_FLAG_HARDIRQ = 0x08
TRACE_FLAG_SOFTIRQ = 0x10
TRACE_FLAG_PREEMPT_RESCHED = 0x20
TRACE_FLAG_NMI = 0x40
TRACE_FLAG_BH_OFF = 0x80

# trace_print_lat_fmt()'s need-resched column, by the three resched bits.
_NEED_RESCHED_CHAR = {
    TRACE_FLAG_NEED_RESCHED | TRACE_FLAG_NEED_RESCHED_LAZY | TRACE_FLAG_PREEMPT_RESCHED: "B",
    TRACE_FLAG_NEED_RESCHED | TRACE_FLAG_PREEMPT_RESCHED: "N",
    TRACE_FLAG_NEED_RESCHED_LAZY | TRACE_FLAG_PREEMPT_RESCHED: "L",
    TRACE_FLAG_NEED_RESCHED | TRACE_FLAG_NEED_RESCHED_LAZY: "b",
    TRACE_FLAG_NEED_RESCHED: "n",
    TRACE_FLAG_NEED_RESCHED_LAZY: "l",
    TRACE_FLAG_PREEMPT_RESCHED: "p",
}
_RESCHED_BITS = TRACE_FLAG_NEED_RESCHED | TRACE_FLAG_NEED_RESCHED_LAZY | TRACE_FLAG_PREEMPT_RESCHED

#: The name of a kernel address as ``%ps`` would print it, or None if unknown.
SymbolLookup = Callable[[int], "str | None"]
#: ``trace_event_functions.trace``: writes an entry's text after the context.
EventPrinter = Callable[[TraceSeq, TraceEvent, bytes, SymbolLookup], None]
#: The same, compiled for one event: the entry's whole text (see :func:`event_text`).
EventText = Callable[[bytes], "str | None"]

_IP = struct.Struct("<Q")
_ID = struct.Struct("<I")


class OutputOptions(msgspec.Struct, frozen=True):
    """The ``trace_options`` that change the text (defaults as at boot)."""

    #: ``irq-info``: the five flag columns and their help block.
    irq_info: bool = True
    #: ``record-tgid``: a ``(%7d)`` tgid column.
    record_tgid: bool = False


DEFAULT_OPTIONS = OutputOptions()
#: ``tr->buffer_percent`` of a new trace array.
DEFAULT_BUFFER_PERCENT = 50


#: The one kernel symbol the engine's records name: ``trace_marker``'s writer.
MARKER_SYMBOL = "tracing_mark_write"


def marker_symbols(marker_ip: int) -> SymbolLookup:
    """Names :data:`MARKER_SYMBOL` at ``marker_ip``."""
    return lambda ip: MARKER_SYMBOL if ip == marker_ip else None


# -- event printers ---------------------------------------------------------------------


def _print_entry_pieces(data: bytes, ksym: SymbolLookup) -> tuple[str, str]:
    """``trace_print_print``'s two writes: the writer's ip, then ``: <buf up to its NUL>``.

    ``seq_print_ip_sym`` prints ``0`` for ip 0 before any lookup; we look up
    first, because our marker records carry 0 when the host hides kallsyms
    and must still read ``tracing_mark_write``.
    """
    (ip,) = _IP.unpack_from(data, TRACE_ENTRY.size)
    name = ksym(ip)
    where = name if name else "0" if ip == 0 else f"0x{ip:08x}"
    buf = data[TRACE_ENTRY.size + _IP.size:]
    nul = buf.find(0)
    return where, ": " + (buf if nul < 0 else buf[:nul]).decode("latin-1")


def print_print_entry(seq: TraceSeq, event: TraceEvent, data: bytes, ksym: SymbolLookup) -> None:
    """``trace_print_print``: ``tracing_mark_write: <buf up to its NUL>``."""
    for piece in _print_entry_pieces(data, ksym):
        seq.puts(piece)


def print_raw_data(seq: TraceSeq, event: TraceEvent, data: bytes, ksym: SymbolLookup) -> None:
    """``trace_raw_data``: ``# <id> buf:`` and every byte to the event's end.

    The bytes run to ``iter->ent_size``, so the padding to 4 bytes shows.
    """
    (raw_id,) = _ID.unpack_from(data, TRACE_ENTRY.size)
    seq.puts(f"# {raw_id:x} buf:")
    for byte in data[TRACE_ENTRY.size + _ID.size:]:
        seq.puts(f" {byte:02x}")
    seq.puts("\n")


def _raw_data_text(data: bytes) -> str:
    """:func:`print_raw_data`'s writes, joined."""
    (raw_id,) = _ID.unpack_from(data, TRACE_ENTRY.size)
    buf = data[TRACE_ENTRY.size + _ID.size:]
    return f"# {raw_id:x} buf:" + (" " + buf.hex(" ") if buf else "") + "\n"


#: ftrace's own events print by their fixed type (register_trace_event()).
_FTRACE_PRINTERS: dict[int, EventPrinter] = {
    TRACE_PRINT: print_print_entry,
    TRACE_RAW_DATA: print_raw_data,
}


def print_event(seq: TraceSeq, event: TraceEvent, data: bytes, ksym: SymbolLookup) -> None:
    """``event->funcs->trace``: ftrace's printers by type, an event's own, or its fields.

    An event's own ``print_trace`` text goes in as one piece: if it does not
    fit, the line ends in ``[LINE TOO BIG]`` instead of being cut mid-way.
    """
    if isinstance(event, FtraceEvent) and event.id in _FTRACE_PRINTERS:
        _FTRACE_PRINTERS[event.id](seq, event, data, ksym)
    elif event.print_trace is not None:
        seq.puts(event.print_trace(data))
    else:
        # user_event_print_trace()
        print_event_fields(seq, event.name, event.fields, data)


def _unknown_type_text(type_: int) -> EventText:
    """The text of records whose id no event has."""
    text = f"Unknown type {type_}\n"
    return lambda data: text


def event_text(event: TraceEvent, ksym: SymbolLookup) -> EventText:
    """:func:`print_event` for one event, as a function of the record: its writes joined.

    The function returns None where only the piecewise printer can say what
    is printed (a record shorter than the event's fields).
    """
    if isinstance(event, FtraceEvent) and event.id == TRACE_PRINT:
        return lambda data: "".join(_print_entry_pieces(data, ksym))
    if isinstance(event, FtraceEvent) and event.id == TRACE_RAW_DATA:
        return _raw_data_text
    if event.print_trace is not None:
        return event.print_trace
    return FieldsPrinter(event.name, event.fields).text


# -- lines --------------------------------------------------------------------------------


def lat_fmt(flags: int, preempt_count: int) -> str:
    """``trace_print_lat_fmt``: irqs, need-resched, hard/softirq, preempt, migrate."""
    nmi = flags & TRACE_FLAG_NMI
    hardirq = flags & TRACE_FLAG_HARDIRQ
    softirq = flags & TRACE_FLAG_SOFTIRQ
    bh_off = flags & TRACE_FLAG_BH_OFF
    irqs_off = flags & TRACE_FLAG_IRQS_OFF
    irqs = "D" if irqs_off and bh_off else "d" if irqs_off else "b" if bh_off else "."
    resched = _NEED_RESCHED_CHAR.get(flags & _RESCHED_BITS, ".")
    context = ("Z" if nmi and hardirq else "z" if nmi else "H" if hardirq and softirq
               else "h" if hardirq else "s" if softirq else ".")
    depth = f"{preempt_count & 0xF:x}" if preempt_count & 0xF else "."
    migrate = f"{preempt_count >> 4:x}" if preempt_count & 0xF0 else "."
    return irqs + resched + context + depth + migrate


def print_time(ts: int, in_ns: bool) -> str:
    """``trace_print_time``: `` %5lu.%06lu`` seconds for ns clocks, `` %12llu`` raw."""
    if in_ns:
        usecs = ns2usecs(ts)
        return f" {usecs // 1_000_000:5d}.{usecs % 1_000_000:06d}"
    return f" {ts:12d}"


class LinePrinter:
    """What one open text file needs to print lines (a ``trace_iterator``).

    A line is built whole (:meth:`line`) and written in one piece where it
    fits; only a line that does not fit is written piece by piece
    (:meth:`print_pieces`), so that it is cut where the kernel cuts it.

    Within one read nothing changes the options, comms, tgids or events, so
    :meth:`start_read` takes the options once and the head of a line (its
    event's text function and the context before the time stamp) is made
    once per CPU and record header (type, flags, preempt count, pid) and
    kept until the next read. Each event's text function is compiled once
    (:func:`event_text`).

    Args:
        events: the event table ids resolve in.
        cmdlines: saved comms and tgids.
        in_ns: the clock's ``in_ns`` when the file was opened
            (``TRACE_FILE_TIME_IN_NS``).
        options: the current ``trace_options``.
        ksym: kernel symbol names.
    """

    def __init__(self, events: EventTable, cmdlines: SavedCmdlines, *, in_ns: bool,
                 options: Callable[[], OutputOptions], ksym: SymbolLookup) -> None:
        self.events = events
        self.cmdlines = cmdlines
        self.in_ns = in_ns
        self.options = options
        self.ksym = ksym
        self._texts: dict[TraceEvent, EventText] = {}
        self._read_options = options()
        #: This read's line heads by (cpu, the record's 8-byte header).
        self._heads: dict[tuple[int, bytes], tuple[EventText, str]] = {}
        #: The last whole second and its text (`` %5lu.``).
        self._secs = (-1, "")

    def start_read(self) -> None:
        """A read begins: the options as they are now, no line heads kept."""
        self._read_options = self.options()
        self._heads = {}

    def line(self, record: TraceRecord, lost_events: int = 0) -> str | None:
        """Everything :meth:`print_pieces` writes for ``record``, joined.

        Returns:
            None where only the piecewise printer knows the text (a record
            shorter than its event's fields).
        """
        data = record.data
        head = self._heads.get((record.cpu, data[:8])) or self._head(record.cpu, data)
        text = head[0](data)
        if text is None:
            return None
        ts = record.ts
        if self.in_ns:
            usecs = (ts + 500) // 1000  # ns2usecs()
            secs = usecs // 1_000_000
            if secs != self._secs[0]:
                self._secs = (secs, f" {secs:5d}.")
            line = f"{head[1]}{self._secs[1]}{usecs % 1_000_000:06d}: {text}"
        else:
            line = f"{head[1]} {ts:12d}: {text}"
        if lost_events:
            return f"CPU:{record.cpu} [LOST {lost_events} EVENTS]\n{line}"
        return line

    def _head(self, cpu: int, data: bytes) -> tuple[EventText, str]:
        """The event's text function and ``trace_print_context`` up to the time."""
        type_, flags, preempt_count, pid = TRACE_ENTRY.unpack_from(data)
        event = self.events.by_id(type_)
        if event is None:
            text = _unknown_type_text(type_)
        elif event in self._texts:
            text = self._texts[event]
        else:
            text = self._texts[event] = event_text(event, self.ksym)
        options = self._read_options
        context = f"{self.cmdlines.comm(pid):>16}-{pid:<7d} "
        if options.record_tgid:
            context += f"({self.cmdlines.tgids.get(pid, 0) or '-------':>7}) "
        context += f"[{cpu:03d}] "
        if options.irq_info:
            context += lat_fmt(flags, preempt_count)
        head = self._heads[(cpu, data[:8])] = (text, context)
        return head

    def print_line(self, seq: TraceSeq, record: TraceRecord, lost_events: int = 0) -> None:
        """``print_trace_line`` with the default output format."""
        line = self.line(record, lost_events)
        if line is not None and seq.len + len(line) < TRACE_SEQ_BUFFER_SIZE:
            seq.puts(line)  # it fits whole, so every piece of it fits
        else:
            self.print_pieces(seq, record, lost_events)

    def print_pieces(self, seq: TraceSeq, record: TraceRecord, lost_events: int = 0) -> None:
        """:meth:`print_line` write by write, as the kernel writes it (and cuts it)."""
        if lost_events:
            seq.puts(f"CPU:{record.cpu} [LOST {lost_events} EVENTS]\n")
        data = record.data
        type_, flags, preempt_count, pid = TRACE_ENTRY.unpack_from(data)
        options = self._read_options
        # trace_print_context()
        seq.puts(f"{self.cmdlines.comm(pid):>16}-{pid:<7d} ")
        if options.record_tgid:
            tgid = self.cmdlines.tgids.get(pid, 0)
            seq.puts(f"({tgid:7d}) " if tgid else "(-------) ")
        seq.puts(f"[{record.cpu:03d}] ")
        if options.irq_info:
            seq.puts(lat_fmt(flags, preempt_count))
        seq.puts(print_time(record.ts, self.in_ns))
        seq.puts(": ")
        if seq.full:
            return
        event = self.events.by_id(type_)
        if event is None:
            seq.puts(f"Unknown type {type_}\n")
            return
        print_event(seq, event, data, self.ksym)


def render_header(totals: tuple[int, int], nr_cpus: int, options: OutputOptions) -> str:
    """The ``trace`` header: tracer, entry counts, the column help.

    ``print_func_help_header_irq`` (or ``print_func_help_header`` without
    ``irq-info``); ``record-tgid`` moves the help block 10 columns right.
    """
    entries, total = totals
    text = (f"# tracer: {TRACER_NAME}\n#\n"
            f"# entries-in-buffer/entries-written: {entries}/{total}   #P:{nr_cpus}\n#\n")
    tgid = options.record_tgid
    if not options.irq_info:
        title, bar = ("   TGID   ", "     |    ") if tgid else ("", "")
        return text + (f"#           TASK-PID    {title} CPU#     TIMESTAMP  FUNCTION\n"
                       f"#              | |      {bar}   |         |         |\n")
    pad = " " * (12 if tgid else 2)
    tgid_title, tgid_bar = ("     TGID   ", "       |    ") if tgid else ("  ", "  ")
    return text + (
        f"#                            {pad}  _-----=> irqs-off/BH-disabled\n"
        f"#                            {pad} / _----=> need-resched\n"
        f"#                            {pad}| / _---=> hardirq/softirq\n"
        f"#                            {pad}|| / _--=> preempt-depth\n"
        f"#                            {pad}||| / _-=> migrate-disable\n"
        f"#                            {pad}|||| /     delay\n"
        f"#           TASK-PID  {tgid_title} CPU#  |||||  TIMESTAMP  FUNCTION\n"
        f"#              | |    {tgid_bar}   |   |||||     |         |\n")


# -- the open files ---------------------------------------------------------------------


class TraceFile(OpenFile):
    """One open ``trace`` or ``per_cpu/cpuN/trace`` (a seq_file over an iterator).

    Args:
        output: the trace array's text files.
        cpu: the CPU of a per-CPU file, None for all.
        readable: opened for reading (writers get no iterator).
    """

    kind = FileKind.TEXT

    def __init__(self, output: TraceOutput, cpu: int | None, readable: bool) -> None:
        self._output = output
        self._cpu = cpu
        buffer = output.buffer
        self._lines = output.line_printer()
        # TRACE_FILE_ANNOTATE: mark where each CPU's data starts if the
        # buffer lost events before the open.
        self._annotate = any(cpu_buffer.overrun for cpu_buffer in buffer.cpus)
        #: CPUs already shown (``iter->started``; kept across restarts).
        self._started: set[int] = set()
        self._iterator: TraceIterator | None = None
        self._records: Iterator[str] = iter(())
        #: The record at the cursor, formatted but not yet delivered.
        self._current: str | None = None
        #: Bytes of a delivered record that did not fit the last read (``m->buf``).
        self._pending = b""
        #: The seq_file buffer size (``m->size``): grows for big records.
        self._buf_size = PAGE_SIZE
        self._read_pos = 0
        if readable:
            self._restart()

    def _restart(self) -> None:
        """``s_start`` at position 0: the iterators go back to the oldest event."""
        if self._iterator is not None:
            self._iterator.close()
        self._iterator = self._output.buffer.open_iterator(self._cpu)
        self._records = self._generate(self._iterator)
        self._current = None
        self._pending = b""
        self._read_pos = 0

    def _generate(self, iterator: TraceIterator) -> Iterator[str]:
        """The seq_file records: the header, then one ``s_show`` per entry."""
        output = self._output
        lines = self._lines
        yield render_header(output.total_entries(), output.nr_cpus, output.options())
        for idx, record in enumerate(iterator):
            started = ""
            # test_cpu_buff_start(): not for the first two entries (idx > 1).
            if self._annotate and record.cpu not in self._started:
                self._started.add(record.cpu)
                if idx > 1:
                    started = f"##### CPU {record.cpu} buffer started ####\n"
            line = lines.line(record)
            if line is not None and len(started) + len(line) < TRACE_SEQ_BUFFER_SIZE:
                yield started + line
                continue
            seq = TraceSeq()
            seq.puts(started)
            lines.print_pieces(seq, record)
            if seq.full:
                seq.full = False
                seq.puts("[LINE TOO BIG]\n")
            yield seq.text()

    def _peek(self) -> str | None:
        if self._current is None:
            self._current = next(self._records, None)
        return self._current

    def read(self, offset: int, size: int) -> bytes:
        """``seq_read_iter``: whole records that fit, the rest on the next read.

        A read at another offset than where the last one ended starts over
        (``traverse``): a new header, the oldest event again.
        """
        if offset != self._read_pos:
            self._restart()
            while self._read_pos < offset:
                if not self._read(offset - self._read_pos):
                    break
        return self._read(size)

    def _read(self, size: int) -> bytes:
        if not size:
            return b""
        self._lines.start_read()
        out = self._pending[:size]
        self._pending = self._pending[len(out):]
        if not self._pending:
            out += self._fill(size - len(out))
        self._read_pos += len(out)
        return out

    def _fill(self, room: int) -> bytes:
        """The records one ``seq_read_iter`` call produces after its flush."""
        first = self._peek()
        if first is None or not room:
            return b""
        while len(first) >= self._buf_size:  # "need a bigger buffer"
            self._buf_size <<= 1
        self._current = None
        # Records are latin-1 text: as many characters as bytes.
        records, length = [first], len(first)
        while length < room:
            record = next(self._records, None)
            if record is None:
                break
            if length + len(record) >= self._buf_size:
                self._current = record  # seq_file overflow: shown again by the next read
                break
            records.append(record)
            length += len(record)
        buf = "".join(records).encode("latin-1")
        self._pending = buf[room:]
        return buf[:room]

    def write(self, data: bytes, offset: int, task: Task) -> int:
        """``tracing_write_stub``: accepted and ignored."""
        return len(data)

    def release(self) -> None:
        """``ring_buffer_read_finish``: the buffer may be resized again."""
        if self._iterator is not None:
            self._iterator.close()
            self._iterator = None


class TracePipe(OpenFile):
    """One open ``trace_pipe`` or ``per_cpu/cpuN/trace_pipe``: consuming reads.

    Holds its CPU's reader slot until released.
    """

    kind = FileKind.PIPE

    def __init__(self, output: TraceOutput, cpu: int | None) -> None:
        self._output = output
        self._cpu = cpu
        self._lines = output.line_printer()
        #: Formatted text not yet read (``iter->seq``) and how much was read.
        self._text = b""
        self._readpos = 0
        self._released = False

    def read(self, offset: int, size: int) -> bytes:
        """``tracing_read_pipe``: lines formatted and consumed until ``size``.

        The first read of a batch formats whole lines, consuming each record,
        until the text reaches ``size`` (at most 8155 bytes); what does not
        fit is returned by the following reads, alone. A line that does not
        fit after others is left in the buffer for the next batch; one that
        does not fit at all is cut and consumed.

        Raises:
            WouldBlock: nothing to read (the kernel sleeps, or EAGAIN).
        """
        if not size:
            return b""
        if self._readpos < len(self._text):
            chunk = self._text[self._readpos:self._readpos + size]
            self._readpos += len(chunk)
            return chunk
        buffer = self._output.buffer
        count = min(size, TRACE_SEQ_BUFFER_SIZE - 1)
        self._lines.start_read()
        while True:
            seq = TraceSeq()
            consumed = False
            # The record peeked is the one consumed: the oldest, from its CPU.
            while (record := buffer.peek(self._cpu)) is not None:
                save_len = seq.len
                self._lines.print_line(seq, record, record.lost_events)
                if seq.full:
                    if save_len == 0:
                        # One line fills the whole sequence: consume it cut.
                        seq.full = False
                        seq.puts("[LINE TOO BIG]\n")
                        buffer.consume_nowait(record.cpu)
                        consumed = True
                    else:
                        seq.truncate(save_len)  # no partial lines: it waits
                    break
                buffer.consume_nowait(record.cpu)
                consumed = True
                if seq.len >= count:
                    break
            text = seq.text().encode("latin-1")
            if text:
                self._text = text
                self._readpos = min(count, len(text))
                return text[:count]
            if not consumed:
                raise WouldBlock("trace_pipe is empty")

    def poll(self) -> int:
        """``trace_poll``: readable when the buffer holds events.

        A per-CPU pipe waits for ``buffer_percent`` of its buffer, as the
        kernel passes it to ``ring_buffer_poll_wait`` (measured on 6.18: one
        event polls readable on ``trace_pipe``, not on ``per_cpu/cpu0/trace_pipe``).
        Text left from the last read does not count.
        """
        full = 0 if self._cpu is None else self._output.buffer_percent()
        if self._output.buffer.watermark_hit(self._cpu, full):
            return POLLIN | POLLRDNORM
        return 0

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._output.close_pipe(self._cpu)


class TraceOutput:
    """The text files of one trace array, and which CPUs have a pipe reader.

    Args:
        trace_array: whose buffer, events and saved comms the files show.
        nr_cpus: ``#P`` of the header (online CPUs).
        ksym: names of kernel addresses in records (the marker's ``ip``).
        options: the current ``trace_options``.
        buffer_percent: the current ``buffer_percent`` (per-CPU pipes' poll).
    """

    def __init__(self, trace_array: TraceArray, *, nr_cpus: int,
                 ksym: SymbolLookup = lambda ip: None,
                 options: Callable[[], OutputOptions] = lambda: DEFAULT_OPTIONS,
                 buffer_percent: Callable[[], int] = lambda: DEFAULT_BUFFER_PERCENT) -> None:
        self.trace_array = trace_array
        self.nr_cpus = nr_cpus
        self.ksym = ksym
        self.options = options
        self.buffer_percent = buffer_percent
        #: ``tr->pipe_cpumask``.
        self._pipe_cpus: set[int] = set()

    @property
    def buffer(self) -> RingBuffer:
        buffer = self.trace_array.buffer
        assert isinstance(buffer, RingBuffer)
        return buffer

    def total_entries(self) -> tuple[int, int]:
        """``get_total_entries`` of the whole buffer: (entries, entries + overruns)."""
        totals = self.buffer.get_total_entries()
        return totals.entries, totals.total

    def line_printer(self) -> LinePrinter:
        """The printer of a file opened now (the clock's unit is fixed at open)."""
        return LinePrinter(self.trace_array.events, self.trace_array.cmdlines,
                           in_ns=self.buffer.clock.in_ns, options=self.options, ksym=self.ksym)

    # -- trace ------------------------------------------------------------------------------

    def open_trace(self, flags: int, cpu: int | None = None) -> TraceFile:
        """``tracing_open``: O_TRUNC with write access clears first."""
        access = flags & os.O_ACCMODE
        if flags & os.O_TRUNC and access != os.O_RDONLY:
            self.buffer.reset(cpu)
        return TraceFile(self, cpu, readable=access != os.O_WRONLY)

    def trace_node(self, cpu: int | None = None) -> File:
        """``trace``, or ``per_cpu/cpu<cpu>/trace``."""
        return File("trace", TRACE_MODE_WRITE, lambda flags, task: self.open_trace(flags, cpu))

    # -- trace_pipe -------------------------------------------------------------------------

    def open_pipe(self, cpu: int | None = None) -> TracePipe:
        """``tracing_open_pipe``: one reader per CPU (``open_pipe_on_cpu``).

        Raises:
            TracefsError: EBUSY while the CPU (or any, for the all-CPU file)
                already has a pipe open.
        """
        if cpu is None:
            if self._pipe_cpus:
                raise TracefsError(errno.EBUSY, "trace_pipe is open")
            self._pipe_cpus = set(range(self.nr_cpus))
        else:
            if cpu in self._pipe_cpus:
                raise TracefsError(errno.EBUSY, f"trace_pipe of cpu{cpu} is open")
            self._pipe_cpus.add(cpu)
        return TracePipe(self, cpu)

    def close_pipe(self, cpu: int | None) -> None:
        """``close_pipe_on_cpu``."""
        if cpu is None:
            self._pipe_cpus.clear()
        else:
            self._pipe_cpus.discard(cpu)

    def trace_pipe_node(self, cpu: int | None = None) -> File:
        """``trace_pipe``, or ``per_cpu/cpu<cpu>/trace_pipe``."""
        return File("trace_pipe", TRACE_MODE_READ, lambda flags, task: self.open_pipe(cpu),
                    kind=FileKind.PIPE)
