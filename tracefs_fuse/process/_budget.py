"""Descriptors kept for clients, budgeted per owner like memory (issue 19, items 1 and 2).

The kernel keeps a ``user_event_mm`` per registered process in memory, and
when it cannot allocate one it refuses that caller's registration with
ENOMEM (``user_event_mm_alloc``); nobody else notices. What we keep per client
is descriptors (a pinned image: pidfd, ``/proc/<pid>/mem``, the exit watcher's
duplicate; a mapper: ``maps`` and a pidfd), and ``RLIMIT_NOFILE`` is shared by
every client: a daemon that runs out refuses everyone's ``open()``.

Rules:
  * At start the soft limit is raised to the hard one (:func:`raise_fd_limit`);
    the daemon waits on descriptors with poll/epoll only, never ``select()``
    (which fails for numbers of 1024 and more).
  * :data:`RESERVE` descriptors are never handed to clients' pins: they serve
    ``/dev/fuse``, the requests in flight, the task table's bounded cache and
    each request's short-lived opens. Of the rest, one owner (uid) may keep at
    most a :data:`SHARE`-th; a pin beyond its owner's share or the whole
    pool is refused (:class:`BudgetExhausted`, ENOMEM), that owner's alone.
  * The limit is read at every take: it may be lowered under us (``prlimit``).
"""

from __future__ import annotations

import errno
import resource

#: Descriptors kept back for serving (never counted against a client).
RESERVE = 256
#: One owner may keep at most this fraction (1/SHARE) of the pool.
SHARE = 4


class BudgetExhausted(OSError):
    """A client's pin would exceed its owner's share or the pool: ENOMEM,
    as ``user_event_mm_alloc`` failing gives."""

    def __init__(self, owner: int, count: int) -> None:
        super().__init__(errno.ENOMEM, f"uid {owner} may not keep {count} more descriptors")


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one; the soft limit before
    (for children we start: programs that use ``select()`` expect the usual)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return soft


class FdBudget:
    """Descriptors kept for clients, counted per owner (uid)."""

    def __init__(self) -> None:
        self._held: dict[int, int] = {}
        self._total = 0
        self._refused = 0

    def take(self, owner: int, count: int) -> None:
        """Count ``count`` more descriptors kept for ``owner``.

        Raises:
            BudgetExhausted: beyond ``owner``'s share or the pool.
        """
        pool = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - RESERVE
        held = self._held.get(owner, 0)
        if held + count > pool // SHARE or self._total + count > pool:
            self._refused += 1
            raise BudgetExhausted(owner, count)
        self._held[owner] = held + count
        self._total += count

    def give(self, owner: int, count: int) -> None:
        """``owner`` no longer keeps ``count`` of them."""
        held = self._held[owner] - count
        if held:
            self._held[owner] = held
        else:
            del self._held[owner]
        self._total -= count

    @property
    def total(self) -> int:
        return self._total

    @property
    def refused(self) -> int:
        return self._refused
