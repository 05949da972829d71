"""The process connector and the pidfd exit watcher, driven by real processes.

Events of the whole machine arrive (other tests run too), so every check
filters by the pids of our own helpers and waits with a bound.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.process.test_memory import TIMEOUT_S, Client
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.process._memory import ClientMemory
from tracefs_fuse.process._proc_events import (
    CN_IDX_PROC,
    CN_VAL_PROC,
    NLMSG_DONE,
    PROC_EVENT_EXEC,
    PROC_EVENT_NONE,
    EventsLost,
    ExecEvent,
    ExitEvent,
    ExitWatcher,
    ForkEvent,
    ProcConnector,
    PROC_PID_INIT_INO,
    PROC_USER_INIT_INO,
    ProcEvent,
    WatcherStatistics,
    outside_initial_namespaces,
    _parse,
)


async def next_matching(connector: ProcConnector,
                        match: Callable[[ProcEvent], bool]) -> ProcEvent:
    with trio.fail_after(TIMEOUT_S):
        async for event in connector:
            if match(event):
                return event
    raise AssertionError("connector closed")


@pytest.fixture
def connector() -> Iterator[ProcConnector]:
    with ProcConnector() as conn:
        yield conn


@pytest.fixture
def pages(c_client: Callable[[str], Path], spawn: Callable[..., Client]) -> Callable[[], Client]:
    return lambda: spawn(c_client("mem_pages"))


async def test_connector_fork_exec_exit_of_a_process(connector: ProcConnector,
                                                     pages: Callable[[], Client]) -> None:
    client = pages()
    fork = await next_matching(connector, lambda e: isinstance(e, ForkEvent)
                               and e.child_pid == client.pid)
    assert isinstance(fork, ForkEvent)
    assert (fork.parent_tgid, fork.child_tgid) == (os.getpid(), client.pid)
    assert not fork.is_thread
    execed = await next_matching(connector, lambda e: isinstance(e, ExecEvent)
                                 and e.tgid == client.pid)
    assert isinstance(execed, ExecEvent) and execed.pid == client.pid
    assert execed.timestamp_ns >= fork.timestamp_ns
    client.quit()
    exited = await next_matching(connector, lambda e: isinstance(e, ExitEvent)
                                 and e.pid == client.pid)
    assert isinstance(exited, ExitEvent)
    assert exited.pid == exited.tgid and exited.exit_code == 0


async def test_connector_exit_code_is_a_wait_status(connector: ProcConnector,
                                                    pages: Callable[[], Client]) -> None:
    client = pages()
    client.proc.kill()
    client.proc.wait(TIMEOUT_S)
    exited = await next_matching(connector, lambda e: isinstance(e, ExitEvent)
                                 and e.pid == client.pid)
    assert isinstance(exited, ExitEvent) and exited.exit_code == 9  # SIGKILL


async def test_connector_fork_by_the_process(connector: ProcConnector,
                                             pages: Callable[[], Client]) -> None:
    client = pages()
    child = int(Client.fields(client.ask("fork"))["child"])
    fork = await next_matching(connector, lambda e: isinstance(e, ForkEvent)
                               and e.child_pid == child)
    assert isinstance(fork, ForkEvent)
    assert (fork.parent_pid, fork.parent_tgid, fork.child_tgid) == (client.pid, client.pid, child)
    assert not fork.is_thread


async def test_connector_thread_creation_is_not_a_fork(connector: ProcConnector,
                                                       pages: Callable[[], Client]) -> None:
    client = pages()
    tid = int(Client.fields(client.ask("thread"))["thread"])
    fork = await next_matching(connector, lambda e: isinstance(e, ForkEvent)
                               and e.child_pid == tid)
    assert isinstance(fork, ForkEvent)
    assert fork.is_thread and fork.child_tgid == client.pid
    # The kernel names the parent of the whole process (us), not the creator.
    assert fork.parent_tgid == os.getpid()
    exited = await next_matching(connector, lambda e: isinstance(e, ExitEvent) and e.pid == tid)
    assert isinstance(exited, ExitEvent)
    assert exited.tgid == client.pid != exited.pid


async def test_connector_drain_takes_queued_events_without_waiting(
        connector: ProcConnector, pages: Callable[[], Client]) -> None:
    connector.drain()  # whatever the machine did before
    client = pages()
    # The banner is printed by the exec'd image: both events are queued by now.
    ours = [e for e in connector.drain()
            if isinstance(e, (ForkEvent, ExecEvent)) and client.pid in (
                getattr(e, "child_pid", None), getattr(e, "pid", None))]
    assert [type(e) for e in ours] == [ForkEvent, ExecEvent]
    assert connector.statistics().events >= 2


async def test_connector_drain_respects_limit(connector: ProcConnector,
                                              pages: Callable[[], Client]) -> None:
    client = pages()
    client.ask("forks 5")
    # Each fork event is sent before its child runs: at least 5 are queued.
    assert len(connector.drain(limit=3)) == 3
    assert len(connector.drain()) >= 5 - 3


async def test_connector_overrun_reports_loss_and_recovers(c_client: Callable[[str], Path],
                                                           spawn: Callable[..., Client]) -> None:
    # A tiny buffer (the kernel doubles it, ~40 messages) and a fork storm.
    with ProcConnector(rcvbuf=16384) as connector:
        client = spawn(c_client("mem_pages"))
        assert client.ask("forks 400") == "forked=400"
        events = connector.drain(limit=100_000)
        assert any(isinstance(e, EventsLost) for e in events)
        assert connector.statistics().overruns >= 1
        # The fresh subscription delivers what happens next.
        child = int(Client.fields(client.ask("fork"))["child"])
        fork = await next_matching(connector, lambda e: isinstance(e, ForkEvent)
                                   and e.child_pid == child)
        assert isinstance(fork, ForkEvent)


async def test_connector_waiter_follows_the_new_subscription(
        c_client: Callable[[str], Path], spawn: Callable[..., Client]) -> None:
    with ProcConnector(rcvbuf=16384) as connector:
        client = spawn(c_client("mem_pages"))
        seen: list[ProcEvent] = []
        child: list[int] = []

        async def consume() -> None:
            async for event in connector:
                seen.append(event)
                if isinstance(event, ForkEvent) and child and event.child_pid == child[0]:
                    return

        with trio.fail_after(TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                await trio.testing.wait_all_tasks_blocked()
                # Without yielding: overrun, then swap sockets under the waiter.
                client.ask("forks 400")
                connector.drain(limit=100_000)
                assert connector.statistics().overruns >= 1
                child.append(int(Client.fields(client.ask("fork"))["child"]))
        assert isinstance(seen[-1], ForkEvent)


async def test_connector_close_ends_iteration() -> None:
    connector = ProcConnector()
    seen: list[ProcEvent] = []

    async def consume() -> None:
        async for event in connector:
            seen.append(event)

    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await trio.testing.wait_all_tasks_blocked()
            connector.close()
    connector.close()
    with pytest.raises(trio.ClosedResourceError):
        connector.drain()


def message(what: int, data: bytes, *, idx: int = CN_IDX_PROC, ack: int = 0,
            ts: int = 5) -> bytes:
    """One netlink datagram as cn_proc.c sends it (proc_event is 40 bytes)."""
    event = struct.pack("=IIQ", what, 0, ts) + data.ljust(24, b"\0")
    cn = struct.pack("=IIIIHH", idx, CN_VAL_PROC, 0, ack, len(event), 0) + event
    return struct.pack("=IHHII", 16 + len(cn), NLMSG_DONE, 0, 0, 0) + cn


def test_parse_keeps_only_process_events_it_knows() -> None:
    out: deque[ProcEvent] = deque()
    datagram = (message(0x200, b"comm")                                  # PROC_EVENT_COMM
                + message(PROC_EVENT_EXEC, struct.pack("=ii", 7, 7), idx=2)  # not cn_proc
                + message(PROC_EVENT_NONE, struct.pack("=I", 0), ack=9)      # someone's ack
                + message(PROC_EVENT_EXEC, struct.pack("=ii", 8, 8)))
    assert _parse(datagram + datagram[:50], out) is None  # a torn message ends it
    assert list(out) == [ExecEvent(pid=8, tgid=Tgid(8), timestamp_ns=5)]


def test_parse_finds_our_ack_and_its_error() -> None:
    out: deque[ProcEvent] = deque()
    assert _parse(message(PROC_EVENT_NONE, struct.pack("=I", 22), ack=43), out, 43) == 22
    assert not out


@pytest.mark.parametrize(("user_ino", "pid_ino", "refused"), [
    (PROC_USER_INIT_INO, PROC_PID_INIT_INO, None),
    (4026532201, PROC_PID_INIT_INO, "outside the initial user namespace"),
    (PROC_USER_INIT_INO, 4026532202, "outside the initial pid namespace"),
    (4026532201, 4026532202, "outside the initial user namespace"),
])
def test_outside_initial_namespaces_is_cn_proc_mcast_ctls_rule(
        user_ino: int, pid_ino: int, refused: str | None) -> None:
    assert outside_initial_namespaces(user_ino, pid_ino) == refused


_CHOOSE = ("from tracefs_fuse.process._tracking import ProcessTracker\n"
           "print(*ProcessTracker._choose('auto'), sep='|')")


@pytest.mark.parametrize(("unshare", "reason"), [
    # rootless `tracefs-fuse run` enters a user namespace first
    (["--user", "--map-root-user"], "outside the initial user namespace"),
    # a pid namespace with its own /proc: NSpid shows one pid there, the
    # namespace's inode number still tells
    (["--pid", "--fork", "--mount-proc"], "outside the initial pid namespace"),
])
def test_a_listener_the_kernel_would_ignore_is_refused_without_waiting_for_an_ack(
        unshare: list[str], reason: str) -> None:
    """Not timed: a TimeoutError (the 1 s backstop) would name ETIMEDOUT instead."""
    out = subprocess.run(["unshare", *unshare, sys.executable, "-c", _CHOOSE],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    source, why = out.strip().split("|")
    assert source == "procfs"
    assert why == ("the process connector cannot be joined here: "
                   f"the process connector ignores listeners {reason}")


# -- exit watcher -------------------------------------------------------------------------


@pytest.fixture
def watcher() -> Iterator[ExitWatcher]:
    w = ExitWatcher()
    yield w
    w.close()


async def test_exit_watcher_reports_group_exit_not_leader_exit(
        connector: ProcConnector, watcher: ExitWatcher, c_client: Callable[[str], Path],
        spawn: Callable[..., Client]) -> None:
    memory = ClientMemory()
    client = spawn(c_client("mem_leader"))
    tid = int(client.banner["tid"])
    leader = await next_matching(connector, lambda e: isinstance(e, ExitEvent)
                                 and e.pid == client.pid)
    assert isinstance(leader, ExitEvent) and leader.pid == leader.tgid
    image = memory.pin_caller(client.pid, tid)
    watcher.watch(client.pid, image.pidfd.fd)
    # The leader is gone, the process is not.
    assert watcher.exited_nowait() == []
    assert image.alive()
    client.ask("word")
    client.quit()
    with trio.fail_after(TIMEOUT_S):
        assert await watcher.wait_exited() == [client.pid]
    last = await next_matching(connector, lambda e: isinstance(e, ExitEvent) and e.pid == tid)
    assert isinstance(last, ExitEvent) and last.pid != last.tgid
    assert watcher.statistics() == WatcherStatistics(watched=0, exits=1)
    assert not image.alive()
    memory.close()


async def test_exit_watcher_watch_replaces_and_unwatch_forgets(
        watcher: ExitWatcher, pages: Callable[[], Client]) -> None:
    client = pages()
    pidfd = os.pidfd_open(client.pid)
    try:
        watcher.watch(client.pid, pidfd)
        watcher.watch(client.pid, pidfd)
        assert watcher.statistics().watched == 1
        watcher.unwatch(client.pid)
        watcher.unwatch(client.pid)
        client.quit()
        assert watcher.exited_nowait() == []
        # Our own pidfd is untouched by the watcher (it kept a duplicate).
        assert os.readlink(f"/proc/self/fd/{pidfd}") == "anon_inode:[pidfd]"
    finally:
        os.close(pidfd)


async def test_exit_watcher_several_groups(watcher: ExitWatcher,
                                           pages: Callable[[], Client]) -> None:
    clients = [pages() for _ in range(3)]
    fds = [os.pidfd_open(c.pid) for c in clients]
    for client, fd in zip(clients, fds):
        watcher.watch(client.pid, fd)
        os.close(fd)
    clients[0].quit()
    clients[2].quit()
    gone: set[Tgid] = set()
    with trio.fail_after(TIMEOUT_S):
        while len(gone) < 2:
            gone.update(await watcher.wait_exited())
    assert gone == {clients[0].pid, clients[2].pid}
    assert watcher.statistics() == WatcherStatistics(watched=1, exits=2)


async def test_exit_watcher_close_wakes_a_waiter(watcher: ExitWatcher) -> None:
    async def wait() -> None:
        with pytest.raises(trio.ClosedResourceError):
            await watcher.wait_exited()

    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            watcher.close()
    watcher.close()


async def test_exec_event_is_a_hint_decided_by_the_pinned_image(
        connector: ProcConnector, pages: Callable[[], Client]) -> None:
    memory = ClientMemory()
    client = pages()
    old = memory.pin_caller(client.pid, client.pid)
    assert client.ask("exec") == "exec'd"
    client.readline()  # the new image's banner: it runs, and could register
    # The new image registers before its exec event is handled: pinned anew.
    new = memory.pin_caller(client.pid, client.pid)
    assert new is not old and not old.alive()
    execed = await next_matching(connector, lambda e: isinstance(e, ExecEvent)
                                 and e.tgid == client.pid)
    assert isinstance(execed, ExecEvent)
    # Handling the late event must not drop the new image's state.
    image = memory.image(execed.tgid)
    assert image is new and image.alive()
    memory.close()
