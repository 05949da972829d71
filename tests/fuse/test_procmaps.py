"""PROCMAP_QUERY against a whole maps read, on the same real processes: the same mappings, less work.

Each case is a process with some mappings of "our" file (a file on the
machine's own filesystem: to the tracker a device is just two numbers)
among others: anonymous ones, other files' (the interpreter's libraries),
shmem, memfd, a deleted file with a name in no encoding. Both paths read the
same maps descriptor, for every device in the process, and must agree
mapping for mapping; then two trackers, one without ``PROCMAP_QUERY``, must
tell the engine the same.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest
import trio

from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._tree import Vma
from tracefs_fuse.fuse._mmap import MappingTracker
from tracefs_fuse.fuse._procmaps import parse_maps, query_maps, read_all

from ..process.test_memory import Client, spawn  # noqa: F401  (fixture)
from .test_mmap import PATH, FakeEngine, FakeInodes, Recorder

#: A process that makes mappings on request; every answer is one line.
MAPPER = r"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
keep = []
print("state=ready", flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "map":  # map PATH [w] [x] [private] [off=BYTES]
        opts = dict(a.split("=") if "=" in a else (a, "") for a in args[1:])
        fd = os.open(args[0], os.O_RDWR if "w" in opts else os.O_RDONLY)
        prot = (mmap.PROT_READ | (mmap.PROT_WRITE if "w" in opts else 0)
                | (mmap.PROT_EXEC if "x" in opts else 0))
        flags = mmap.MAP_PRIVATE if "private" in opts else mmap.MAP_SHARED
        keep.append(mmap.mmap(fd, 4096, flags=flags, prot=prot, offset=int(opts.get("off", 0))))
        os.close(fd)
    elif cmd == "many":  # N anonymous vmas: one region, every other page PROT_NONE
        n = int(args[0])
        addr = libc.mmap(None, n * 4096, mmap.PROT_READ,
                         mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, -1, 0)  # MAP_NORESERVE
        for i in range(1, n, 2):
            assert libc.mprotect(addr + i * 4096, 4096, 0) == 0  # PROT_NONE
    elif cmd == "files":  # files PATH N: N one-page vmas of PATH that cannot merge
        fd = os.open(args[0], os.O_RDONLY)
        for i in range(int(args[1])):
            keep.append(mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ,
                                  offset=(i % 2) * 4096))
        os.close(fd)
    elif cmd == "shmem":  # MAP_SHARED | MAP_ANONYMOUS: a shmem file ("/dev/zero (deleted)")
        keep.append(mmap.mmap(-1, 8192, flags=mmap.MAP_SHARED))
    elif cmd == "memfd":
        fd = os.memfd_create("procmaps-case")
        os.ftruncate(fd, 8192)
        keep.append(mmap.mmap(fd, 8192, flags=mmap.MAP_SHARED))
        os.close(fd)
    elif cmd == "weird":  # a deleted file whose name is not UTF-8
        path = os.fsencode(args[0]) + b"/\xff\xfe name"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 4096)
        keep.append(mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED))
        os.unlink(path)
        os.close(fd)
    elif cmd == "unmap":
        keep.pop(0).close()
    elif cmd == "quit":
        break
    print("ok", flush=True)
"""

#: Steps of each case ({file}: our file, {other}: a second file of the same
#: device, {dir}: a directory on it).
CASES = {
    "ours alone": ["map {file}"],
    "nothing of ours": ["many 200", "shmem", "memfd"],
    "ours among anonymous vmas": ["many 500", "map {file}", "many 500", "map {file} off=4096"],
    "every kind of ours": ["map {file} w", "map {file} private", "map {file} x private",
                           "map {file} off=4096"],
    "ours among other files of the device": ["files {other} 300", "map {file}",
                                             "files {other} 300"],
    "ours among shmem, memfd and a name in no encoding": ["shmem", "map {file}", "memfd",
                                                         "weird {dir}", "map {file} private"],
    "ours after an unmap": ["map {file}", "map {file} off=4096", "unmap"],
}


def device_of(st: os.stat_result) -> str:
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"


def devices_in(maps: bytes) -> set[str]:
    """Every device a maps text names, 00:00 (no file) included."""
    return {line.split()[3].decode() for line in maps.splitlines()}


def file_backed(maps: bytes) -> int:
    """Vmas with a file (``show_map_vma`` prints 00:00 and 0 for the others)."""
    return sum(1 for line in maps.splitlines() if line.split()[3:5] != [b"00:00", b"0"])


class Case:
    def __init__(self, tmp_path: Path, spawn: Callable[..., Client]) -> None:  # noqa: F811
        self.file = tmp_path / "buffer"
        self.file.write_bytes(bytes(8192))
        other = tmp_path / "other"
        other.write_bytes(bytes(8192))
        self.words = {"file": self.file, "other": other, "dir": tmp_path}
        self.device = device_of(self.file.stat())
        self.client = spawn(sys.executable, "-c", MAPPER)
        assert self.client.banner == {"state": "ready"}

    def run(self, steps: list[str]) -> None:
        for step in steps:
            assert self.client.ask(step.format(**self.words)) == "ok", step

    def tracker(self) -> tuple[MappingTracker, Recorder]:
        recorder = Recorder()
        tracker = MappingTracker(
            FakeEngine(recorder), FakeInodes(self.file.stat().st_ino),  # type: ignore[arg-type]
            self.device, Tgid)
        return tracker, recorder


@pytest.fixture
def case(tmp_path: Path, spawn: Callable[..., Client]) -> Case:  # noqa: F811
    return Case(tmp_path, spawn)


@pytest.mark.parametrize("steps", CASES.values(), ids=CASES.keys())
def test_the_query_finds_what_the_maps_show(case: Case, steps: list[str]) -> None:
    case.run(steps)
    fd = os.open(f"/proc/{case.client.pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = read_all(fd)
        devices = devices_in(text) - {"00:00"}
        assert case.device in devices
        for device in devices | {""}:
            answer = query_maps(fd, device)
            assert answer is not None, "this kernel has PROCMAP_QUERY (6.11+)"
            found, queries = answer
            assert found == parse_maps(text, device), device
            assert queries == file_backed(text) + 1
    finally:
        os.close(fd)


@pytest.mark.parametrize("steps", CASES.values(), ids=CASES.keys())
def test_the_engine_hears_the_same_without_procmap_query(case: Case, steps: list[str]) -> None:
    case.run(steps)
    (asked, asked_engine), (read, read_engine) = case.tracker(), case.tracker()
    read._query_supported = False
    try:
        for tracker in (asked, read):
            tracker.refresh(case.client.pid, PATH)
        assert asked_engine.vmas == read_engine.vmas
        assert asked_engine.mapped == read_engine.mapped
        assert asked.maps(case.client.pid, case.file.stat().st_ino) == \
            read.maps(case.client.pid, case.file.stat().st_ino)
        assert asked.statistics().maps_bytes == 0
        assert read.statistics().queries == 0
    finally:
        asked.close()
        read.close()


def test_finding_a_mapping_among_20000_examines_only_file_backed_vmas(case: Case) -> None:
    """Issue 19, item 3: a GET_READER's look-up no longer reads every mapping.

    The work is the kernel's (it skips vmas without a file under its lock)
    and one query per file-backed vma; nothing is formatted or parsed.
    """
    case.run(["many 20000", "map {file}"])
    with open(f"/proc/{case.client.pid}/maps", "rb") as f:
        text = f.read()
    assert len(text.splitlines()) > 20_000
    asked, asked_engine = case.tracker()
    read, _ = case.tracker()
    read._query_supported = False
    try:
        asked.refresh(case.client.pid, PATH)
        read.refresh(case.client.pid, PATH)
        assert asked_engine.mapped == 1
        work = asked.statistics()
        # one query per file-backed vma and one for the end
        assert (work.full_reads, work.maps_bytes, work.queries) == (0, 0, file_backed(text) + 1)
        assert file_backed(text) < 200
        assert read.statistics().maps_bytes >= len(text)
    finally:
        asked.close()
        read.close()


async def test_a_look_up_in_a_lane_leaves_the_trio_thread_free(case: Case) -> None:
    """Issue 19, item 3: GET_READER's look-up runs on a worker thread of the
    caller's lane, so while one is held up (here: stopped inside ``_find``)
    the trio thread keeps serving; what it found is applied on return."""
    case.run(["many 2000", "map {file}"])
    tracker, engine = case.tracker()
    entered = threading.Event()
    release = threading.Event()
    threads: list[int] = []
    find = tracker._find

    def held_find(tgid: Tgid) -> tuple[int, dict[int, tuple[int, Vma]]]:
        threads.append(threading.get_ident())
        entered.set()
        assert release.wait(30)
        return find(tgid)

    tracker._find = held_find  # type: ignore[method-assign]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tracker.refresh_in_lane, case.client.pid, PATH)
            await trio.to_thread.run_sync(entered.wait, 30)
            # The trio thread is free meanwhile: this runs, and nothing was told yet.
            await trio.sleep(0)
            assert engine.mapped == 0
            release.set()
        assert engine.mapped == 1
        assert threads and threading.get_ident() not in threads
        assert not tracker._lanes  # an idle lane is dropped
    finally:
        tracker.close()
