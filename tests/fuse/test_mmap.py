"""MappingTracker against real processes mapping a real file: discovery, cost, munmap, exec, exit.

The file lives on the machine's own filesystem (our FUSE device is just a
device number to the tracker); the engine behind it is a fake that counts
``mapped``/``unmapped`` as ``ring_buffer_map``/``_unmap`` count them.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest
import trio

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._tree import Vma
from tracefs_fuse.fuse._mmap import MappingTracker
from tracefs_fuse.fuse._procmaps import parse_maps

from ..process.test_memory import Client

PATH = ("per_cpu", "cpu0", "trace_pipe_raw")

#: A process that maps the file on request; "exec" replaces its image.
MAPPER = r"""
import mmap, os, sys
maps = []
print("state=ready", flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "map":
        fd = os.open(args[0], os.O_RDWR if "w" in args[1:] else os.O_RDONLY)
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if "w" in args[1:] else 0)
        flags = mmap.MAP_PRIVATE if "private" in args[1:] else mmap.MAP_SHARED
        maps.append(mmap.mmap(fd, 8192, flags=flags, prot=prot))
        print("mapped", flush=True)
    elif cmd == "unmap":
        maps.pop().close()
        print("unmapped", flush=True)
    elif cmd == "exec":
        os.execv(sys.executable, [sys.executable, "-c", "print('new image', flush=True); input()"])
    elif cmd == "quit":
        break
"""


class Recorder:
    """The engine's side of one file: ``ring_buffer_map``'s count and refusals."""

    def __init__(self) -> None:
        self.mapped = 0
        self.vmas: list[Vma] = []

    def mapped_(self, vma: Vma) -> None:
        if vma.write or not vma.shared:
            raise TracefsError(errno.EPERM, "read-only shared mappings only")
        self.mapped += 1
        self.vmas.append(vma)

    def unmapped(self) -> None:
        assert self.mapped > 0
        self.mapped -= 1

    def map_read(self, offset: int, size: int) -> bytes:
        return b"x" * size


class FakeEngine:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def mappable(self, path: tuple[str, ...]) -> object:
        if path != PATH:
            return None
        recorder = self.recorder

        class Mappable:
            mapped = staticmethod(recorder.mapped_)
            unmapped = staticmethod(recorder.unmapped)
            map_read = staticmethod(recorder.map_read)

        return Mappable()


class FakeInodes:
    def __init__(self, ino: int) -> None:
        self.ino = ino

    def path(self, ino: int) -> tuple[str, ...] | None:
        return PATH if ino == self.ino else None


class World:
    def __init__(self, file: Path, spawn: Callable[..., Client]) -> None:
        st = file.stat()
        self.file = file
        self.spawn = spawn
        self.recorder = Recorder()
        self.tracker = MappingTracker(
            FakeEngine(self.recorder), FakeInodes(st.st_ino),  # type: ignore[arg-type]
            f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}", Tgid)

    def mapper(self) -> Client:
        client = self.spawn(sys.executable, "-c", MAPPER)
        assert client.banner == {"state": "ready"}
        return client

    def mapped(self, times: int = 1) -> Client:
        """A process that maps the file ``times`` times, known to the tracker."""
        client = self.mapper()
        for _ in range(times):
            assert client.ask(f"map {self.file}") == "mapped"
        self.tracker.refresh(client.pid, PATH)
        assert self.recorder.mapped == times
        return client


@pytest.fixture
def world(tmp_path: Path, spawn: Callable[..., Client]) -> Iterator[World]:  # noqa: F811
    file = tmp_path / "buffer"
    file.write_bytes(bytes(8192))
    w = World(file, spawn)
    yield w
    w.tracker.close()


def test_parse_maps_takes_names_in_no_encoding() -> None:
    text = (b"7f0000000000-7f0000002000 r--s 00001000 00:2a 17    /tmp/\xff\xfe name (deleted)\n"
            b"7f0000002000-7f0000003000 rw-p 00000000 00:2a 18    /tmp/a\\012b\n"
            b"7f0000003000-7f0000004000 r-xs 00000000 08:01 17    /usr/lib/x\n"
            b"7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0     [stack]\n")
    assert parse_maps(text, "00:2a") == {
        0x7f0000000000: (17, Vma(pgoff=1, nr_pages=2, write=False, execute=False, shared=True)),
        0x7f0000002000: (18, Vma(pgoff=0, nr_pages=1, write=True, execute=False, shared=False)),
    }


def test_a_known_mapping_is_checked_without_reading_the_maps(world: World) -> None:
    """Issue 11, item 8: after discovery, GET_READER costs one PROCMAP_QUERY."""
    client = world.mapper()
    assert client.ask(f"map {world.file}") == "mapped"
    world.tracker.fault(client.pid, PATH, 0, 4096)
    assert world.recorder.mapped == 1
    before = world.tracker.statistics()
    for _ in range(100):
        world.tracker.refresh(client.pid, PATH)
        world.tracker.fault(client.pid, PATH, 4096, 4096)
    after = world.tracker.statistics()
    assert after.full_reads == before.full_reads
    assert after.queries - before.queries == 200
    assert world.recorder.mapped == 1


def test_without_procmap_query_the_answers_are_the_same(world: World) -> None:
    """Kernels before 6.11: every check reads the maps, nothing else changes."""
    world.tracker._query_supported = False
    client = world.mapped()
    assert client.ask("unmap") == "unmapped"
    world.tracker.sweep()
    assert world.recorder.mapped == 0
    assert world.tracker.statistics().queries == 0


def test_munmap_is_noticed_by_the_next_check(world: World) -> None:
    client = world.mapped()
    assert client.ask("unmap") == "unmapped"
    world.tracker.sweep()
    assert world.recorder.mapped == 0
    assert world.tracker.statistics().processes == 0


def test_a_second_mapping_counts_twice_and_closes_twice(world: World) -> None:
    client = world.mapped(times=2)
    assert client.ask("unmap") == "unmapped"
    world.tracker.refresh(client.pid, PATH)
    assert world.recorder.mapped == 1
    assert client.ask("unmap") == "unmapped"
    world.tracker.sweep()
    assert world.recorder.mapped == 0


def test_a_refused_mapping_faults_and_is_reported_once(world: World) -> None:
    client = world.mapper()
    assert client.ask(f"map {world.file} private") == "mapped"
    for _ in range(3):
        with pytest.raises(TracefsError) as refused:
            world.tracker.fault(client.pid, PATH, 0, 4096)
        assert refused.value.errno == errno.EIO
    assert world.recorder.mapped == 0 and world.recorder.vmas == []
    # It still tells a fault from a splice(): the process maps the file.
    assert world.tracker.maps(client.pid, world.file.stat().st_ino)


def test_exec_closes_the_old_images_mappings(world: World) -> None:
    client = world.mapped()
    assert client.ask("exec") == "new image"
    world.tracker.refresh(client.pid, PATH)  # same pid, no mapping in this image
    assert world.recorder.mapped == 0
    assert world.tracker.statistics().processes == 0


async def test_exit_closes_the_mappings_at_once(world: World) -> None:
    """Issue 11, item 6: no later request is needed to notice the exit."""
    client = world.mapped()
    changed = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.tracker.follow_exits, changed.set)
        client.quit()
        with trio.fail_after(5):
            await changed.wait()
        nursery.cancel_scope.cancel()
    assert world.recorder.mapped == 0
    assert world.tracker.statistics().processes == 0
