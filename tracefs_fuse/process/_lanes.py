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
    trio thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio

#: Workers one uid may keep busy (or stuck) at once.
WORKERS_PER_UID = 16

T = TypeVar("T")


class Lanes:
    """Worker threads for work on clients' memory, bounded per uid."""

    def __init__(self) -> None:
        self._workers: dict[int, trio.CapacityLimiter] = {}

    async def run(self, uid: int, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` on a worker of ``uid``'s; cancellable (the worker is
        then abandoned, and still counts until it returns)."""
        limiter = self._workers.get(uid)
        if limiter is None:
            limiter = self._workers[uid] = trio.CapacityLimiter(WORKERS_PER_UID)
        return await trio.to_thread.run_sync(work, *args, limiter=limiter,
                                             abandon_on_cancel=True)
