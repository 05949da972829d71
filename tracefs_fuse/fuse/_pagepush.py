"""Pushing pages into clients' mappings (``notify_store``), without deadlocking.

``FUSE_NOTIFY_STORE`` makes the kernel lock the page-cache folios it fills.
A client faulting on one of those pages holds that lock while it waits for
our answer to its read. Stored from the thread that answers requests, the two
would wait for each other for ever; so stores go to the bridge's storer
thread (``_native/storer.c``) while the trio thread keeps answering.

Rules:
  * Batches are stored one at a time, in the order they were made, so an
    older image of a page never lands after a newer one.
  * A request whose effect must be visible in mappings when it returns (an
    event write with a perf consumer, a write to ``enable`` with the old ABIs'
    page mapped, ``GET_READER``) hands its reply to the storer with its
    batch (:meth:`PagePusher.push_then_reply`): the reply leaves that thread
    right after the last store, with no handoff back to trio.
  * Code outside a request that must wait for its stores gets a trio event
    (:meth:`PagePusher.push`), set once the storer reports the batch stored.
"""

from __future__ import annotations

import os

import trio

from ._session import Request, native

#: (inode, file offset, bytes) to store.
Store = tuple[int, int, bytes]

#: How the storer replies: fuse_reply_write(count), fuse_reply_err(errno),
#: fuse_reply_ioctl(result) without data.
REPLY_WRITE: int = native.REPLY_WRITE
REPLY_ERR: int = native.REPLY_ERR
REPLY_IOCTL: int = native.REPLY_IOCTL


class PagePusher:
    """The storer thread's queue, seen from trio."""

    def __init__(self) -> None:
        #: Batch sequence number -> the event set once it is stored.
        self._waiting: dict[int, trio.Event] = {}
        #: ... -> a request watching interrupts, kept until its reply is sent.
        self._held: dict[int, Request] = {}

    def push(self, stores: list[Store]) -> trio.Event:
        """Queue a batch; the event is set once it is stored."""
        done = trio.Event()
        seq = native.store(stores, signal=True)
        if seq <= native.stored():  # no session: nothing to wait for
            done.set()
        else:
            self._waiting[seq] = done
        return done

    def push_then_reply(self, stores: list[Store], req: Request, reply: int,
                        value: int) -> None:
        """Queue a batch and ``req``'s reply (``REPLY_*`` with ``value``),
        sent once the batch is stored."""
        seq = native.store(stores, req, reply, value, signal=req.watching)
        if req.watching and seq > native.stored():
            # libfuse calls back into the Request at a FUSE_INTERRUPT until
            # the storer has replied: it must outlive that reply.
            self._held[seq] = req

    async def run(self) -> None:
        """Set the events of batches stored, let go of their requests (the
        storer writes an eventfd)."""
        fd = native.store_fd()
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                os.eventfd_read(fd)
            except BlockingIOError:
                continue
            stored = native.stored()
            for seq in [seq for seq in self._waiting if seq <= stored]:
                self._waiting.pop(seq).set()
            for seq in [seq for seq in self._held if seq <= stored]:
                del self._held[seq]
