"""What the fuzzers found, each kept as a table against this machine's tracefs.

Every row is an input that once got another answer from us than from the
kernel (docs/reliability.md lists when and how it was found). The engine is
driven directly, with as many CPUs as the machine has, and the same input is
written to a private instance of the real tracefs.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tracefs_fuse.daemon._daemon import possible_cpus
from tracefs_fuse.engine._buffer_files import parse_cpumask
from tracefs_fuse.engine._errors import TracefsError

pytestmark = pytest.mark.uses_fuse

#: tracing_cpumask (``bitmap_parse``): found by test_fuzz_control:
#: we refused only malformed chunks (EINVAL) and had no chunk count.
CPUMASKS = [b"0,1", b"99999999999999999999", b"123456789", b"x1", b"x12345678", b"1,,",
            b",1", b"  1 ", b"1 1", b"3\x00junk", b"1\njunk", b"\n", b"g", b"0x1", b"00000001",
            b"000000001", b"\xa01", b"1\xa0", b"1\t,", b"ffffffff", b"-1", b"1-1", b"+1"]


def kernel_cpumask(kernel_instance: Path, text: bytes) -> int | str:
    """What the kernel makes of ``text``: the mask, or the errno's name."""
    fd = os.open(kernel_instance / "tracing_cpumask", os.O_WRONLY)
    try:
        os.write(fd, text)
    except OSError as exc:
        return errno.errorcode[exc.errno or 0]
    finally:
        os.close(fd)
    return int((kernel_instance / "tracing_cpumask").read_text().replace(",", ""), 16)


def test_tracing_cpumask_parses_as_the_kernel(kernel_instance: Path) -> None:
    nr_cpus = possible_cpus()
    for text in CPUMASKS:
        try:
            ours: int | str = parse_cpumask(text, nr_cpus)
        except TracefsError as exc:
            ours = errno.errorcode[exc.errno]
        assert ours == kernel_cpumask(kernel_instance, text), text


def test_an_empty_write_is_answered_by_fuse(kernel_instance: Path, scratch: Path) -> None:
    """FUSE answers a write of 0 bytes itself (0) before any daemon sees it;
    the kernel's files refuse it (tracing_on: kstrtoul of nothing, EINVAL).
    Found by test_fuzz_control; documented in docs/emulation.md."""
    from ..integration.conftest import start_mount, stop_mount

    mount = start_mount(scratch / f"empty-{os.getpid()}", scratch / f"empty-{os.getpid()}.log")
    try:
        answers = []
        for root in (kernel_instance, mount.path):
            fd = os.open(root / "tracing_on", os.O_WRONLY)
            try:
                answers.append(os.write(fd, b""))
            except OSError as exc:
                answers.append(errno.errorcode[exc.errno or 0])
            finally:
                os.close(fd)
        assert answers == ["EINVAL", 0]
    finally:
        stop_mount(mount)
