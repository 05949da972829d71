"""``registration_reads``: what a DIAG_IOCSREG reads of its caller after the
size, said ahead (the lane reads it all in one trip, fuse/_prefetch.py), must be
what the engine's own registration then reads, in the same order, in every era."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._uapi import Abi
from tracefs_fuse.engine._user_events_data import UserEventsData

from .fakes import Client, FakeMemory
from .test_legacy_abi import LegacyClient
from .test_legacy_abi import World as LegacyWorld
from .test_user_events import REG, World

NAME_END = Client.NAMES + 4096 - 3


def reads_compared(memory: FakeMemory, data: UserEventsData, call: Callable[[], object],
                   tgid: Tgid, at: int, enable_addr: int | None) -> tuple[list, list]:
    """(what the engine read, what registration_reads said it would)."""
    reads: list[tuple[int, int]] = []
    read = memory.read

    def logged(tgid: Tgid, addr: int, size: int) -> bytes:
        if enable_addr is None or not enable_addr <= addr < enable_addr + 8:
            reads.append((addr, size))  # not the enable bit's read-modify-write
        return read(tgid, addr, size)

    memory.read = logged  # type: ignore[method-assign]
    try:
        call()
    except TracefsError:
        pass
    finally:
        memory.read = read  # type: ignore[method-assign]
    said: list[tuple[int, int]] = [(at, 4)]

    def planned(addr: int, size: int) -> bytes:
        said.append((addr, size))
        return read(tgid, addr, size)

    data.registration_reads(at, int.from_bytes(read(tgid, at, 4), "little"), planned)
    return reads, said


@pytest.mark.parametrize("kwargs, arg", [
    (dict(), None),
    (dict(size=64), None),
    (dict(size=4096), None),
    (dict(size=4097), None),                   # E2BIG: nothing after the size
    (dict(size=27), None),                     # EINVAL: nothing after the size
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
def test_mainline(kwargs: dict, arg: int | None) -> None:
    w = World()
    c = w.client()
    f = w.open()
    w.memory.put(c.tgid, NAME_END, b"abc")
    at = c.user_reg("v01 u32 a", **kwargs) if arg is None else arg
    engine, said = reads_compared(w.memory, w.data, lambda: w.data.ioctl(f, REG, at, c.task),
                                  c.tgid, at, kwargs.get("enable_addr", Client.WORDS))
    assert said == engine


@pytest.mark.parametrize("mode, abi, kwargs", [
    ("5.18", Abi.V5_18, dict()),
    ("5.18", Abi.V5_18, dict(size=40, extra=b"\0" * 16)),
    ("5.18", Abi.V5_18, dict(size=40, extra=b"\1")),   # E2BIG
    ("6.1", Abi.V6_1, dict()),
    ("6.1", Abi.V6_1, dict(size=19)),                  # EINVAL: nothing after the size
    ("6.1", Abi.V6_1, dict(name_args=0)),
    ("auto", Abi.V5_18, dict()),
    ("auto", Abi.V6_1, dict()),
    ("auto", Abi.V6_1, dict(size=23)),                 # no era: nothing after the size
])
def test_legacy(mode: str, abi: Abi, kwargs: dict) -> None:
    w = LegacyWorld(mode)
    c: LegacyClient = w.client()
    f = w.open()
    at = c.legacy_reg(abi, "v01 u32 a", **kwargs)
    engine, said = reads_compared(w.memory, w.data, lambda: w.data.ioctl(f, REG, at, c.task),
                                  c.tgid, at, None)
    assert said == engine
