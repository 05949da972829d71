"""``ls events/user_events``: one listing per directory pass (issue 19 item 8).

The kernel's getdents walks one list with a cursor; a listing rebuilt for
every readdir call (each fills one page of entries) costs the square of the
directory's size: 59 s of daemon CPU at 32,000 events, which an ordinary
member can register with a read-only descriptor.
"""

from __future__ import annotations

import pytest
import trio

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._tree import Dir
from tracefs_fuse.fuse import _operations
from tracefs_fuse.fuse._operations import TracefsOperations

from ..engine.fakes import FakeMemory

EVENTS = 1000
#: Entries one readdir call takes (a page of dirents, as FUSE asks).
PER_CALL = 30
ROOT = Task(pid=1, tgid=1, perfmon=True, cpu=0, comm="root")


class FakeReplies:
    """pyfuse3.readdir_reply: takes PER_CALL entries per call, then says "full"."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.next_id = 0
        self.room = 0

    def __call__(self, token: object, name: bytes, attrs: object, next_id: int) -> bool:
        if self.room == 0:
            return False
        self.room -= 1
        self.names.append(name.decode())
        self.next_id = next_id
        return True


@pytest.mark.parametrize("passes", [1, 2])
def test_a_listing_is_built_once_per_pass(passes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = Tracefs(nr_cpus=2, memory=FakeMemory(), clocks=TraceClocks.from_source(ManualClock(1)))
    fs.dynamic_events.write("".join(f"u:e{i} u32 n\n" for i in range(EVENTS)).encode(), ROOT)
    ops = TracefsOperations(fs.root, lambda pid: ROOT)
    builds = []
    entries = Dir.entries

    def counted(self: Dir) -> list:  # type: ignore[type-arg]
        if self.name == "user_events":
            builds.append(1)
        return entries(self)

    monkeypatch.setattr(Dir, "entries", counted)
    replies = FakeReplies()
    monkeypatch.setattr(_operations.pyfuse3, "readdir_reply", replies)
    inode = ops.inodes.inode(("events", "user_events"))

    async def ls() -> int:
        fh = await ops.opendir(inode, None)  # type: ignore[arg-type]
        calls = 0
        for _ in range(passes):  # a rewinddir starts the next pass
            replies.next_id = 0
            while True:
                replies.room = PER_CALL
                start = replies.next_id
                await ops.readdir(fh, start, None)  # type: ignore[arg-type]
                calls += 1
                if replies.next_id == start:
                    break
        await ops.releasedir(fh)
        return calls

    calls = trio.run(ls)
    listed = EVENTS + 4  # ".", "..", "enable", "filter" and every event
    assert calls == passes * (-(-listed // PER_CALL) + 1)
    assert sorted(replies.names) == sorted(passes * ([".", "..", "enable", "filter"] +
                                                     [f"e{i}" for i in range(EVENTS)]))
    assert len(builds) == passes
