"""``trace_pipe_raw``'s splice take: whole sub-buffers only (``RawPipeFile.splice_read``)."""

from __future__ import annotations

import os
import struct

import pytest

from tracefs_fuse.engine._buffer_files import RawPipeFile
from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import WouldBlock
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs

from .fakes import FakeMemory

WRITER = Task(pid=42, tgid=Tgid(40), cpu=0, comm="writer")
#: trace_marker_raw record: 8 common bytes + id + 100 bytes = 112, 116 with its header.
RECORD = 116


def raw_marks(t: Tracefs, ids: range) -> None:
    file = t.file("trace_marker_raw").open(os.O_WRONLY, WRITER)
    for i in ids:
        file.write(struct.pack("<I", i) + bytes(100), 0, WRITER)


def pipe(t: Tracefs) -> RawPipeFile:
    file = t.file("per_cpu/cpu0/trace_pipe_raw").open(os.O_RDONLY, WRITER)
    assert isinstance(file, RawPipeFile)
    return file


def commit_and_first_id(page: bytes) -> tuple[int, int]:
    commit = struct.unpack_from("<Q", page, 8)[0] & ((1 << 27) - 1)
    return commit, struct.unpack_from("<I", page, 16 + 4 + 8)[0]


@pytest.mark.parametrize("written, pages", [
    (0, []),            # empty
    (30, []),           # 3480 bytes: the writer is still on the only page
    (36, [(35, 0)]),    # the 36th record did not fit: page 1 is left, 35 records
    (80, [(35, 0), (35, 35)]),
])
def test_splice_takes_only_pages_the_writer_left(written: int, pages: list[tuple[int, int]]) -> None:
    t = Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=TraceClocks.from_source(ManualClock(1)))
    raw_marks(t, range(written))
    file = pipe(t)
    taken = []
    while True:
        try:
            page = file.splice_read(4096 * len(taken), 4096)
        except WouldBlock:
            break
        assert len(page) == 4096
        commit, first = commit_and_first_id(page)
        taken.append((commit // RECORD, first))
    assert taken == pages
    # What splice leaves, read() still gets: the partial page the writer is on.
    rest = written - sum(n for n, _ in pages)
    if rest:
        assert commit_and_first_id(file.read(0, 4096)) == (rest * RECORD, written - rest)


def test_a_sub_buffer_larger_than_a_page_comes_in_pieces() -> None:
    t = Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=TraceClocks.from_source(ManualClock(1)))
    t.file("buffer_subbuf_size_kb").open(os.O_WRONLY, WRITER).write(b"8", 0, WRITER)
    raw_marks(t, range(71))  # 8176 bytes hold 70 records: the 71st starts page 2
    file = pipe(t)
    first, second = file.splice_read(0, 4096), file.splice_read(4096, 4096)
    assert struct.unpack_from("<Q", first, 8)[0] == 70 * RECORD
    page = first + second
    assert struct.unpack_from("<I", page, 16 + 69 * RECORD + 12)[0] == 69  # the last record
    with pytest.raises(WouldBlock):
        file.splice_read(8192, 4096)


def test_pages_go_out_only_in_order() -> None:
    """A fill ahead of the splicer (readahead) would put a newer page before
    an older one: refused, and nothing is taken by it."""
    t = Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=TraceClocks.from_source(ManualClock(1)))
    raw_marks(t, range(80))
    file = pipe(t)
    with pytest.raises(WouldBlock):
        file.splice_read(4096, 4096)
    assert commit_and_first_id(file.splice_read(0, 4096)) == (35 * RECORD, 0)
    with pytest.raises(WouldBlock):
        file.splice_read(0, 4096)  # behind: that page was handed out
    assert commit_and_first_id(file.splice_read(4096, 4096)) == (35 * RECORD, 35)
