"""Numbers written to control files: the engine against this machine's kernel.

Every value goes to the same files of a fresh private instance and of a fresh
engine, in the same order; each write's errno and each file's text afterwards
must match. The values are the corners of ``kstrtoul_from_user`` (ERANGE
beats junk, ``+``, radix prefixes, the 66-byte window) and of what the files
do with a number (``buffer_size_kb`` of ``ULONG_MAX`` wraps to the minimum).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tests.engine.synth_oracle import new_tracefs
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._task import Task

FILES = ["tracing_on", "buffer_size_kb", "buffer_percent", "options/overwrite"]
VALUES = [
    b"99999999999999999999", b"99999999999999999999x", b"18446744073709551616",
    b"18446744073709551615", b"18014398509481984", b"1x", b"x", b"", b"0x", b"0x10",
    b"010", b"+1", b"-1", b" 1", b"1\n", b"1\n\n", b"1\0junk", b"0" * 65 + b"1junk",
    b"0", b"4", b"100", b"101", b"1",
]
WRITER = Task(pid=1, tgid=1)


def _kernel_write(path: Path, data: bytes) -> int:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    except OSError as error:
        return error.errno
    finally:
        os.close(fd)
    return 0


def test_control_file_numbers_match_this_kernel(real_tracefs_root: Path) -> None:
    engine = new_tracefs()

    def engine_write(name: str, data: bytes) -> int:
        try:
            engine.file(name).open(os.O_WRONLY, WRITER).write(data, 0, WRITER)
        except TracefsError as error:
            return error.errno
        return 0

    instance = real_tracefs_root / "instances" / f"tracefs-fuse-numbers-{os.getpid()}"
    instance.mkdir()
    try:
        ours, theirs = [], []
        for name in FILES:
            for value in VALUES:
                theirs.append((name, value, errno.errorcode.get(_kernel_write(instance / name, value)),
                               (instance / name).read_bytes()))
                ours.append((name, value, errno.errorcode.get(engine_write(name, value)),
                             engine.file(name).open(0, WRITER).read(0, 4096)))
    finally:
        instance.rmdir()
    assert ours == theirs
