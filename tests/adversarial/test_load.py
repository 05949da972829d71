"""Records under load: many processes and threads writing at once lose nothing.

``tests/clients/adv_load.c`` writes from PROCS × THREADS registrations at
once, checking its enable bit before every write; then every CPU's
``trace_pipe_raw`` is drained and decoded with the tests' own decoder
(``tests/engine/pagedecode.py``), and each thread's sequence must be there
exactly once, in order, with nothing lost or overwritten. The buffer is sized
so that nothing needs to be overwritten.

Budget: RECORDS × ``TFUSE_FUZZ_SCALE`` records per thread.
"""

from __future__ import annotations

import errno
import os
import struct
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import pytest

from ..engine.pagedecode import decode_page
from ..integration.conftest import Mount
from .conftest import assert_serves, fuzz_budget, fuzz_report

pytestmark = pytest.mark.uses_fuse

PROCS, THREADS, RECORDS = 4, 2, 1500
#: What one record takes in the buffer, with room to spare: header,
#: common fields, three u32 and an occasional time extend.
RECORD_BYTES = 40


def drain(path: Path) -> list[bytes]:
    """Every sub-buffer left in one CPU's trace_pipe_raw."""
    pages = []
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                page = os.read(fd, 4096)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    return pages
                raise
            if not page:
                return pages
            pages.append(page)
    finally:
        os.close(fd)


def test_records_under_load_are_all_there(open_mount: Mount,
                                          c_client: Callable[[str], Path]) -> None:
    records = RECORDS * len(fuzz_budget())
    nr_cpus = len(os.listdir(open_mount / "per_cpu"))
    total_kb = PROCS * THREADS * records * RECORD_BYTES // 1024
    open_mount.write("buffer_size_kb", f"{total_kb + 1024}\n")  # per CPU: any one may get all
    open_mount.write("dynamic_events", "u:adv_load u32 p; u32 t; u32 n\n")
    open_mount.write("events/user_events/adv_load/enable", "1")
    event_id = int(open_mount.read("events/user_events/adv_load/id"))

    started = time.monotonic()
    result = subprocess.run([str(c_client("adv_load")), str(open_mount), str(PROCS),
                             str(THREADS), str(records)],
                            capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    threads = [dict(kv.split("=") for kv in line.split()) for line in result.stdout.splitlines()]
    assert len(threads) == PROCS * THREADS
    written = sum(int(t["written"]) for t in threads)
    bit_wrong = sum(int(t["bit_wrong"]) for t in threads)

    seen: dict[tuple[int, int], list[int]] = defaultdict(list)
    for cpu in range(nr_cpus):
        for raw in drain(open_mount / f"per_cpu/cpu{cpu}/trace_pipe_raw"):
            page = decode_page(raw)
            assert not page.missed_events, f"cpu{cpu}: events were lost"
            for event in page.events:
                common_type, = struct.unpack_from("<H", event.data)
                if common_type == event_id:
                    p, t, n = struct.unpack_from("<III", event.data, 8)
                    seen[p, t].append(n)
    read = sum(len(ns) for ns in seen.values())
    fuzz_report("mount: records under load", processes=PROCS, threads=PROCS * THREADS,
                written=written, read=read, lost=written - read, bit_checks=written,
                bit_wrong=bit_wrong, seconds=round(seconds, 1))
    assert (written, bit_wrong) == (PROCS * THREADS * records, 0)
    # A thread's records may land on several CPUs (it migrates), in order within each.
    assert {key: sorted(ns) for key, ns in seen.items()} == {
        (p, t): list(range(records)) for p in range(PROCS) for t in range(THREADS)}
    assert_serves(open_mount)
