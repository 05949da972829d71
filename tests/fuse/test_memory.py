"""VmProcessMemory against real processes: faults, read-only pages, exit, exec, pid reuse.

The targets are ``tests/clients/mem_pages.c`` (a known page layout) and
``mem_leader.c`` (a leader that exits before its thread). Pid reuse is forced
with ``/proc/sys/kernel/ns_last_pid`` and ASLR is switched off with
``setarch -R`` so that the old process's addresses are valid in its
successor: a write that slipped through would land.
"""

from __future__ import annotations

import ctypes
import os
import select
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.fuse._memory import PAGE_SIZE, VmProcessMemory
from tracefs_fuse.fuse._proc_events import ExitEvent, ProcConnector

TIMEOUT_S = 5.0


class Client:
    """A line-driven helper process; every read is bounded by TIMEOUT_S.

    Shared with test_proc_events and test_tasks, with ``spawn`` and
    ``spawn_on_pid``.
    """

    def __init__(self, argv: list[str | bytes]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._buf = b""
        self.banner = self.fields(self.readline())

    @property
    def pid(self) -> Tgid:
        return Tgid(self.proc.pid)

    def readline(self) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if not select.select([fd], [], [], TIMEOUT_S)[0]:
                raise TimeoutError(f"no line from {self.proc.args!r} in {TIMEOUT_S} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError(f"{self.proc.args!r} closed its stdout")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        return self.readline()

    @staticmethod
    def fields(line: str) -> dict[str, str]:
        return dict(item.split("=", 1) for item in line.split())

    def quit(self) -> None:
        """Ask it to exit and reap it."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"quit\n")
        self.proc.stdin.close()
        assert self.proc.wait(TIMEOUT_S) == 0

    def exit_unreaped(self) -> None:
        """Ask it to exit and wait until it is a zombie, without reaping it."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"quit\n")
        self.proc.stdin.close()
        # WNOWAIT leaves the zombie in place; Popen.wait() reaps it later.
        os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)

    def kill(self) -> None:
        """Kill it if it still runs, reap it and close our ends of its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT_S)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., Client]]:
    clients: list[Client] = []

    def start(*argv: str | bytes | Path) -> Client:
        client = Client([a if isinstance(a, bytes) else str(a) for a in argv])
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.kill()


@pytest.fixture
def memory() -> Iterator[VmProcessMemory]:
    mem = VmProcessMemory()
    yield mem
    mem.close()


@pytest.fixture
def pages(c_client: Callable[[str], Path], spawn: Callable[..., Client]) -> Client:
    return spawn(c_client("mem_pages"))


def base(client: Client) -> int:
    return int(client.banner["base"], 16)


def word(client: Client) -> int:
    return int(client.banner["word"], 16)


def page0(off: int, n: int) -> bytes:
    return bytes((off + i) & 0xFF for i in range(n))


def page1(off: int, n: int) -> bytes:
    return bytes(0xFF - ((off + i) & 0xFF) for i in range(n))


def spawn_on_pid(spawn: Callable[..., Client], pid: int, *argv: str | bytes | Path) -> Client:
    """Start ``argv`` as process ``pid`` (which must be free) via ns_last_pid.

    Another process on the machine may fork in between and take the number;
    retry a bounded number of times.
    """
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        client = spawn(*argv)
        if client.pid == pid:
            return client
        client.kill()
    pytest.fail(f"could not get pid {pid} back in 50 attempts")


# -- reads --------------------------------------------------------------------------------


def test_memory_read_returns_both_pages(memory: VmProcessMemory, pages: Client) -> None:
    got = memory.read(pages.pid, base(pages), 2 * PAGE_SIZE)
    assert got == page0(0, PAGE_SIZE) + page1(0, PAGE_SIZE)


def test_memory_read_stops_exactly_at_unmapped_page(memory: VmProcessMemory,
                                                    pages: Client) -> None:
    start = base(pages) + 2 * PAGE_SIZE - 5
    assert memory.read(pages.pid, start, 10) == page1(PAGE_SIZE - 5, 5)
    assert memory.read(pages.pid, start - PAGE_SIZE, PAGE_SIZE + 10) == (
        page0(PAGE_SIZE - 5, 5) + page1(0, PAGE_SIZE))
    assert memory.read(pages.pid, base(pages) + 2 * PAGE_SIZE, 1) == b""


def test_memory_read_beyond_one_syscall_of_iovecs(memory: VmProcessMemory) -> None:
    # 1030 pages need two batches of at most 1024 iovecs; our own memory will do.
    size = 1030 * PAGE_SIZE
    data = bytes(range(256)) * (size // 256)
    buf = ctypes.create_string_buffer(data, size)
    got = memory.read(Tgid(os.getpid()), ctypes.addressof(buf) + 7, size - 7)
    assert got == data[7:]


def test_memory_unknown_pid_reads_and_writes_nothing(memory: VmProcessMemory,
                                                     pages: Client) -> None:
    assert memory.read(Tgid(0x3FFFFFFF), base(pages), 1) == b""
    assert memory.write(Tgid(0x3FFFFFFF), base(pages), b"\x00") == 0


def test_memory_read_zero_bytes(memory: VmProcessMemory, pages: Client) -> None:
    assert memory.read(pages.pid, base(pages), 0) == b""


# -- writes -------------------------------------------------------------------------------


def test_memory_write_one_byte_of_a_word(memory: VmProcessMemory, pages: Client) -> None:
    assert memory.track(pages.pid)
    # What the engine does to set bit 0: read the byte holding it, write it back.
    old = memory.read(pages.pid, word(pages), 1)
    assert old == b"\x44"
    assert memory.write(pages.pid, word(pages), bytes((old[0] | 1,))) == 1
    assert pages.ask("word") == "11223345"


def test_memory_write_stops_exactly_at_read_only_page(memory: VmProcessMemory,
                                                      pages: Client) -> None:
    memory.track(pages.pid)
    assert memory.write(pages.pid, base(pages) + PAGE_SIZE - 3, b"\xee" * 6) == 3
    assert pages.ask(f"dump {PAGE_SIZE - 4} 8") == (
        page0(PAGE_SIZE - 4, 1) + b"\xee" * 3 + page1(0, 4)).hex()


def test_memory_write_refused_by_read_only_page(memory: VmProcessMemory,
                                                pages: Client) -> None:
    memory.track(pages.pid)
    assert memory.write(pages.pid, base(pages) + PAGE_SIZE, b"\x00") == 0
    assert memory.write(pages.pid, base(pages) + 2 * PAGE_SIZE, b"\x00") == 0
    assert pages.ask(f"dump {PAGE_SIZE} 2") == page1(0, 2).hex()


def test_memory_write_across_pages_in_one_call(memory: VmProcessMemory) -> None:
    memory.track(Tgid(os.getpid()))
    buf = ctypes.create_string_buffer(3 * PAGE_SIZE)
    at = ctypes.addressof(buf) + PAGE_SIZE - 2
    assert memory.write(Tgid(os.getpid()), at, b"abcdef" * 1000) == 6000
    assert buf.raw[PAGE_SIZE - 2:PAGE_SIZE - 2 + 6000] == b"abcdef" * 1000


def test_memory_write_refused_for_untracked_process(memory: VmProcessMemory,
                                                    pages: Client) -> None:
    assert memory.write(pages.pid, word(pages), b"\x00") == 0
    assert pages.ask("word") == "11223344"
    assert memory.statistics().writes_refused == 1


def test_memory_write_refused_after_exit(memory: VmProcessMemory, pages: Client) -> None:
    memory.track(pages.pid)
    pages.exit_unreaped()
    # A zombie still owns its pid; the pidfd already says it has exited.
    assert not memory.is_current(pages.pid)
    assert memory.write(pages.pid, word(pages), b"\x00") == 0
    pages.proc.wait(TIMEOUT_S)
    assert memory.write(pages.pid, word(pages), b"\x00") == 0
    assert memory.statistics().writes_refused == 2


def test_memory_write_never_reaches_a_recycled_pid(memory: VmProcessMemory,
                                                   spawn: Callable[..., Client],
                                                   c_client: Callable[[str], Path]) -> None:
    argv = ("setarch", "-R", c_client("mem_pages"))
    first = spawn(*argv)
    memory.track(first.pid)
    first.quit()
    second = spawn_on_pid(spawn, first.pid, *argv)
    assert word(second) == word(first)
    # The number now reaches the newcomer's memory (reads are not checked)...
    assert memory.read(second.pid, word(first), 4) == (0x11223344).to_bytes(4, "little")
    # ...but a write meant for the dead process does not.
    assert memory.write(first.pid, word(first), b"\x00") == 0
    assert second.ask("word") == "11223344"
    # Tracking the number again is tracking someone new: the caller must forget.
    assert memory.track(second.pid) is True
    assert memory.write(second.pid, word(second), b"\x00") == 1
    assert second.ask("word") == "11223300"


def test_memory_write_refused_after_exec(memory: VmProcessMemory,
                                         spawn: Callable[..., Client],
                                         c_client: Callable[[str], Path]) -> None:
    client = spawn("setarch", "-R", c_client("mem_pages"))
    memory.track(client.pid)
    assert client.ask("exec") == "exec'd"
    banner = Client.fields(client.readline())
    assert banner["image"] == "exec'd" and banner["word"] == client.banner["word"]
    assert not memory.is_current(client.pid)
    assert memory.write(client.pid, word(client), b"\x00") == 0
    assert client.ask("word") == "11223344"
    assert memory.track(client.pid) is True
    assert memory.write(client.pid, word(client), b"\x00") == 1


def test_memory_write_nothing(memory: VmProcessMemory, pages: Client) -> None:
    memory.track(pages.pid)
    assert memory.write(pages.pid, word(pages), b"") == 0


# -- tracking -----------------------------------------------------------------------------


def test_memory_track_is_idempotent(memory: VmProcessMemory, pages: Client) -> None:
    assert memory.track(pages.pid) is True
    assert memory.track(pages.pid) is False
    assert memory.tracked() == [pages.pid]
    assert os.readlink(f"/proc/self/fd/{memory.pidfd(pages.pid)}") == "anon_inode:[pidfd]"
    memory.untrack(pages.pid)
    memory.untrack(pages.pid)
    assert memory.statistics().tracked == 0
    with pytest.raises(KeyError):
        memory.pidfd(pages.pid)


def test_memory_track_unknown_pid(memory: VmProcessMemory) -> None:
    with pytest.raises(ProcessLookupError):
        memory.track(Tgid(0x3FFFFFFF))


def test_memory_track_zombie_refused(memory: VmProcessMemory, pages: Client) -> None:
    pages.exit_unreaped()
    with pytest.raises(ProcessLookupError):
        memory.track(pages.pid)
    assert memory.tracked() == []


def test_memory_track_forked_child_before_exec(memory: VmProcessMemory, pages: Client) -> None:
    child = Tgid(int(Client.fields(pages.ask("fork"))["child"]))
    assert memory.track(child, parent=pages.pid)
    # The child's copy of the page, not the parent's.
    assert memory.write(child, word(pages), b"\x00") == 1
    assert memory.read(child, word(pages), 4) == (0x11223300).to_bytes(4, "little")
    assert pages.ask("word") == "11223344"


def test_memory_track_refuses_execd_child(memory: VmProcessMemory, pages: Client) -> None:
    # Popen forked and exec'd it: enablers copied at its fork must not follow.
    with pytest.raises(ProcessLookupError, match="exec'd"):
        memory.track(pages.pid, parent=Tgid(os.getpid()))
    assert memory.tracked() == []


def test_memory_track_refuses_child_sharing_parent_mm(memory: VmProcessMemory,
                                                      pages: Client) -> None:
    # vfork/posix_spawn children: once one execs, its pid leads to the new
    # program while the pinned mm lives on in the parent.
    child = Tgid(int(Client.fields(pages.ask("vmfork"))["child"]))
    with pytest.raises(ProcessLookupError, match="shares the mm"):
        memory.track(child, parent=pages.pid)
    assert memory.tracked() == []
    # A parent that is gone shares nothing.
    assert memory.track(child, parent=Tgid(0x3FFFFFFF))


async def test_memory_leader_exited_first(memory: VmProcessMemory,
                                          spawn: Callable[..., Client],
                                          c_client: Callable[[str], Path]) -> None:
    with ProcConnector() as connector:
        client = spawn(c_client("mem_leader"))
        # The leader's exit event is sent after it dropped its mm.
        with trio.fail_after(TIMEOUT_S):
            async for event in connector:
                if isinstance(event, ExitEvent) and event.pid == client.pid:
                    break
    assert memory.track(client.pid)
    addr = word(client)
    assert memory.read(client.pid, addr, 4) == (0x55667788).to_bytes(4, "little")
    assert memory.write(client.pid, addr, b"\x99") == 1
    assert client.ask("word") == "55667799"
    assert memory.statistics().leader_fallbacks == 2
    assert memory.is_current(client.pid)


def test_memory_addresses_beyond_user_space(memory: VmProcessMemory, pages: Client) -> None:
    memory.track(pages.pid)
    top = (1 << 64) - 1
    assert memory.read(pages.pid, top, 1) == b""
    assert memory.read(pages.pid, top, 2) == b""
    assert memory.write(pages.pid, top, b"\x00") == 0
    assert memory.write(pages.pid, 1 << 63, b"\x00") == 0
    assert memory.read(pages.pid, -1, 1) == b""
