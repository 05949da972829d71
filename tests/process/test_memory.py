"""ClientMemory against real processes: faults, read-only pages, exit, exec, pid reuse.

The targets are ``tests/clients/mem_pages.c`` (a known page layout) and
``mem_leader.c`` (a leader that exits before its thread). Pid reuse is forced
with ``/proc/sys/kernel/ns_last_pid`` and ASLR is switched off with
``setarch -R`` so that the old process's addresses are valid in its
successor, and a second run of the same program has the same memory layout:
a write that slipped through would land, and only the AT_RANDOM bytes tell
the images apart.
"""

from __future__ import annotations

import ctypes
import os
import select
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.process._memory import (
    PAGE_SIZE,
    BitWrite,
    ClientMemory,
    PutUser,
    Unfetched,
    read_in_lane,
    read_stat,
    write_in_lane,
)

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
def memory() -> Iterator[ClientMemory]:
    mem = ClientMemory()
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


def child_of(client: Client, command: str = "fork") -> Tgid:
    return Tgid(int(Client.fields(client.ask(command))["child"]))


# -- the caller's memory, during its request --------------------------------------------


def test_memory_caller_read_returns_both_pages(memory: ClientMemory, pages: Client) -> None:
    with memory.serving(pages.pid, pages.pid):
        got = memory.read(pages.pid, base(pages), 2 * PAGE_SIZE)
    assert got == page0(0, PAGE_SIZE) + page1(0, PAGE_SIZE)


def test_memory_caller_read_stops_exactly_at_unmapped_page(memory: ClientMemory,
                                                           pages: Client) -> None:
    start = base(pages) + 2 * PAGE_SIZE - 5
    with memory.serving(pages.pid, pages.pid):
        assert memory.read(pages.pid, start, 10) == page1(PAGE_SIZE - 5, 5)
        assert memory.read(pages.pid, start - PAGE_SIZE, PAGE_SIZE + 10) == (
            page0(PAGE_SIZE - 5, 5) + page1(0, PAGE_SIZE))
        assert memory.read(pages.pid, base(pages) + 2 * PAGE_SIZE, 1) == b""


def test_memory_caller_read_beyond_one_syscall_of_iovecs(memory: ClientMemory) -> None:
    # 1030 pages need two batches of at most 1024 iovecs; our own memory will do.
    size = 1030 * PAGE_SIZE
    data = bytes(range(256)) * (size // 256)
    buf = ctypes.create_string_buffer(data, size)
    me = Tgid(os.getpid())
    with memory.serving(me, me):
        got = memory.read(me, ctypes.addressof(buf) + 7, size - 7)
    assert got == data[7:]


def test_memory_caller_write_refused_by_read_only_page(memory: ClientMemory,
                                                       pages: Client) -> None:
    """Without FOLL_FORCE, as the kernel's pin_user_pages_remote(FOLL_WRITE)."""
    with memory.serving(pages.pid, pages.pid):
        assert memory.write(pages.pid, base(pages) + PAGE_SIZE - 3, b"\xee" * 6) == 3
        assert memory.write(pages.pid, base(pages) + PAGE_SIZE, b"\x00") == 0
        assert memory.write(pages.pid, base(pages) + 2 * PAGE_SIZE, b"\x00") == 0
    assert pages.ask(f"dump {PAGE_SIZE - 4} 8") == (
        page0(PAGE_SIZE - 4, 1) + b"\xee" * 3 + page1(0, 4)).hex()


def test_memory_caller_write_across_pages_in_one_call(memory: ClientMemory) -> None:
    me = Tgid(os.getpid())
    buf = ctypes.create_string_buffer(3 * PAGE_SIZE)
    at = ctypes.addressof(buf) + PAGE_SIZE - 2
    with memory.serving(me, me):
        assert memory.write(me, at, b"abcdef" * 1000) == 6000
    assert buf.raw[PAGE_SIZE - 2:PAGE_SIZE - 2 + 6000] == b"abcdef" * 1000


# -- the caller's memory in its lane (issue 19 item 3) ----------------------------------


def test_memory_deferring_answers_from_what_was_fetched_and_records_writes(
        memory: ClientMemory, pages: Client) -> None:
    at = base(pages)
    fetched = {(at, 4): b"abcd"}
    with memory.serving(pages.pid, pages.pid), memory.deferring(fetched) as writes:
        assert memory.read(pages.pid, at, 4) == b"abcd"
        with pytest.raises(Unfetched) as need:
            memory.read(pages.pid, at, 5)  # another read: the lane must make it
        assert memory.write_bit(pages.pid, at, 9, True)
        assert memory.write(pages.pid, at + 8, b"xy") == 2
    assert (need.value.addr, need.value.size) == (at, 5)
    assert writes == [BitWrite(at, 9, True), PutUser(at + 8, b"xy")]
    assert pages.ask("dump 0 16") == page0(0, 16).hex()  # nothing written meanwhile


def test_memory_lane_read_stops_exactly_at_unmapped_page(pages: Client) -> None:
    at = base(pages)
    assert read_in_lane(pages.pid, at, 2 * PAGE_SIZE) == page0(0, PAGE_SIZE) + page1(0, PAGE_SIZE)
    assert read_in_lane(pages.pid, at + 2 * PAGE_SIZE - 5, 10) == page1(PAGE_SIZE - 5, 5)
    assert read_in_lane(pages.pid, at + 2 * PAGE_SIZE, 1) == b""


def test_memory_lane_writes_in_order_up_to_a_bit_that_fails(pages: Client) -> None:
    """A failed bit ends the writes (the kernel returns before its put_user);
    a failed put_user does not (its result is ignored)."""
    at = base(pages)
    writes = [BitWrite(at + 4, 9, True), BitWrite(at + 4, 2, False),
              PutUser(at + PAGE_SIZE, b"\x00"),  # read-only: ignored
              PutUser(at, b"\xaa"),
              BitWrite(at + PAGE_SIZE, 0, True),  # read-only: the end
              PutUser(at + 1, b"\xbb")]
    assert write_in_lane(pages.pid, writes) == writes[4]
    expected = bytearray(page0(0, 8))
    expected[0] = 0xAA
    expected[5] |= 1 << 1
    expected[4] &= ~(1 << 2)
    assert pages.ask("dump 0 8") == expected.hex()
    assert pages.ask(f"dump {PAGE_SIZE} 1") == page1(0, 1).hex()


def test_memory_caller_is_only_the_caller(memory: ClientMemory, pages: Client) -> None:
    """Outside its request, an unpinned process is neither read nor written."""
    with memory.serving(Tgid(os.getpid()), os.getpid()):
        assert memory.read(pages.pid, base(pages), 1) == b""
        assert memory.write(pages.pid, word(pages), b"\x00") == 0
    assert memory.read(pages.pid, base(pages), 1) == b""
    assert memory.write(pages.pid, word(pages), b"\x00") == 0
    assert pages.ask("word") == "11223344"
    assert memory.statistics().writes_refused == 2


def test_memory_nothing_and_nowhere(memory: ClientMemory, pages: Client) -> None:
    memory.pin_caller(pages.pid, pages.pid)
    top = (1 << 64) - 1
    with memory.serving(pages.pid, pages.pid):
        assert memory.read(pages.pid, base(pages), 0) == b""
        assert memory.write(pages.pid, word(pages), b"") == 0
        assert memory.read(pages.pid, top, 2) == b""
        assert memory.read(pages.pid, -1, 1) == b""
    assert memory.read(pages.pid, top, 1) == b""
    assert memory.write(pages.pid, top, b"\x00") == 0
    assert memory.write(pages.pid, 1 << 63, b"\x00") == 0
    assert memory.read(Tgid(0x3FFFFFFF), base(pages), 1) == b""


# -- pinned images -------------------------------------------------------------------------


def test_memory_image_read_modify_write(memory: ClientMemory, pages: Client) -> None:
    memory.pin_caller(pages.pid, pages.pid)
    # What the engine does to set bit 0: read the byte holding it, write it back.
    old = memory.read(pages.pid, word(pages), 1)
    assert old == b"\x44"
    assert memory.write(pages.pid, word(pages), bytes((old[0] | 1,))) == 1
    assert pages.ask("word") == "11223345"
    assert memory.read(pages.pid, base(pages) + 2 * PAGE_SIZE - 2, 4) == page1(PAGE_SIZE - 2, 2)


def test_memory_image_write_forces_a_private_read_only_page(memory: ClientMemory,
                                                            pages: Client) -> None:
    """The documented difference: /proc/<pid>/mem writes with FOLL_FORCE, so a
    private page made read-only after registration still takes the bit, in
    that image only (a private copy-on-write page)."""
    memory.pin_caller(pages.pid, pages.pid)
    assert memory.write(pages.pid, base(pages) + PAGE_SIZE, b"\x00") == 1
    assert pages.ask(f"dump {PAGE_SIZE} 2") == "00" + page1(1, 1).hex()
    assert memory.write(pages.pid, base(pages) + 2 * PAGE_SIZE, b"\x00") == 0


def test_memory_image_gone_after_exit(memory: ClientMemory, pages: Client) -> None:
    image = memory.pin_caller(pages.pid, pages.pid)
    pages.exit_unreaped()
    # A zombie still owns its pid; its image is gone.
    assert not image.alive()
    assert memory.write(pages.pid, word(pages), b"\x00") == 0
    pages.proc.wait(TIMEOUT_S)
    assert memory.write(pages.pid, word(pages), b"\x00") == 0
    assert memory.statistics().writes_refused == 2


def test_memory_image_never_reaches_a_recycled_pid(memory: ClientMemory,
                                                   spawn: Callable[..., Client],
                                                   c_client: Callable[[str], Path]) -> None:
    argv = ("setarch", "-R", c_client("mem_pages"))
    first = spawn(*argv)
    memory.pin_caller(first.pid, first.pid)
    first.quit()
    second = spawn_on_pid(spawn, first.pid, *argv)
    assert word(second) == word(first)
    assert memory.write(first.pid, word(first), b"\x00") == 0
    assert second.ask("word") == "11223344"
    # Pinning the number again pins someone new.
    image = memory.pin_caller(second.pid, second.pid)
    assert image.alive()
    assert memory.write(second.pid, word(second), b"\x00") == 1
    assert second.ask("word") == "11223300"


def test_memory_image_never_reaches_an_execd_image(memory: ClientMemory,
                                                   spawn: Callable[..., Client],
                                                   c_client: Callable[[str], Path]) -> None:
    client = spawn("setarch", "-R", c_client("mem_pages"))
    image = memory.pin_caller(client.pid, client.pid)
    assert client.ask("exec") == "exec'd"
    banner = Client.fields(client.readline())
    assert banner["image"] == "exec'd" and banner["word"] == client.banner["word"]
    assert not image.alive()
    assert memory.read(client.pid, word(client), 4) == b""
    assert memory.write(client.pid, word(client), b"\x00") == 0
    assert client.ask("word") == "11223344"
    assert memory.pin_caller(client.pid, client.pid) is not image
    assert memory.write(client.pid, word(client), b"\x00") == 1


def test_memory_pin_caller_is_idempotent(memory: ClientMemory, pages: Client) -> None:
    image = memory.pin_caller(pages.pid, pages.pid)
    assert memory.pin_caller(pages.pid, pages.pid) is image
    assert memory.images() == [image]
    assert image.identity is not None and any(image.identity.layout)
    assert os.readlink(f"/proc/self/fd/{image.pidfd.fd}") == "anon_inode:[pidfd]"
    memory.unpin(pages.pid)
    memory.unpin(pages.pid)
    assert memory.statistics().images == 0


def test_memory_pin_caller_through_a_thread_of_an_exited_leader(
        memory: ClientMemory, spawn: Callable[..., Client],
        c_client: Callable[[str], Path]) -> None:
    """A leader that exited before its thread has no mm; its live thread does."""
    client = spawn(c_client("mem_leader"))
    thread = int(client.banner["tid"])
    image = memory.pin_caller(client.pid, thread)
    addr = word(client)
    assert memory.read(client.pid, addr, 4) == (0x55667788).to_bytes(4, "little")
    assert memory.write(client.pid, addr, b"\x99") == 1
    assert client.ask("word") == "55667799"
    assert image.alive()


def test_memory_pin_caller_unknown(memory: ClientMemory) -> None:
    with pytest.raises(ProcessLookupError):
        memory.pin_caller(Tgid(0x3FFFFFFF), 0x3FFFFFFF)
    assert memory.images() == []


# -- fork copies -----------------------------------------------------------------------------


def test_memory_pin_copy_of_a_forked_child(memory: ClientMemory, pages: Client) -> None:
    origin = memory.pin_caller(pages.pid, pages.pid)
    child = child_of(pages)
    image = memory.pin_copy(child, origin)
    assert image.identity == origin.identity
    # The child's copy of the page, not the parent's.
    assert memory.write(child, word(pages), b"\x00") == 1
    assert memory.read(child, word(pages), 4) == (0x11223300).to_bytes(4, "little")
    assert pages.ask("word") == "11223344"
    assert memory.statistics().copies_pinned == 1


def test_memory_pin_copy_refuses_an_execd_process(memory: ClientMemory,
                                                  spawn: Callable[..., Client],
                                                  c_client: Callable[[str], Path]) -> None:
    client = spawn("setarch", "-R", c_client("mem_pages"))
    origin = memory.pin_caller(client.pid, client.pid)
    child = child_of(client)
    memory.unpin(client.pid)
    assert client.ask("exec") == "exec'd"
    client.readline()
    # The same number, now a new image (of the same program, same layout).
    with pytest.raises(ProcessLookupError, match="exec'd"):
        memory.pin_copy(client.pid, origin)
    assert memory.pin_copy(child, origin).alive()


def test_memory_pin_copy_refuses_a_same_layout_stranger(memory: ClientMemory,
                                                        spawn: Callable[..., Client],
                                                        c_client: Callable[[str], Path]) -> None:
    """Without ASLR two runs of one program have one layout; a fork child of
    the second is never taken for a copy of the first: the AT_RANDOM bytes
    differ."""
    argv = ("setarch", "-R", c_client("mem_pages"))
    first = spawn(*argv)
    second = spawn(*argv)
    origin = memory.pin_caller(first.pid, first.pid)
    stranger = child_of(second)
    stat = read_stat(stranger)
    assert stat is not None and origin.identity is not None
    assert stat.layout == origin.identity.layout
    with pytest.raises(ProcessLookupError, match="AT_RANDOM"):
        memory.pin_copy(stranger, origin)
    assert memory.statistics().copies_refused == 1


def test_memory_pin_copy_refuses_a_child_sharing_the_mm(memory: ClientMemory,
                                                        pages: Client) -> None:
    # vfork/posix_spawn children: the kernel shares the enabler list; once one
    # execs, its pid leads to the new program while the mm lives on in the parent.
    origin = memory.pin_caller(pages.pid, pages.pid)
    with pytest.raises(ProcessLookupError, match="shares the mm"):
        memory.pin_copy(child_of(pages, "vmfork"), origin)
    assert memory.images() == [origin]


def test_memory_pin_copy_of_a_stranger(memory: ClientMemory, pages: Client,
                                       spawn: Callable[..., Client],
                                       c_client: Callable[[str], Path]) -> None:
    origin = memory.pin_caller(pages.pid, pages.pid)
    other = spawn(c_client("mem_pages"))
    with pytest.raises(ProcessLookupError):
        memory.pin_copy(other.pid, origin)
    with pytest.raises(ProcessLookupError):
        memory.pin_copy(Tgid(0x3FFFFFFF), origin)


def test_memory_pin_copy_where_kcmp_is_refused(memory: ClientMemory, pages: Client,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Default container seccomp profiles refuse kcmp(2): a fork copy is still
    recognised (flag, layout, AT_RANDOM); a CLONE_VM child cannot be told
    apart, and is pinned on the origin's own mm."""
    import tracefs_fuse.process._memory as _memory

    monkeypatch.setattr(_memory, "_NR_KCMP", None)  # as ENOSYS; EPERM takes the same path
    origin = memory.pin_caller(pages.pid, pages.pid)
    copy = memory.pin_copy(child_of(pages), origin)
    shared = memory.pin_copy(child_of(pages, "vmfork"), origin)
    assert memory.write(shared.tgid, word(pages), b"\x00") == 1
    assert pages.ask("word") == "11223300"  # the shared mm is the origin's
    assert memory.read(copy.tgid, word(pages), 4) == (0x11223344).to_bytes(4, "little")
    assert memory.statistics().vm_unknown == 2
