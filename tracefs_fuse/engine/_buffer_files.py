"""Files about the ring buffer: ``per_cpu/``, sizes, clock, percent, tracer, cmdlines.

Rules:
  * Each file is a thin view of :class:`~._ringbuf.RingBuffer` or
    :class:`~._trace_array.TraceArray` state, parsed and printed as the kernel's
    file operation does (``kstrtoul_from_user``, ``%*pb`` cpumasks, …).
  * ``per_cpu/cpuN/trace_pipe_raw`` reads whole sub-buffers in the kernel's
    binary format, blocks (WouldBlock) when empty, polls against
    ``buffer_percent``, and ``ioctl(fd, 0)`` wakes its blocked readers (the
    adapter does the waking; see ``fuse/_requests.py``).

Kernel: kernel/trace/trace.c (``tracing_entries_*``, ``tracing_clock_*``,
``buffer_percent_*``, ``buffer_subbuf_size_*``, ``tracing_cpumask_*``,
``saved_cmdlines*``, ``tracing_buffers_*``).
"""

from __future__ import annotations

import errno
import os  # open-flag constants only
from functools import partial
from typing import Callable, Iterator

from ._clock import TraceClocks
from ._errors import TracefsError, WouldBlock
from ._field import KERNEL_SPACE
from ._kstrto import kstrtoul_from_user
from ._output import TraceOutput
from ._ringbuf import MmapUpdate, RingBuffer
from ._task import Task
from ._trace_array import SavedCmdlines, TraceArray
from ._tree import (POLLIN, POLLRDNORM, PRIVATE_DIR_MODE, TRACE_MODE_READ, Dir, File, FileKind,
                    Node, OpenFile, Vma, text_file)

#: ``PID_MAX_DEFAULT``: the largest ``saved_cmdlines_size``.
PID_MAX_DEFAULT = 0x8000
#: ``buffer_percent`` a new trace array starts with.
DEFAULT_BUFFER_PERCENT = 50
#: ``buffer_subbuf_size_kb`` limits: 1 to 128 system pages (order 0..7).
_MAX_SUBBUF_ORDER = 7
_PAGE_SIZE = 4096


def render_cpumask(mask: int, nr_cpus: int) -> str:
    """``%*pb``: 32-bit hex chunks, most significant first, comma-separated."""
    chunks = []
    bits = nr_cpus
    first = bits % 32 or 32
    width = -(-first // 4)
    top = bits - first
    chunks.append(f"{(mask >> top) & ((1 << first) - 1):0{width}x}")
    for shift in range(top - 32, -1, -32):
        chunks.append(f"{(mask >> shift) & 0xFFFFFFFF:08x}")
    return ",".join(chunks)


def parse_cpumask(data: bytes, nr_cpus: int) -> int:
    """``cpumask_parse_user`` (lib/bitmap-str.c ``bitmap_parse``), as it reads.

    The text ends at the first newline or NUL. From its end backwards: runs
    of white space and commas separate chunks of up to 8 hex digits, each
    32 bits of the mask, least significant first; more chunks than the mask
    has 32-bit words, or a ninth digit in a chunk, is EOVERFLOW; any other
    character where a digit must be is EINVAL, except the one right before
    an eighth digit, which is skipped (``bitmap_get_x32_reverse`` steps over
    it). Bits past ``nr_cpus`` in the last word are EOVERFLOW.

    Raises:
        TracefsError: EINVAL or EOVERFLOW, as above.
    """
    text = data.split(b"\0", 1)[0].split(b"\n", 1)[0]
    words = -(-nr_cpus // 32)
    mask, chunk, end = 0, 0, len(text) - 1
    while True:
        while end >= 0 and _end_of_region(text[end]):
            end -= 1
        if end < 0:
            break
        if chunk == words:
            raise TracefsError(errno.EOVERFLOW, f"cpumask {text!r} has more than {words} words")
        value, end = _get_x32_reverse(text, end)
        mask |= value << 32 * chunk
        chunk += 1
    if mask >> nr_cpus:
        raise TracefsError(errno.EOVERFLOW, f"cpumask {text!r} names CPUs beyond {nr_cpus}")
    return mask


def _end_of_region(c: int) -> bool:
    return chr(c) in KERNEL_SPACE or c == ord(",")


def _hex_digit(c: int) -> int:
    """``hex_to_bin``: the digit's value, or -1."""
    char = chr(c)
    return int(char, 16) if char in "0123456789abcdefABCDEF" else -1


def _get_x32_reverse(text: bytes, end: int) -> tuple[int, int]:
    """One chunk, read backwards from ``end``: (its value, where the next begins)."""
    value = 0
    for shift in range(0, 32, 4):
        digit = _hex_digit(text[end])
        end -= 1
        if digit < 0:
            raise TracefsError(errno.EINVAL, f"cpumask {text!r}: not a hex digit")
        value |= digit << shift
        if end < 0 or _end_of_region(text[end]):
            return value, end
    if _hex_digit(text[end]) >= 0:
        raise TracefsError(errno.EOVERFLOW, f"cpumask {text!r}: a chunk longer than 32 bits")
    return value, end - 1


# include/uapi/linux/trace_mmap.h: #define TRACE_MMAP_IOCTL_GET_READER _IO('R', 0x20)
TRACE_MMAP_IOCTL_GET_READER = 0x5220


class RawPipeFile(OpenFile):
    """An open ``per_cpu/cpuN/trace_pipe_raw``: consuming reads, poll, GET_READER."""

    kind = FileKind.MAPPABLE_PIPE

    def __init__(self, buffer: RingBuffer, cpu: int, buffer_percent: Callable[[], int],
                 publish: Callable[[MmapUpdate], None], *, nonblock: bool = False) -> None:
        self.buffer = buffer
        self.cpu = cpu
        #: O_NONBLOCK at open (a later fcntl() never reaches a FUSE daemon).
        self.nonblock = nonblock
        self.buffer_percent = buffer_percent
        self.publish = publish
        self.reader = buffer.open_raw_reader(cpu)
        self._splice_rest = b""
        #: The page-cache offset splice() fills next: a new open starts at 0.
        self._splice_next = 0

    def read(self, offset: int, size: int) -> bytes:
        return self.reader.read_nowait(size)

    def splice_read(self, offset: int, size: int) -> bytes:
        """``tracing_buffers_splice_read``'s take, ``size`` bytes at ``offset``.

        Only whole sub-buffers, only pages the writer has left
        (``ring_buffer_read_page`` with ``full``); waiting for
        ``buffer_percent`` is the caller's business. ``offset`` is the
        position in the splicing file's page cache, and pages are handed out
        strictly in order: a fill anywhere else is readahead ahead of the
        splicer, which would put newer pages before older ones. A sub-buffer
        larger than ``size`` is handed out in pieces, the next piece first.

        Raises:
            WouldBlock: ``offset`` is not the next page, or there is no piece
                left and no complete sub-buffer.
        """
        if offset != self._splice_next:
            raise WouldBlock(f"page-cache fill at {offset}, the next page is {self._splice_next}")
        if not self._splice_rest:
            self._splice_rest = self.buffer.read_page_nowait(
                self.cpu, self.buffer.subbuf_size, full=True)
        piece, self._splice_rest = self._splice_rest[:size], self._splice_rest[size:]
        self._splice_next += len(piece)
        return piece

    def poll(self) -> int:
        # ring_buffer_poll_wait honours buffer_percent for trace_pipe_raw.
        if self.buffer.watermark_hit(self.cpu, self.buffer_percent()):
            return POLLIN | POLLRDNORM
        return 0

    def ioctl(self, cmd: int, arg: int, task: Task) -> int:
        if cmd == 0:
            return 0  # "wake up waiters": the adapter wakes this file's readers
        if cmd == TRACE_MMAP_IOCTL_GET_READER:
            # tracing_buffers_ioctl: a blocking descriptor first waits
            # (ring_buffer_wait) for buffer_percent of data, or a wakeup.
            if not self.nonblock and not self.poll():
                raise WouldBlock("GET_READER waits for buffer_percent")
            return self.get_reader()
        return super().ioctl(cmd, arg, task)

    def get_reader(self) -> int:
        """``ring_buffer_map_get_reader``, without waiting (after a wakeup).

        Raises:
            TracefsError: ENODEV if the buffer is not mapped.
        """
        self.publish(self.buffer.map_get_reader(self.cpu))
        return 0

    def release(self) -> None:
        self.reader.close()


class RawPipeMapping:
    """The mmap side of one CPU's ``trace_pipe_raw`` (see :class:`~._tree.Mappable`)."""

    def __init__(self, buffer: RingBuffer, cpu: int,
                 publish: Callable[[MmapUpdate], None]) -> None:
        self.buffer = buffer
        self.cpu = cpu
        self.publish = publish

    def mapped(self, vma: Vma) -> None:
        """``ring_buffer_map``: EPERM for writable, executable or private mappings."""
        self.publish(self.buffer.map(self.cpu, vma.pgoff, vma.nr_pages, write=vma.write,
                                     execute=vma.execute, shared=vma.shared))

    def unmapped(self) -> None:
        self.buffer.unmap(self.cpu)

    def map_read(self, offset: int, size: int) -> bytes:
        return self.buffer.mmap_read(self.cpu, offset, size)


class BufferFiles:
    """The buffer-related files of one trace array."""

    def __init__(self, tr: TraceArray, buffer: RingBuffer, clocks: TraceClocks,
                 output: TraceOutput, nr_cpus: int,
                 publish: Callable[[tuple[str, ...], MmapUpdate], None]) -> None:
        self.tr = tr
        self.publish = publish
        self.buffer = buffer
        self.clocks = clocks
        self.output = output
        self.nr_cpus = nr_cpus
        self.buffer_percent = DEFAULT_BUFFER_PERCENT

    # -- top level --------------------------------------------------------------------

    def top_entries(self) -> Iterator[Node]:
        buffer = self.buffer
        yield self.per_cpu_dir()
        yield text_file("buffer_subbuf_size_kb",
                        lambda: f"{buffer.subbuf_size >> 10}\n", self._write_subbuf_size)
        yield text_file("buffer_percent", lambda: f"{self.buffer_percent}\n",
                        self._write_buffer_percent)
        yield text_file("timestamp_mode", lambda: "[delta] absolute\n")
        yield text_file("trace_clock", lambda: self.clocks.render(buffer.clock).decode(),
                        self._write_trace_clock)
        yield text_file("buffer_total_size_kb",
                        lambda: buffer.render_buffer_total_size_kb().decode())
        yield text_file("buffer_size_kb", lambda: buffer.render_buffer_size_kb().decode(),
                        self._size_writer(None))
        yield self.output.trace_pipe_node()
        yield self.output.trace_node()
        yield text_file("tracing_cpumask",
                        lambda: render_cpumask(self.tr.cpumask, self.nr_cpus) + "\n",
                        self._write_cpumask)
        yield text_file("current_tracer", lambda: "nop\n", self._write_current_tracer)
        yield text_file("available_tracers", lambda: "nop\n")

    def _size_writer(self, cpu: int | None) -> Callable[[bytes, Task], int]:
        def write(data: bytes, task: Task) -> int:
            self.buffer.write_buffer_size_kb(data, cpu)
            return len(data)

        return write

    def _write_subbuf_size(self, data: bytes, task: Task) -> int:
        pages = -(-kstrtoul_from_user(data) * 1024 // _PAGE_SIZE)
        order = (pages - 1).bit_length() if pages else 64  # fls(pages - 1)
        if order > _MAX_SUBBUF_ORDER:
            raise TracefsError(errno.EINVAL, "sub-buffers are 1 to 128 pages")
        self.buffer.set_subbuf_order(order)
        return len(data)

    def _write_buffer_percent(self, data: bytes, task: Task) -> int:
        value = kstrtoul_from_user(data)
        if value > 100:
            raise TracefsError(errno.EINVAL, "buffer_percent is 0..100")
        self.buffer_percent = value
        return len(data)

    def _write_trace_clock(self, data: bytes, task: Task) -> int:
        self.buffer.set_clock(self.clocks.parse(data))
        return len(data)

    def _write_cpumask(self, data: bytes, task: Task) -> int:
        if not data:
            raise TracefsError(errno.EINVAL, "empty cpumask write")  # tracing_cpumask_write
        self.tr.cpumask = parse_cpumask(data, self.nr_cpus)
        return len(data)

    def _write_current_tracer(self, data: bytes, task: Task) -> int:
        # tracing_set_trace_write: trailing white space goes, the name must exist.
        name = data[:127].split(b"\0", 1)[0].decode("latin-1").rstrip(KERNEL_SPACE)
        if name != "nop":
            raise TracefsError(errno.EINVAL, f"no tracer {name!r} (only nop is available)")
        return len(data)

    # -- per_cpu/ ----------------------------------------------------------------------

    def _publisher(self, cpu: int) -> Callable[[MmapUpdate], None]:
        path = ("per_cpu", f"cpu{cpu}", "trace_pipe_raw")
        return lambda update: self.publish(path, update)

    def mapping(self, cpu: int) -> RawPipeMapping:
        return RawPipeMapping(self.buffer, cpu, self._publisher(cpu))

    def per_cpu_dir(self) -> Dir:
        def entries() -> Iterator[Node]:
            for cpu in range(self.nr_cpus):
                yield Dir(f"cpu{cpu}", partial(self.cpu_entries, cpu),
                          mode=PRIVATE_DIR_MODE)

        return Dir("per_cpu", entries, mode=PRIVATE_DIR_MODE)

    def cpu_entries(self, cpu: int) -> Iterator[Node]:
        buffer = self.buffer
        yield text_file("buffer_size_kb", lambda: buffer.render_buffer_size_kb(cpu).decode(),
                        self._size_writer(cpu))
        yield text_file("stats", lambda: buffer.render_stats(cpu).decode())
        yield File("trace_pipe_raw", TRACE_MODE_READ,
                   lambda flags, task: RawPipeFile(buffer, cpu, lambda: self.buffer_percent,
                                                   self._publisher(cpu),
                                                   nonblock=bool(flags & os.O_NONBLOCK)),
                   FileKind.MAPPABLE_PIPE)
        yield self.output.trace_node(cpu)
        yield self.output.trace_pipe_node(cpu)


def cmdline_entries(cmdlines: SavedCmdlines) -> Iterator[Node]:
    """``saved_cmdlines``, ``saved_cmdlines_size``, ``saved_tgids``."""

    def write_size(data: bytes, task: Task) -> int:
        value = kstrtoul_from_user(data)
        if not value or value > PID_MAX_DEFAULT:
            raise TracefsError(errno.EINVAL, f"saved_cmdlines_size is 1..{PID_MAX_DEFAULT}")
        cmdlines.resize(value)
        return len(data)

    yield text_file("saved_tgids",
                    lambda: "".join(f"{pid} {tgid}\n" for pid, tgid in cmdlines.tgids.items()))
    yield text_file("saved_cmdlines_size", lambda: f"{cmdlines.size}\n", write_size)
    yield text_file("saved_cmdlines",
                    lambda: "".join(f"{pid} {comm}\n" for pid, comm in cmdlines.comms.items()))
