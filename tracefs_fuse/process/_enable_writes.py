"""Enable bits written into pinned images by workers, never by the trio thread
(issue 19, item 3).

The kernel writes an enabler's bit with ``FOLL_NOFAULT`` and leaves a page
that is not there to a work item (``user_event_enabler_write``,
``user_event_enabler_queue_fault``): an enable never waits for a client's
page. Here a page may be one of a FUSE filesystem that does not answer (until
the watchdog aborts that connection, 1 s), so the trio thread never touches
one; a worker of the image owner's lane (``_lanes.py``) does.

Rules:
  * A bit is queued per image, the latest value per (address, bit); an image
    is in the hands of one worker at a time, so its bits land in order.
  * One worker of an owner takes that owner's queued images in turn: a
    fan-out to N processes is one hand-over, not N. A worker stuck on a
    page holds up the images queued behind it only until a reply that waits
    for them asks for another worker (every :data:`ESCAPE_S`, up to the
    owner's ``WORKERS_PER_UID``): the stalled image waits, the others do not.
  * A process's bits and its lane's own writes into it (``lane_writes``)
    hold one lock per process: two read-modify-writes of one byte would
    lose one update, where the kernel's ``set_bit`` never does.
  * The request whose change it is waits for its bits before its reply, at
    most :data:`HELD_BITS_WAIT_S` (:meth:`EnableWrites.written`).
  * An image unpinned while queued or being written keeps its descriptors
    until the worker is done with it, so that no number written through
    can name another file meanwhile (:meth:`EnableWrites.forget`).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import trio

from ..engine._memory import Tgid
from ._lanes import WORKERS_PER_UID

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: How long a reply waits for the enable bits its request changed: longer than
#: a thread hand-over on a loaded machine (100 ms ran out), as long as the
#: watchdog lets an access wait on a FUSE filesystem that does not answer.
HELD_BITS_WAIT_S = 1.0
#: How long a waiting reply lets an owner's queued images wait behind its
#: busy workers before it asks for another.
ESCAPE_S = 0.005



class Pinned(Protocol):
    """A pinned image (``_memory.Image``) as seen here."""

    tgid: Tgid
    #: The uid whose lane writes into it.
    owner: int


Image = TypeVar("Image", bound=Pinned)
#: (addr, bit) -> value, in the order of their latest values.
Bits = dict[tuple[int, int], bool]


class _Queue(Generic[Image]):
    """One owner's images waiting for a worker, and its workers at work."""

    def __init__(self) -> None:
        self.images: collections.deque[tuple[Image, threading.Lock, list[Any]]] = (
            collections.deque())
        self.workers = 0


class EnableWrites(Generic[Image]):
    """Enable bits on their way into pinned images. Not thread-safe but for
    the workers' own part: called on one trio thread.

    Args:
        write_bits: writes an image's bits (on a worker): how many were
            written, how many faulted.
        close: lets go of an unpinned image's descriptors.
    """

    def __init__(self, write_bits: Callable[[Image, list[tuple[tuple[int, int], bool]]],
                                            tuple[int, int]],
                 close: Callable[[Image], None]) -> None:
        self._write_bits = write_bits
        self._close = close
        #: tgid -> (the lock, how many writes of either kind hold it).
        self._locks: dict[Tgid, tuple[threading.Lock, int]] = {}
        self._pending: dict[Image, Bits] = {}
        #: Images queued for a worker or being written.
        self._writing: set[Image] = set()
        #: Unpinned while writing: closed once their worker is done.
        self._retired: set[Image] = set()
        self._queues: dict[int, _Queue[Image]] = {}
        #: image -> set once its bits are written; the images that got bits
        #: since :meth:`take_held` was last called.
        self._released: dict[Image, trio.Event] = {}
        self._new: set[Image] = set()
        #: ``in_lane(uid, work, done)``: ``work()`` on a worker of ``uid``'s
        #: lane, then ``done(its result)`` on this thread; ``call_soon(f,
        #: *args)`` from a worker runs ``f`` on this thread. The daemon installs
        #: its lanes' and trio's; without, everything runs at once, here.
        self.in_lane: Callable[[int, Callable[[], Any], Callable[[Any], None]], None] = _at_once
        self.call_soon: Callable[..., None] = _call
        #: What workers wrote, for this thread to take in (:meth:`_take_written`);
        #: one call is due at a time, however many images are done meanwhile.
        self._done: collections.deque[tuple[Image, tuple[int, int] | Exception]] = (
            collections.deque())
        self._take_due = False
        self.writes = 0
        self.refused = 0

    # -- the lock of a process's bits --------------------------------------------

    def hold_lock(self, tgid: Tgid) -> threading.Lock:
        lock, users = self._locks.get(tgid, (threading.Lock(), 0))
        self._locks[tgid] = (lock, users + 1)
        return lock

    def drop_lock(self, tgid: Tgid) -> None:
        lock, users = self._locks[tgid]
        if users > 1:
            self._locks[tgid] = (lock, users - 1)
        else:
            del self._locks[tgid]

    # -- bits ----------------------------------------------------------------------

    def write(self, image: Image, addr: int, bit: int, value: bool) -> None:
        """Queue a bit for ``image`` (pinned now)."""
        bits = self._pending.setdefault(image, {})
        bits.pop((addr, bit), None)
        bits[(addr, bit)] = value
        if image not in self._released:
            self._released[image] = trio.Event()
        self._new.add(image)
        if image not in self._writing:
            self._queue(image)

    def forget(self, image: Image) -> bool:
        """``image`` was unpinned: its bits not yet queued are dropped (its
        enablers are gone). Returns whether it may be closed now (else it
        is, once its worker is done)."""
        self._pending.pop(image, None)
        if image in self._writing:
            self._retired.add(image)
            return False
        self._release(image)
        return True

    def take_held(self) -> list[trio.Event]:
        """For the bits changed since the last call (by the request being
        answered): the events set once they are written."""
        events = [self._released[image] for image in self._new if image in self._released]
        self._new.clear()
        return events

    async def written(self, held: list[trio.Event]) -> None:
        """Until the bits behind ``held`` (:meth:`take_held`) are written, at
        most :data:`HELD_BITS_WAIT_S` (a page that does not fault in leaves
        its bit late, as the kernel's work item does); asks for more workers
        while images wait behind busy ones."""
        deadline = trio.current_time() + HELD_BITS_WAIT_S
        for event in held:
            while not event.is_set():
                with trio.move_on_at(min(deadline, trio.current_time() + ESCAPE_S)):
                    await event.wait()
                if trio.current_time() >= deadline:
                    return
                self._escape()

    # -- internals -------------------------------------------------------------------

    def _queue(self, image: Image) -> None:
        bits = list(self._pending.pop(image).items())
        self._writing.add(image)
        queue = self._queues.get(image.owner)
        if queue is None:
            queue = self._queues[image.owner] = _Queue[Image]()
        queue.images.append((image, self.hold_lock(image.tgid), bits))
        if not queue.workers:
            self._start(image.owner, queue)

    def _escape(self) -> None:
        for owner, queue in self._queues.items():
            if queue.images and queue.workers < WORKERS_PER_UID:
                self._start(owner, queue)

    def _start(self, owner: int, queue: _Queue[Image]) -> None:
        queue.workers += 1
        write_bits = self._write_bits

        def work() -> None:
            while True:
                try:
                    image, lock, bits = queue.images.popleft()
                except IndexError:
                    return
                counts: tuple[int, int] | Exception
                try:
                    with lock:
                        counts = write_bits(image, bits)
                except Exception as exc:  # a bug: the image's bits must still be released
                    counts = exc
                self._done.append((image, counts))
                if not self._take_due:  # read after the append: see _take_written
                    self._take_due = True
                    self.call_soon(self._take_written)

        def done(_: object) -> None:
            queue.workers -= 1
            if not queue.workers:
                if queue.images:
                    self._start(owner, queue)
                else:
                    del self._queues[owner]

        self.in_lane(owner, work, done)

    def _take_written(self) -> None:
        # Cleared before the queue is read: a worker that appends later finds
        # it clear and asks again; one that found it set appended before.
        self._take_due = False
        while self._done:
            self._written(*self._done.popleft())

    def _written(self, image: Image, counts: tuple[int, int] | Exception) -> None:
        self.drop_lock(image.tgid)
        self._writing.discard(image)
        if isinstance(counts, Exception):
            logger.error("enable bits of %d not written", image.tgid, exc_info=counts)
            counts = (0, 0)
        self.writes += counts[0]
        self.refused += counts[1]
        if image in self._retired:
            self._retired.discard(image)
            self._close(image)
            self._release(image)
        elif image in self._pending:
            self._queue(image)
        else:
            self._release(image)

    def _release(self, image: Image) -> None:
        released = self._released.pop(image, None)
        if released is not None:
            released.set()


def _at_once(uid: int, work: Callable[[], T], done: Callable[[T], None]) -> None:
    done(work())


def _call(function: Callable[..., None], *args: object) -> None:
    function(*args)
