"""Pushing pages into clients' mappings (``notify_store``), without deadlocking.

``FUSE_NOTIFY_STORE`` makes the kernel lock the page-cache folios it fills.
A client faulting on one of those pages holds that lock while it waits for
our answer to its read. Stored from the thread that answers requests, the two
would wait for each other for ever; so stores go to a worker thread (pyfuse3
releases the GIL around ``fuse_lowlevel_notify_store``) while the trio thread
keeps answering.

Rules:
  * Batches are stored one at a time, in the order they were made, so an
    older image of a page never lands after a newer one.
  * A request whose effect must be visible in mappings when it returns (a
    write to ``enable`` with the old ABIs' page mapped, ``GET_READER``)
    replies only once its batch is stored: :meth:`PagePusher.push` returns the
    event to wait for.
"""

from __future__ import annotations

import logging
import math

import trio

from ._session import pyfuse3

log = logging.getLogger(__name__)

#: (inode, file offset, bytes) to store.
Store = tuple[int, int, bytes]


def _store_all(stores: list[Store]) -> None:
    for inode, offset, data in stores:
        try:
            pyfuse3.notify_store(inode, offset, data)
        except OSError as exc:
            # ENOENT: the kernel has forgotten the inode, so nothing maps it.
            log.debug("notify_store inode %d: %s", inode, exc)


class PagePusher:
    """One worker thread's worth of ordered page stores."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[tuple[list[Store], trio.Event]](
            math.inf)

    def push(self, stores: list[Store]) -> trio.Event:
        """Queue a batch; the event is set once it is stored."""
        done = trio.Event()
        self._send.send_nowait((stores, done))
        return done

    async def run(self) -> None:
        async for stores, done in self._receive:
            await trio.to_thread.run_sync(_store_all, stores)
            done.set()
