"""The decoder on this machine's kernel: pages of a real trace_pipe_raw, real formats.

A private instance, pinned to CPU 0, gets more trace_marker writes than its
small buffer holds; what the decoder reads back from the kernel's pages,
plus what they say was lost, must account for every write, in order.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tracefs_fuse.decode import Event, Lost, RecordDecoder, parse_format

WRITES = 3000


def test_decoder_reads_the_kernels_pages(real_tracefs_root: Path) -> None:
    instance = real_tracefs_root / "instances" / f"tracefs-fuse-decode-{os.getpid()}"
    instance.mkdir()
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        (instance / "buffer_size_kb").write_text("16")
        marker = os.open(instance / "trace_marker", os.O_WRONLY)
        try:
            for n in range(WRITES):
                os.write(marker, f"m-{n}".encode())
        finally:
            os.close(marker)
        fmt = parse_format((instance / "events/ftrace/print/format").read_text(), "ftrace")
        decoder = RecordDecoder({fmt.id: fmt}.get)
        pipe = os.open(instance / "per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
        records = []
        try:
            while True:
                try:
                    page = os.read(pipe, 4096)
                except OSError as exc:
                    assert exc.errno == errno.EAGAIN
                    break
                records += decoder.decode_page(0, page)
        finally:
            os.close(pipe)
    finally:
        os.sched_setaffinity(0, affinity)
        instance.rmdir()
    events = [r for r in records if isinstance(r, Event)]
    lost = [r for r in records if isinstance(r, Lost)]
    assert events and lost, "the buffer should have overflowed"
    assert all(r.count is not None for r in lost)
    first = int(events[0].fields["buf"].removeprefix("m-"))
    assert [e.fields["buf"] for e in events] == [f"m-{n}\n" for n in range(first, WRITES)]
    assert sum(r.count or 0 for r in lost) + len(events) == WRITES
    assert all(e.error is None and e.name == "print" and e.pid == os.getpid() for e in events)
    stamps = [e.timestamp for e in events]
    assert stamps == sorted(stamps)
