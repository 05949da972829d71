"""Fakes the engine is driven with in unit tests: memory, recorders."""

from __future__ import annotations

import struct
from typing import Callable

from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._task import Task

PAGE = 4096


class FakeMemory:
    """Address spaces of fake processes: page-granular, optionally read-only."""

    def __init__(self) -> None:
        self.pages: dict[Tgid, dict[int, tuple[bytearray, bool]]] = {}
        self.writes: list[tuple[Tgid, int, bytes]] = []

    def map(self, tgid: int, addr: int, size: int = PAGE, *, writable: bool = True) -> int:
        space = self.pages.setdefault(Tgid(tgid), {})
        for page in range(addr // PAGE, (addr + size + PAGE - 1) // PAGE):
            space[page] = (bytearray(PAGE), writable)
        return addr

    def protect(self, tgid: int, addr: int, *, writable: bool) -> None:
        space = self.pages[Tgid(tgid)]
        data, _ = space[addr // PAGE]
        space[addr // PAGE] = (data, writable)

    def unmap(self, tgid: int, addr: int) -> None:
        del self.pages[Tgid(tgid)][addr // PAGE]

    def fork(self, parent: int, child: int) -> None:
        self.pages[Tgid(child)] = {p: (bytearray(d), w)
                                   for p, (d, w) in self.pages[Tgid(parent)].items()}

    def read(self, tgid: Tgid, addr: int, size: int) -> bytes:
        out = bytearray()
        space = self.pages.get(tgid, {})
        while len(out) < size:
            page = space.get((addr + len(out)) // PAGE)
            if page is None:
                break
            off = (addr + len(out)) % PAGE
            out += page[0][off:off + size - len(out)]
        return bytes(out)

    def write(self, tgid: Tgid, addr: int, data: bytes) -> int:
        done = 0
        space = self.pages.get(tgid, {})
        while done < len(data):
            page = space.get((addr + done) // PAGE)
            if page is None or not page[1]:
                break
            off = (addr + done) % PAGE
            n = min(PAGE - off, len(data) - done)
            page[0][off:off + n] = data[done:done + n]
            done += n
        self.writes.append((tgid, addr, bytes(data[:done])))
        return done

    # helpers for tests ------------------------------------------------------
    def put(self, tgid: int, addr: int, data: bytes) -> None:
        assert self.write(Tgid(tgid), addr, data) == len(data)
        self.writes.pop()

    def u32(self, tgid: int, addr: int) -> int:
        return int.from_bytes(self.read(Tgid(tgid), addr, 4), "little")

    def u64(self, tgid: int, addr: int) -> int:
        return int.from_bytes(self.read(Tgid(tgid), addr, 8), "little")


class FakeRecorder:
    """A RecordSink that keeps what it is given.

    ``before``: the byte a reservation has just before the entry (the last
    byte of a ring buffer event's header), which ``accept`` is asked about.
    """

    def __init__(self, *, on: bool = True, max_length: int = 4080) -> None:
        self.on = on
        self.max_length = max_length
        self.before = 0
        self.entries: list[tuple[bytes, Task]] = []

    def can_record(self, length: int, cpu: int) -> bool:
        return self.on and length <= self.max_length

    def record(self, entry: bytes, task: Task,
               accept: Callable[[int], bool] | None = None) -> None:
        if accept is None or accept(self.before):
            self.entries.append((bytes(entry), task))


class Client:
    """A fake process with a struct user_reg, name strings and enable words."""

    REG = 0x10000      # struct user_reg / user_unreg scratch
    NAMES = 0x20000    # command strings
    WORDS = 0x30000    # enable words

    def __init__(self, memory: FakeMemory, tgid: int, *, perfmon: bool = True) -> None:
        self.memory = memory
        self.tgid = Tgid(tgid)
        self.task = Task(pid=tgid, tgid=self.tgid, perfmon=perfmon, cpu=0, comm=f"c{tgid}")
        for base in (self.REG, self.NAMES, self.WORDS):
            memory.map(tgid, base)

    def name(self, text: str | bytes, addr: int | None = None) -> int:
        raw = text.encode("latin-1") if isinstance(text, str) else text
        addr = self.NAMES if addr is None else addr
        self.memory.put(self.tgid, addr, raw + b"\0")
        return addr

    def user_reg(self, command: str, *, bit: int = 31, word: int = 0, enable_size: int = 4,
                 flags: int = 0, size: int = 28, enable_addr: int | None = None,
                 name_args: int | None = None, extra: bytes = b"") -> int:
        addr = self.WORDS + 8 * word if enable_addr is None else enable_addr
        names = self.name(command) if name_args is None else name_args
        raw = struct.pack("<IBBHQQI", size, bit, enable_size, flags, addr, names, 0xDEADBEEF)
        self.memory.put(self.tgid, self.REG, raw + extra)
        return self.REG

    def user_unreg(self, *, bit: int = 31, word: int = 0, size: int = 16,
                   reserved: int = 0, reserved2: int = 0) -> int:
        raw = struct.pack("<IBBHQ", size, bit, reserved, reserved2, self.WORDS + 8 * word)
        self.memory.put(self.tgid, self.REG, raw)
        return self.REG

    def write_index(self) -> int:
        return self.memory.u32(self.tgid, self.REG + 24)

    def word(self, word: int = 0) -> int:
        return self.memory.u64(self.tgid, self.WORDS + 8 * word)
