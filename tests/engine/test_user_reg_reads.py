"""``user_reg_reads``: what a mainline DIAG_IOCSREG reads of its caller after the
size, said ahead (the lane reads it all in one trip, fuse/_prefetch.py), must be
what the engine's own registration then reads, in the same order."""

from __future__ import annotations

import pytest

from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._user_events_data import user_reg_reads

from .fakes import Client
from .test_user_events import REG, World

NAME_END = Client.NAMES + 4096 - 3


@pytest.mark.parametrize("kwargs, arg", [
    (dict(), None),
    (dict(size=64), None),
    (dict(size=4096), None),
    (dict(size=32, extra=b"\1\0\0\0"), None),  # E2BIG: nothing after the tail
    (dict(enable_size=2), None),               # EINVAL: no name
    (dict(enable_size=4, bit=32), None),
    (dict(enable_addr=Client.WORDS + 2), None),
    (dict(enable_addr=(1 << 47) - 4096), None),  # EFAULT before the name
    (dict(flags=uapi.USER_EVENT_REG_MAX), None),
    (dict(enable_addr=0x1000), None),          # read as usual; the write fails
    (dict(name_args=0), None),                 # the name is unreadable
    (dict(name_args=NAME_END), None),          # the name runs into unmapped memory
    (dict(), 0x5000),                          # the struct is unmapped: the size only
])
def test_said_ahead_is_what_the_engine_reads(kwargs: dict, arg: int | None) -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.memory.put(c.tgid, NAME_END, b"abc")
    at = c.user_reg("v01 u32 a", **kwargs) if arg is None else arg
    enable_addr = kwargs.get("enable_addr", Client.WORDS)
    reads: list[tuple[int, int]] = []
    read = w.memory.read

    def logged(tgid: Tgid, addr: int, size: int) -> bytes:
        if not enable_addr <= addr < enable_addr + 8:  # the enable bit's read-modify-write
            reads.append((addr, size))
        return read(tgid, addr, size)

    w.memory.read = logged  # type: ignore[method-assign]
    try:
        w.data.ioctl(f, REG, at, c.task)
    except TracefsError:
        pass
    engine = reads[:]
    said: list[tuple[int, int]] = [(at, 4)]
    size = int.from_bytes(read(c.tgid, at, 4), "little")

    def planned(addr: int, size: int) -> bytes:
        said.append((addr, size))
        return read(c.tgid, addr, size)

    if w.data.reads_mainline(size):
        user_reg_reads(at, size, planned)
    assert said == engine


@pytest.mark.parametrize("size, mainline", [
    (27, False), (28, True), (4096, True), (4097, False), (0, False),
])
def test_which_sizes_are_read_as_mainline(size: int, mainline: bool) -> None:
    assert World().data.reads_mainline(size) is mainline
