"""EnableWrites: enable bits written into images by workers (process/_enable_writes.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import trio

from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.process._enable_writes import ESCAPE_S, HELD_BITS_WAIT_S, EnableWrites

Bits = list[tuple[tuple[int, int], bool]]


@dataclass(eq=False)
class FakeImage:
    tgid: Tgid
    owner: int = 1000
    #: What was written into it, in order: ((addr, bit), value).
    written: list[tuple[tuple[int, int], bool]] = field(default_factory=list)
    #: Set to let a write into it go on (None: never waits).
    go: threading.Event | None = None
    closed: bool = False


def write_bits(image: FakeImage, bits: Bits) -> tuple[int, int]:
    if image.go is not None:
        assert image.go.wait(10)
    image.written.extend(bits)
    return len(bits), 0


def close(image: FakeImage) -> None:
    image.closed = True


@pytest.mark.parametrize(("writes", "expected"), [
    ([(0x10, 0, True)], [((0x10, 0), True)]),
    ([(0x10, 0, True), (0x10, 1, True), (0x10, 0, False)],
     [((0x10, 0), True), ((0x10, 1), True), ((0x10, 0), False)]),
    ([(0x20, 3, True), (0x20, 3, False), (0x20, 3, True)],
     [((0x20, 3), True), ((0x20, 3), False), ((0x20, 3), True)]),
])
def test_at_once_every_bit_in_order(writes: list[tuple[int, int, bool]],
                                    expected: Bits) -> None:
    """Without lanes each bit is written when queued, in order."""
    bits = EnableWrites[FakeImage](write_bits, close)
    image = FakeImage(Tgid(7))
    for addr, bit, value in writes:
        bits.write(image, addr, bit, value)
    assert image.written == expected
    assert bits.writes == len(expected)
    assert all(event.is_set() for event in bits.take_held())


def threaded(nursery: trio.Nursery) -> EnableWrites[FakeImage]:
    """Workers on real threads, reporting to this trio thread, as in the daemon."""
    def in_lane(uid: int, work: Callable[[], object], done: Callable[[object], None]) -> None:
        async def run() -> None:
            done(await trio.to_thread.run_sync(work, abandon_on_cancel=True))
        nursery.start_soon(run)

    bits = EnableWrites[FakeImage](write_bits, close)
    bits.in_lane = in_lane
    bits.call_soon = trio.lowlevel.current_trio_token().run_sync_soon
    return bits


async def test_a_stuck_image_holds_up_only_itself() -> None:
    """Two images of one owner, the first stuck: the second's bits are
    written once a waiting reply asks for another worker, the first's
    latest values in order once it goes on."""
    async with trio.open_nursery() as nursery:
        bits = threaded(nursery)
        stuck = FakeImage(Tgid(1), go=threading.Event())
        other = FakeImage(Tgid(2))
        bits.write(stuck, 0x10, 0, True)
        assert len(bits.take_held()) == 1
        bits.write(other, 0x20, 1, True)
        held = bits.take_held()
        start = trio.current_time()
        await bits.written(held)
        assert held[0].is_set()
        assert trio.current_time() - start < HELD_BITS_WAIT_S
        assert other.written == [((0x20, 1), True)]
        assert stuck.written == []
        # Meanwhile its value changes twice: only the latest is queued.
        bits.write(stuck, 0x10, 0, False)
        bits.write(stuck, 0x10, 0, True)
        assert stuck.go is not None
        stuck.go.set()
        await bits.written(bits.take_held())
        assert stuck.written == [((0x10, 0), True), ((0x10, 0), True)]
        assert bits.writes == 3


async def test_written_gives_up_after_its_bound() -> None:
    async with trio.open_nursery() as nursery:
        bits = threaded(nursery)
        stuck = FakeImage(Tgid(1), go=threading.Event())
        bits.write(stuck, 0x10, 0, True)
        held = bits.take_held()
        start = trio.current_time()
        await bits.written(held)
        assert HELD_BITS_WAIT_S <= trio.current_time() - start < HELD_BITS_WAIT_S + 20 * ESCAPE_S
        assert not held[0].is_set()
        assert stuck.go is not None
        stuck.go.set()
        await held[0].wait()
        assert stuck.written == [((0x10, 0), True)]


async def test_an_image_forgotten_while_written_is_closed_after() -> None:
    async with trio.open_nursery() as nursery:
        bits = threaded(nursery)
        image = FakeImage(Tgid(1), go=threading.Event())
        idle = FakeImage(Tgid(2))
        bits.write(image, 0x10, 0, True)
        held = bits.take_held()
        assert not bits.forget(image)  # its worker may write through it still
        assert bits.forget(idle)  # nothing queued: close it now
        assert not image.closed and image.go is not None
        image.go.set()
        await held[0].wait()
        assert image.closed
        assert image.written == [((0x10, 0), True)]


def test_a_failing_write_is_logged_and_released(caplog: pytest.LogCaptureFixture) -> None:
    def broken(image: FakeImage, bits: Bits) -> tuple[int, int]:
        raise OSError(22, "Invalid argument")

    bits = EnableWrites[FakeImage](broken, close)
    bits.write(FakeImage(Tgid(3)), 0x10, 0, True)
    assert all(event.is_set() for event in bits.take_held())
    assert "enable bits of 3 not written" in caplog.text
