"""Lanes (issue 19 item 3, cost: issue 21 item 3): work on a uid's own
workers, at most WORKERS_PER_UID of them busy, a cancelled wait abandons its
worker, ``after`` runs on the trio thread once the work returned."""

from __future__ import annotations

import threading

import pytest
import trio

from tracefs_fuse.process import _lanes
from tracefs_fuse.process._lanes import WORKERS_PER_UID, Lanes

#: How long a test waits for a worker thread's step (a stall, not a slow machine).
STEP_S = 10.0


def blocked(gate: threading.Event, started: threading.Semaphore) -> int:
    """Work that waits for ``gate``, as on a page that does not fault in."""
    started.release()
    assert gate.wait(STEP_S)
    return threading.get_ident()


async def started_all(started: threading.Semaphore, count: int) -> None:
    for _ in range(count):
        assert await trio.to_thread.run_sync(started.acquire, True, STEP_S)


async def test_results_errors_and_after_on_the_trio_thread() -> None:
    lanes = Lanes()
    trio_thread = threading.get_ident()
    afters: list[int] = []
    assert await lanes.run(1000, sum, (1, 2, 3)) == 6
    worker = await lanes.run(1000, threading.get_ident,
                             after=lambda: afters.append(threading.get_ident()))
    assert worker != trio_thread
    assert afters == [trio_thread]
    with pytest.raises(ZeroDivisionError):
        await lanes.run(1000, divmod, 1, 0)
    # The last worker used is used again: one thread so far.
    assert await lanes.run(1000, threading.get_ident) == worker


async def test_a_uid_waits_for_its_own_workers_only() -> None:
    lanes = Lanes()
    gate, started = threading.Event(), threading.Semaphore(0)
    done: list[int] = []

    async def one(uid: int) -> None:
        done.append(await lanes.run(uid, blocked, gate, started))

    async with trio.open_nursery() as nursery:
        for _ in range(WORKERS_PER_UID + 1):
            nursery.start_soon(one, 1000)
        await started_all(started, WORKERS_PER_UID)
        # The 17th waits for one of its uid's 16; another uid's work does not.
        lane = lanes._lanes[1000]
        assert (lane.busy, lane.freed.statistics().tasks_waiting) == (WORKERS_PER_UID, 1)
        assert await lanes.run(1001, sum, (4, 5)) == 9
        assert done == []
        gate.set()
    assert len(done) == WORKERS_PER_UID + 1
    assert len(set(done)) == WORKERS_PER_UID  # the 17th on a worker freed
    assert (lane.busy, len(lane.idle)) == (0, WORKERS_PER_UID)


async def test_a_cancelled_wait_abandons_its_worker_which_still_counts() -> None:
    lanes = Lanes()
    gate, started = threading.Event(), threading.Semaphore(0)
    afters: list[int] = []
    all_after = trio.Event()

    def after(n: int) -> None:
        afters.append(n)
        if len(afters) == WORKERS_PER_UID:
            all_after.set()

    async def one(n: int) -> None:
        await lanes.run(1000, blocked, gate, started, after=lambda: after(n))

    async with trio.open_nursery() as nursery:
        for n in range(WORKERS_PER_UID):
            nursery.start_soon(one, n)
        await started_all(started, WORKERS_PER_UID)
        nursery.cancel_scope.cancel()  # every wait ends: the workers are abandoned
    lane = lanes._lanes[1000]
    assert (afters, lane.busy) == ([], WORKERS_PER_UID)  # they still count
    gate.set()
    # Once their work returns, each after runs on this thread, and they serve again.
    with trio.fail_after(STEP_S):
        await all_after.wait()
    assert sorted(afters) == list(range(WORKERS_PER_UID))
    assert (lane.busy, len(lane.idle)) == (0, WORKERS_PER_UID)
    assert await lanes.run(1000, sum, (1, 1)) == 2


async def test_an_idle_worker_ends_and_a_new_one_takes_the_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lanes, "IDLE_S", 0.01)
    lanes = Lanes()
    first = await lanes.run(1000, threading.current_thread)
    first.join(STEP_S)
    assert not first.is_alive()
    second = await lanes.run(1000, threading.current_thread)
    assert second is not first


async def test_after_runs_at_once_for_work_never_started() -> None:
    lanes = Lanes()
    afters: list[str] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await lanes.run(1000, afters.append, "work", after=lambda: afters.append("after"))
    assert scope.cancelled_caught
    assert afters == ["after"]
