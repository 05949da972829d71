"""The whole of a write that FUSE split into several requests, or cut short.

The kernel takes a ``user_events_data`` write as one event (or refuses it
whole). FUSE does not pass it whole (fs/fuse/file.c, ``fuse_direct_io``): a
request carries at most ``max_write`` bytes and ``max_pages`` pages (an iovec
takes a page at least, so 300 four-byte iovecs need two requests with the
default limit of 256), and ``fuse_get_user_pages`` stops at the first iovec it
cannot pin, sending what came before it. The first request then looks like a
complete, shorter write.

So for a request that may be a part (as large as ``max_write``, or as many
bytes as ``max_pages``: a part cut by the page limit has a byte per page at
least; the native fast path serves those it can prove whole, see
``_native/fastpath.c``), or one the engine refuses (a fault in an iovec usually leaves too
few bytes for the event's fields: EINVAL where the kernel says EFAULT), the
writer's own system call is looked at: ``/proc/<tid>/syscall`` names it and
its arguments while the writer sleeps in our request, and its iovecs are read
from its memory. The engine then answers for the whole write
(``UserEventsDataFile.write_whole``), and the requests FUSE sends for the
rest of it are answered with their full size.

Caveats:
  * A write cut short by a fault whose readable part is shorter than
    ``max_pages`` bytes, yet satisfies the event's fields and validators, is
    recorded as what was readable, and the writer sees a short count (the
    kernel: EFAULT). Telling it apart would cost a system call per write.
  * Only ``write(2)`` and ``writev(2)`` are recognised (the positional
    variants fail with ESPIPE before FUSE, as on a stream file); a write
    issued otherwise (io_uring, AIO) is taken as it comes.
"""

from __future__ import annotations

import struct
from typing import Callable

#: x86_64 system call numbers.
SYS_WRITE = 1
SYS_WRITEV = 20
#: ``UIO_MAXIOV``: writev refuses more iovecs before FUSE sees anything.
UIO_MAXIOV = 1024
#: ``MAX_RW_COUNT``: rw_copy_check_uvector() trims a write to this.
MAX_RW_COUNT = 0x7FFFF000
# struct iovec { void *iov_base; size_t iov_len; };
IOVEC = struct.Struct("<QQ")

#: ``read(addr, size)`` in the writer: the bytes readable there (fewer at a fault).
ReadMemory = Callable[[int, int], bytes]


#: Bytes of a write read at most: more than any record can hold (a
#: sub-buffer is at most 128 pages), so a longer write is known too long.
READ_LIMIT = 1 << 20


class NotLookedAt(Exception):
    """(not a TracefsError: the engine lets it through, before any record)
    Whether the rest of the write is readable is not known yet."""


class WholeWrite:
    """What the writer's system call wrote.

    Only its first :data:`READ_LIMIT` bytes are read at once; whether the
    rest (up to 2 GiB) is readable is asked (:meth:`faulted`) only by the
    engine, after the index, the size and the event's state, as the kernel
    faults the write in only for an enabled event (``user_events_write_core``:
    ENOENT after 4 bytes; ``fault_in_iov_iter_readable`` once enabled). Before,
    every such write scanned it all first: 2.2-4.8 s (issue 19 item 3).
    """

    __slots__ = ("count", "data", "_read", "_rest", "_faulted")

    def __init__(self, count: int, data: bytes, read: ReadMemory,
                 rest: list[tuple[int, int]], faulted: bool) -> None:
        #: Its size (``i->count``).
        self.count = count
        #: Its bytes up to the first unreadable one, at most :data:`READ_LIMIT`.
        self.data = data
        self._read = read
        #: (address, length) of what is left to fault in.
        self._rest = rest
        self._faulted: bool | None = True if faulted else None

    def known_faulted(self) -> bool:
        """:meth:`faulted`, once looked at; before, :class:`NotLookedAt` (the
        engine asks this on the trio thread, and the look is made in the
        writer's lane: ``_requests``)."""
        if self._faulted is None:
            raise NotLookedAt("the rest of the write was not looked at yet")
        return self._faulted

    def faulted(self) -> bool:
        """Some byte of it cannot be read (looked at once, on the first call)."""
        if self._faulted is None:
            self._faulted = not all(_readable(self._read, addr, length)
                                    for addr, length in self._rest)
        return self._faulted


def _syscall(tid: int) -> tuple[int, list[int]] | None:
    """The system call ``tid`` sleeps in: (number, arguments), or None."""
    try:
        with open(f"/proc/{tid}/syscall", "rb") as f:
            fields = f.read().split()
    except OSError:
        return None
    if len(fields) < 4 or fields[0] in (b"running", b"-1"):
        return None
    return int(fields[0]), [int(field, 16) for field in fields[1:7]]


def _buffers(read: ReadMemory, nr: int, args: list[int]) -> list[tuple[int, int]] | None:
    if nr == SYS_WRITE:
        return [(args[1], args[2])]
    if nr != SYS_WRITEV or not 0 < args[2] <= UIO_MAXIOV:
        return None
    raw = read(args[1], args[2] * IOVEC.size)
    if len(raw) != args[2] * IOVEC.size:
        return None  # the kernel copied them in before FUSE: they moved
    return [IOVEC.unpack_from(raw, i * IOVEC.size) for i in range(args[2])]


def whole_write(read: ReadMemory, tid: int, received: int) -> WholeWrite | None:
    """The write ``tid`` is making, if it is larger than the ``received`` bytes.

    Args:
        read: the writer's memory.
        received: the size of the request FUSE delivered.

    Returns:
        None if the write is the request itself (or cannot be told).
    """
    call = _syscall(tid)
    if call is None:
        return None
    buffers = _buffers(read, *call)
    if buffers is None:
        return None
    count = min(sum(length for _, length in buffers), MAX_RW_COUNT)
    if count <= received:
        return None
    data = bytearray()
    rest = []
    left = count
    for base, length in buffers:
        length = min(length, left)
        left -= length
        want = max(0, min(length, READ_LIMIT - len(data)))
        got = read(base, want) if want else b""
        data += got
        if len(got) < want:
            return WholeWrite(count, bytes(data), read, [], faulted=True)
        if length > want:
            rest.append((base + want, length - want))
    return WholeWrite(count, bytes(data), read, rest, faulted=False)


def _readable(read: ReadMemory, addr: int, length: int) -> bool:
    """``fault_in_iov_iter_readable`` of a range, read a megabyte at a time."""
    end = addr + length
    while addr < end:
        size = min(end - addr, READ_LIMIT)
        if len(read(addr, size)) != size:
            return False
        addr += size
    return True
