"""Lanes: where a client's slow memory waits, and nobody else (issue 19, item 3).

The kernel makes only the caller wait for its own memory: a registration
faults its enable word in from the caller's own context, however long that
takes (a userfaultfd page waits in ``handle_userfault`` until its owner
resolves it). The daemon serves every request on one thread, so such a wait
there would be everyone's. Work that may wait on one client's memory runs on
a worker thread instead, while that client's request waits for our reply.

Rules:
  * At most :data:`WORKERS_PER_UID` workers of one uid at once (the owner of
    the descriptor budget, ``_budget.py``); beyond, its work waits for one of
    its own workers, never for anyone else's.
  * A wait may be cancelled (the client was interrupted): the worker is then
    abandoned, and keeps its uid's place until its access ends (a userfaultfd
    is released when its owner exits), so a client that makes its accesses
    wait for ever exhausts only its own uid's workers.
  * A worker never touches the engine: what it returns is applied on the
    trio thread, and so is the ``after`` of :meth:`Lanes.run`, once the work
    returned, whether or not its wait was abandoned.

A worker is a thread of its uid's, kept :data:`IDLE_S` after its last work,
that is handed its work through a lock and says it is done on an eventfd of
its own, which the waiting task awaits (``trio.lowlevel.wait_readable``):
one wakeup of the trio thread per trip, no scheduler hop between. trio's own
``to_thread.run_sync`` (a thread cache, a ``CapacityLimiter``, a report
through ``run_sync_soon``) cost 79-89 us a trip pinned to one CPU where
this costs 38-46 us (load average 4-5), and a registration makes two trips.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import trio

#: Workers one uid may keep busy (or stuck) at once.
WORKERS_PER_UID = 16
#: How long an idle worker waits for work before it ends (trio's thread cache's too).
IDLE_S = 10.0

T = TypeVar("T")


class Lanes:
    """Worker threads for work on clients' memory, bounded per uid."""

    def __init__(self) -> None:
        self._lanes: dict[int, _Lane] = {}

    async def run(self, uid: int, work: Callable[..., T], *args: object,
                  after: Callable[[], None] | None = None) -> T:
        """``work(*args)`` on a worker of ``uid``'s; then ``after()`` on this
        thread. Cancellable: the worker is then abandoned, still counts
        until ``work`` returns, and ``after()`` runs then (at once if the
        work was not started yet)."""
        lane = self._lanes.get(uid)
        if lane is None:
            lane = self._lanes[uid] = _Lane(trio.lowlevel.current_trio_token())
        try:
            # Cancelled before: the work is not started at all.
            await trio.lowlevel.checkpoint_if_cancelled()
            while lane.busy >= WORKERS_PER_UID:
                await lane.freed.park()
            worker = lane.start(work, args, after)
        except BaseException:
            if after is not None:
                after()
            raise
        try:
            await trio.lowlevel.wait_readable(worker.fd)
        except BaseException:
            if not worker.abandon():
                lane.finish(worker)  # done meanwhile: its result is dropped
            raise
        ok, value = lane.finish(worker)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]


class _Lane:
    """One uid's workers: the idle ones, how many are busy, who waits for one."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token
        self.idle: list[_Worker] = []
        self.busy = 0
        self.freed = trio.lowlevel.ParkingLot()

    def start(self, work: Callable[..., Any], args: tuple[object, ...],
              after: Callable[[], None] | None) -> _Worker:
        """Hand ``work`` to an idle worker (the last one used: the others may
        end), or to a new one."""
        while self.idle:
            worker = self.idle.pop()
            if worker.start(work, args, after):
                break
        else:
            worker = _Worker(self)
            worker.start(work, args, after)
        self.busy += 1
        return worker

    def finish(self, worker: _Worker) -> tuple[bool, Any]:
        """On the trio thread, once ``worker`` said it is done: its result
        (ok, value or exception), its ``after`` run, the worker idle again."""
        os.eventfd_read(worker.fd)
        return self.back(worker)

    def back(self, worker: _Worker) -> tuple[bool, Any]:
        """On the trio thread: ``worker``'s work returned (its wait abandoned
        or not)."""
        result, after = worker.take()
        self.busy -= 1
        self.idle.append(worker)
        self.freed.unpark()
        if after is not None:
            after()
        return result


class _Worker:
    """A thread that runs one piece of work at a time."""

    def __init__(self, lane: _Lane) -> None:
        self.lane = lane
        #: Readable once the work is done and its waiter still waits.
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._go = threading.Lock()
        self._go.acquire()
        #: Guards what follows, between the trio thread and this worker.
        self._state = threading.Lock()
        self._job: tuple[Callable[..., Any], tuple[object, ...]] | None = None
        self._after: Callable[[], None] | None = None
        self._result: tuple[bool, Any] = (True, None)
        self._abandoned = False
        self._ended = False
        try:
            threading.Thread(target=self._serve, name="tracefs-lane", daemon=True).start()
        except BaseException:
            os.close(self.fd)
            raise

    def start(self, work: Callable[..., Any], args: tuple[object, ...],
              after: Callable[[], None] | None) -> bool:
        """Run ``work(*args)``; False if this worker ended (idle too long)."""
        with self._state:
            if self._ended:
                return False
            self._job = (work, args)
            self._after = after
        self._go.release()
        return True

    def abandon(self) -> bool:
        """Its waiter stops waiting; False if the work is done already (then
        the eventfd says so, and :meth:`_Lane.finish` is the waiter's to call)."""
        with self._state:
            if self._job is None:
                return False
            self._abandoned = True
            return True

    def take(self) -> tuple[tuple[bool, Any], Callable[[], None] | None]:
        """The result and the ``after`` of the work just done."""
        result, after = self._result, self._after
        self._result, self._after = (True, None), None
        return result, after

    def _serve(self) -> None:
        while True:
            if not self._go.acquire(timeout=IDLE_S):
                with self._state:
                    if self._job is None:
                        # Idle (no task waits on the eventfd): close it here;
                        # the lane drops this worker when it comes to it.
                        self._ended = True
                        os.close(self.fd)
                        return
                self._go.acquire()  # work was handed over meanwhile
            assert self._job is not None
            work, args = self._job
            try:
                result: tuple[bool, Any] = (True, work(*args))
            except BaseException as exc:
                result = (False, exc)
            with self._state:
                self._result = result
                self._job = None
                if not self._abandoned:
                    os.eventfd_write(self.fd, 1)
                    continue
                self._abandoned = False
            try:
                self.lane.token.run_sync_soon(self.lane.back, self)
            except trio.RunFinishedError:
                os.close(self.fd)
                return
