"""``filter`` files of events and systems: only ``0`` clears, the rest is refused.

Filter expressions are not emulated, so the live comparison is limited to
what decides whether a write is a ``0``: the page limit, the NUL that ends
the copied text and ``strstrip``'s white space (0xA0 included). Each value
goes to a fresh private instance's ``sched/sched_switch`` and ``sched``
filters and to the engine's ``synthetic/sched_switch`` and ``synthetic``
ones; errno, count and the file's text afterwards must match.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._tracefs import Tracefs

from .synth_oracle import ROOT, new_tracefs

VALUES = [
    b"0", b"0\n", b"\xa00\n", b" 0 ", b"\v0\f", b"\t0\r\n", b"\xa0\xa00\xa0", b"0\0junk",
    b"0" + b" " * 4094, b"0" + b" " * 4095, b"0" + b" " * 5000,
]


def _engine() -> Tracefs:
    tfs = new_tracefs()
    tfs.synth_events.run_command("sched_switch u64 a")
    return tfs


def _engine_write(tfs: Tracefs, path: str, data: bytes) -> int:
    """The count written, or the errno as a negative number."""
    try:
        return tfs.file(path).open(os.O_WRONLY, ROOT).write(data, 0, ROOT)
    except TracefsError as error:
        return -error.errno


@pytest.mark.parametrize(("data", "result"), [
    (b"0", 1), (b"\xa00\n", 3), (b"\v0\f", 3), (b"0\0junk", 6),
    (b"0" + b" " * 4094, 4095),
    (b"0" + b" " * 4095, -errno.EINVAL),  # cnt >= PAGE_SIZE
    (b"00", -errno.EINVAL), (b"common_pid == 1", -errno.EINVAL),  # expressions: not emulated
    (b"0\x85", -errno.EINVAL),  # 0x85 is no white space in lib/ctype.c
])
@pytest.mark.parametrize("path", ["events/synthetic/sched_switch/filter",
                                  "events/synthetic/filter"])
def test_filter_write(path: str, data: bytes, result: int) -> None:
    assert _engine_write(_engine(), path, data) == result


def test_filter_of_a_removed_event_checks_the_page_limit_first() -> None:
    """``event_filter_write``: ``cnt >= PAGE_SIZE`` comes before ``event_file_file``."""
    tfs = _engine()
    handle = tfs.file("events/synthetic/sched_switch/filter").open(os.O_WRONLY, ROOT)
    tfs.synth_events.delete("sched_switch")
    for data, code in ((b"0" * 4096, errno.EINVAL), (b"0", errno.ENODEV)):
        with pytest.raises(TracefsError) as info:
            handle.write(data, 0, ROOT)
        assert info.value.errno == code


def test_filter_zero_matches_this_kernel(real_tracefs_root: Path) -> None:
    tfs = _engine()
    instance = real_tracefs_root / "instances" / f"tracefs-fuse-filter-{os.getpid()}"
    instance.mkdir()
    try:
        ours, theirs = [], []
        for kernel_path, path in (("events/sched/sched_switch/filter",
                                   "events/synthetic/sched_switch/filter"),
                                  ("events/sched/filter", "events/synthetic/filter")):
            for value in VALUES:
                fd = os.open(instance / kernel_path, os.O_WRONLY)
                try:
                    result = os.write(fd, value)
                except OSError as error:
                    result = -error.errno
                finally:
                    os.close(fd)
                theirs.append((path, value, result, (instance / kernel_path).read_bytes()))
                ours.append((path, value, _engine_write(tfs, path, value),
                             tfs.file(path).open(os.O_RDONLY, ROOT).read(0, 4096)))
    finally:
        instance.rmdir()
    assert ours == theirs
