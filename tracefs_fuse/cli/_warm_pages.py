"""The pages a run of the server writes, copied in the next spare before its request.

A fork shares the run server's memory copy-on-write, and the first write to
each page (a reference count is enough) is a fault that copies it: some 2,000
per run, a few µs each here, a third of a run's time. A spare
(``cli/_run_server.py``) has nothing to do before its request, so it takes
them then, for the pages the runs before it wrote.

How: the server lists its writable private mappings (``/proc/self/maps``) and
shares a byte per page of them with its forks (an anonymous ``MAP_SHARED``
mapping). The first :data:`LEARNING` runs, once they have said ``Exited``,
mark the listed pages they hold privately (``/proc/self/pagemap``: present
and exclusively mapped); a spare populates the marked pages writable
(``MADV_POPULATE_WRITE``, Linux 5.14), which copies each as a write would and
changes no byte. Where the kernel refuses (older, or a mapping gone since),
nothing happens but the faults.

Kernel: Documentation/admin-guide/mm/pagemap.rst, man 2 madvise.
"""

from __future__ import annotations

import array
import ctypes
import mmap
import os
import re

from ..lib import libc

PAGE = mmap.PAGESIZE
#: <uapi/asm-generic/mman-common.h>
MADV_POPULATE_WRITE = 23
#: pagemap: bit 63 page present, bit 56 page exclusively mapped.
PM_PRESENT = 1 << 63
PM_EXCLUSIVE = 1 << 56
#: Runs that mark what they wrote (later ones write the same pages).
LEARNING = 3
_MARKED = re.compile(rb"[^\x00]+")


def _writable_private() -> list[tuple[int, int]]:
    """(start, end) of our writable private mappings, stacks aside."""
    found = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            name = fields[5] if len(fields) > 5 else ""
            if fields[1].startswith("rw") and fields[1][3] == "p" and not name.startswith(
                    ("[stack", "[v")):
                start, end = (int(part, 16) for part in fields[0].split("-"))
                found.append((start, end))
    return found


class WarmPages:
    """Made in the server once it has everything imported; used by its forks."""

    def __init__(self) -> None:
        self._ranges = _writable_private()
        pages = sum((end - start) // PAGE for start, end in self._ranges)
        #: Byte 0: runs that marked so far; then a byte per page of the ranges.
        self._shared = mmap.mmap(-1, 1 + pages)

    def learn(self) -> None:
        """In a run that ended: mark the pages it holds privately."""
        if self._shared[0] >= LEARNING:
            return
        self._shared[0] += 1  # racing runs at worst both learn
        offset = 1
        pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        try:
            for start, end in self._ranges:
                count = (end - start) // PAGE
                entries = array.array("Q", os.pread(pagemap, count * 8, start // PAGE * 8))
                for index, entry in enumerate(entries):
                    if entry & PM_PRESENT and entry & PM_EXCLUSIVE:
                        self._shared[offset + index] = 1
                offset += count
        finally:
            os.close(pagemap)

    def populate(self) -> None:
        """In a spare: copy the marked pages now."""
        marks = self._shared[1:]
        offset = 0
        for start, end in self._ranges:
            count = (end - start) // PAGE
            for run in _MARKED.finditer(marks, offset, offset + count):
                address = start + (run.start() - offset) * PAGE
                libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(len(run.group()) * PAGE),
                             MADV_POPULATE_WRITE)
            offset += count

