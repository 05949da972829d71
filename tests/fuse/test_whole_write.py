"""A write FUSE split: read only what the kernel would, in its order (issue 19 item 3).

``user_events_write_core`` copies the 4-byte index, answers ENOENT, EINVAL or
EBADF from it, and faults the whole write in only for an enabled event. The
whole-write check once read all of a 2 GiB write first (2.2-4.8 s a write).
"""

from __future__ import annotations

import pytest

from tracefs_fuse.fuse import _whole_write
from tracefs_fuse.fuse._whole_write import IOVEC, READ_LIMIT, SYS_WRITEV, whole_write

IOV_AT = 0x1000
BUF_AT = 0x100000
SIZE = 1 << 30  # 1 GiB in one iovec, after the 4-byte index


class FakeWriter:
    """A writer's memory: its iovec array, then readable bytes; counts what is read."""

    def __init__(self, unreadable_from: int | None = None) -> None:
        self.read_bytes = 0
        self.unreadable_from = unreadable_from

    def read(self, addr: int, size: int) -> bytes:
        if addr == IOV_AT:
            return IOVEC.pack(BUF_AT, 4) + IOVEC.pack(BUF_AT + 4, SIZE)
        end = addr + size
        if self.unreadable_from is not None:
            end = min(end, max(addr, self.unreadable_from))
        self.read_bytes += end - addr
        return b"\0" * (end - addr)


@pytest.fixture(autouse=True)
def writev_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_whole_write, "_syscall", lambda tid: (SYS_WRITEV, [3, IOV_AT, 2]))


def test_the_rest_is_read_only_when_asked() -> None:
    writer = FakeWriter()
    whole = whole_write(writer.read, 1, 4096)
    assert whole is not None
    assert whole.count == 4 + SIZE
    assert len(whole.data) == READ_LIMIT
    assert writer.read_bytes == READ_LIMIT  # not 2 GiB: the index decides first
    assert whole.faulted() is False
    assert writer.read_bytes == 4 + SIZE  # fault_in_iov_iter_readable of all of it


@pytest.mark.parametrize(("unreadable_from", "faulted", "read_at_once"), [
    (BUF_AT + 4 + READ_LIMIT + 4096, True, READ_LIMIT),  # beyond what is read at once
    (BUF_AT + 100, True, 100),  # within it: known at once
])
def test_a_fault_is_found_where_it_is(unreadable_from: int, faulted: bool,
                                      read_at_once: int) -> None:
    writer = FakeWriter(unreadable_from)
    whole = whole_write(writer.read, 1, 4096)
    assert whole is not None
    assert writer.read_bytes == read_at_once
    assert whole.faulted() is faulted
