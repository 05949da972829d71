"""Ring-buffer readers through a real mount, driven by C clients.

1. A reader built on Debian's libtracefs/libtraceevent (``tep_reader.c``)
   decodes our user events, every field type included, and markers.
2. The same reader, on markers written the same way, gives byte-identical
   output on the machine's real tracefs (a private instance) and on ours:
   page boundaries, commit words, record offsets and lengths, padding,
   TIME_EXTENDs, missed-event counts, decoded text. Time stamps and pids are
   reduced to what the format fixes (see ``tep_reader.c``), nothing else is
   masked. The kernel's side is a golden captured on Linux 6.18 (always
   compared) and, where the machine's tracefs can be mounted and runs the
   same kernel series, the live kernel too (the ``live`` case only exists
   there: it is not skipped anywhere, CI included).
3. Reader semantics: consuming reads, blocking, O_NONBLOCK, poll/select and
   buffer_percent, ``ioctl(fd, 0)``, signals, text pipes, clearing.
4. splice(): what FUSE lets us do (docs/readers.md), and what it cannot.

Regenerate the golden (as root, on Linux 6.18):
``python -m tests.integration.test_readers capture``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from .conftest import Mount, start_mount, stop_mount

pytestmark = pytest.mark.uses_fuse

DATA = Path(__file__).parent.parent / "data"
GOLDEN = DATA / "readers.linux-6.18.44.json"
#: reader_marks exits with this when a stall could have added a TIME_EXTEND.
EX_TEMPFAIL = 75

#: User events the writer registers (keep in sync with reader_ue_writer.c).
EVENTS = [
    "rd_scalars u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h; "
    "char i; unsigned char j; short k; unsigned short l; int m; unsigned int n",
    "rd_strings char[8] fixed; __data_loc char[] dyn; __rel_loc char[] rel; u32 tail",
    "rd_blob struct rd_pair pair 8; unsigned char[4] raw",
    "rd_none",
]
LONG = ("a long dynamic string that makes the record longer than 112 bytes, "
        "so it is written with type_len 0")
#: What libtraceevent prints for reader_ue_writer's records, in order: (record
#: length, text). Its print fmt arguments read 1- and 2-byte fields unsigned
#: (b, d, i, k): that is libtraceevent, the same on a kernel.
DECODED = [
    (56, "..... rd_scalars: a=255 b=128 c=65535 d=32768 e=4294967295 f=-2147483648 "
         "g=18446744073709551615 h=-9223372036854775808 i=255 j=200 k=65534 l=65534 m=-3 "
         "n=4000000000"),
    (56, "..... rd_scalars: a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14"),
    (44, "..... rd_strings: fixed=fixed01 dyn=dynamic rel=rel tail=3735879680"),
    (36, "..... rd_strings: fixed=8charsX dyn= rel= tail=3735879681"),
    (140, f"..... rd_strings: fixed=8charsX dyn={LONG} rel=rel tail=3735879682"),
    (24, "..... rd_blob: pair=72623859790382856 raw=abc"),
    (16, "..... rd_none: "),
    (36, "...1. print: tracing_mark_write: hello marker\\n"),
    (32, "...1. print: tracing_mark_write: no newline\\n"),
    (20, "...1. raw_data: id:1234 00000041"),
    (24, "...1. raw_data: id:0042 00000001"),
]


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def run_writer(argv: list[str]) -> tuple[int, int, str]:
    """Run a writer client: its pid (the reader masks it), exit status, output."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        out, _ = proc.communicate(timeout=60)
    return proc.pid, proc.returncode, out


def truncate(path: Path) -> None:
    """Open for writing with O_TRUNC, as ``echo > trace`` does: clears the buffer."""
    os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))


def write_file(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def make_user_events(mount: Mount, commands: list[str]) -> None:
    """Create and enable user events the way a tracer does before the program runs."""
    for command in commands:
        with open(mount / "dynamic_events", "a") as f:
            f.write(f"u:{command}\n")
    write_file(mount / "events/user_events/enable", "1")


# -- 1. libtraceevent decodes user events and markers ---------------------------------------


def test_libtraceevent_decodes_user_events_and_markers(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    make_user_events(tracefs, EVENTS)
    for mode in ("pages", "iterate"):
        pid, _, out = run_writer([str(c_client("reader_ue_writer")), str(tracefs)])
        assert out == "wrote 11\n"
        result = run([str(c_client("tep_reader")), str(tracefs), mode, "-p", str(pid)])
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "header_page subbuf=4096 long=8"
        if mode == "iterate":  # tracefs_iterate_raw_events: splice, then read
            assert lines[1:] == [f"cpu0 pid=W {text}" for _, text in DECODED]
            continue
        # One sub-buffer, records back to back from offset 16, the first at
        # the page's time stamp, every later one strictly after it.
        size = sum(length for length, _ in DECODED)
        assert lines[1] == f"cpu0 page0 commit={size:#x} size={size} missed=0 tail=zero"
        offsets = [16 + sum(length for length, _ in DECODED[:i]) for i in range(len(DECODED))]
        assert lines[2:] == [
            f"  @{offset} len={length} ts={'page' if i == 0 else 'later'} pid=W {text}"
            for i, (offset, (length, text)) in enumerate(zip(offsets, DECODED))]

