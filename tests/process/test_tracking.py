"""The tracker against real processes: what following our clients costs, and what it finds.

The registry is a stand-in holding only what the tracker asks of it (which
processes hold enablers, fork and exit); the processes and the kernel's
process connector are real.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.process.test_memory import Client, child_of
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.process._memory import ClientMemory
from tracefs_fuse.process._tracking import ProcessTracker

#: Forks of a process that is none of ours, while one client holds an enabler.
STORM = 500


class Registry:
    """What the tracker uses of ``UserEventRegistry``."""

    def __init__(self) -> None:
        self.mms: dict[Tgid, Tgid] = {}

    def fork(self, parent: Tgid, child: Tgid) -> None:
        self.mms[child] = self.mms[parent]

    def exit(self, tgid: Tgid, deferred: bool = False) -> None:
        self.mms.pop(tgid, None)

    def release_detached(self, budget: int) -> bool:
        return True


@pytest.fixture
def tracker() -> Iterator[tuple[ProcessTracker, Registry]]:
    registry = Registry()
    memory = ClientMemory()
    tracker = ProcessTracker(registry, memory, source="connector")  # type: ignore[arg-type]
    yield tracker, registry
    tracker.close()
    memory.close()


def hold(tracker: ProcessTracker, registry: Registry, client: Client) -> None:
    """``client`` registers (the tracker's part of a DIAG_IOCSREG)."""
    tracker.enter(client.pid, client.pid)
    registry.mms[client.pid] = client.pid
    tracker.leave(client.pid)


def storm() -> None:
    for _ in range(STORM):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


def test_an_unrelated_fork_storm_reaches_the_tracker_as_nothing(
        tracker: tuple[ProcessTracker, Registry], c_client: Callable[[str], Path],
        spawn: Callable[..., Client]) -> None:
    """Before the kernel filtered for us, each of those forks (and exits) was an event."""
    follower, registry = tracker
    holder = spawn(c_client("mem_pages"))
    hold(follower, registry, holder)
    storm()
    child = child_of(holder)
    follower.catch_up()
    assert child in registry.mms  # our client's fork is followed
    # Its fork, and at most a few acks of other listeners' subscriptions.
    assert follower.statistics().events < 20

