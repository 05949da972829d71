"""A writable perf ring's ``data_tail``, read by a worker of the reader's
lane, never by the trio thread (issue 19, item 3).

The reader writes ``data_tail`` into the ring's first page, its own memory;
the engine needs it when a record does not fit behind the tail it last read
(``engine/_perf_buffer.py``). The kernel reads it from the ring's page, which
is its own; ours is the reader's, which the reader may replace (``MAP_FIXED``)
with a page that never faults in: one of a FUSE filesystem that does not
answer holds a read until the watchdog's 1 s abort. On the trio thread that
second would be every client's.

Rules:
  * One read per ring at a time, on a worker of its reader's uid's lane
    (``_lanes.py``), through a duplicate of the reader's pinned ``mem``
    descriptor held against that uid's budget. Records for the ring wait in
    the engine meanwhile (``TailAwaited``) and are placed with what it read
    (``PerfEvent.tail_read``), their pages stored, before the requests whose
    records they are answer (:meth:`PerfTails.take_held`).
  * A read not done within :data:`TAIL_WAIT_S` is given up: the tail is
    unknown (the waiting records overwrite, as a read-only ring's do) and
    stays unknown, at once, until that read ends: no later write waits for
    that ring's page again while it hangs.
  * No pinned image of the reader (it never registered an event), no known
    writable mapping, no budget, or no daemon serving: unknown at once.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

import trio

from ..engine._perf_buffer import DATA_TAIL, TailAwaited
from ..engine._perf_events import PerfEvent
from ._lanes import Lanes
from ._memory import ClientMemory, read_through

log = logging.getLogger(__name__)

#: How long records wait for their ring's tail: longer than a thread
#: hand-over on a loaded machine, as long as the watchdog lets an access wait
#: on a FUSE filesystem that does not answer (``HELD_BITS_WAIT_S`` likewise).
TAIL_WAIT_S = 1.0
#: data_tail: __u64 (include/uapi/linux/perf_event.h).
_U64 = struct.Struct("=Q")


class PerfTails:
    """The engine's ``read_tail``, answered later (on one trio thread).

    Args:
        memory: the pinned images the tails are read through.
        start_of: where a ring's reader maps it writable (None: unknown).
    """

    def __init__(self, memory: ClientMemory, start_of: Callable[[PerfEvent], int | None]) -> None:
        self._memory = memory
        self._start_of = start_of
        #: Rings being read -> set once their records are placed and stored.
        self._reading: dict[PerfEvent, trio.Event] = {}
        #: Rings whose read was given up and has not ended yet.
        self._stuck: set[PerfEvent] = set()
        #: The reads records waited for since :meth:`take_held` (an ordered set).
        self._held: dict[trio.Event, None] = {}
        self._nursery: trio.Nursery | None = None
        self._lanes: Lanes | None = None
        self._publish: Callable[[], trio.Event | None] = lambda: None

    def start(self, nursery: trio.Nursery, lanes: Lanes,
              publish: Callable[[], trio.Event | None]) -> None:
        """Serve from now on: reads in ``lanes``, then ``publish()`` (the
        event set once the pages it queued are stored, or None)."""
        self._nursery, self._lanes, self._publish = nursery, lanes, publish

    def read_tail(self, perf: PerfEvent) -> int | None:
        """The engine's ``read_tail``: None when unknown now, else
        ``TailAwaited`` (a read is on its way, begun now or earlier)."""
        reading = self._reading.get(perf)
        if reading is None:
            reading = self._begin(perf)
            if reading is None:
                return None
        self._held[reading] = None
        raise TailAwaited

    def take_held(self) -> list[trio.Event]:
        """For the records the request being answered left waiting: the
        events set once they are placed and their pages stored."""
        held, self._held = list(self._held), {}
        return held

    def _begin(self, perf: PerfEvent) -> trio.Event | None:
        if self._nursery is None or perf in self._stuck:
            return None
        start = self._start_of(perf)
        if start is None:
            return None
        fd = self._memory.image_copy(perf.owner_tgid, perf.owner_uid)
        if fd is None:
            return None
        reading = self._reading[perf] = trio.Event()
        self._nursery.start_soon(self._read, perf, fd, start + DATA_TAIL, reading)
        return reading

    async def _read(self, perf: PerfEvent, fd: int, addr: int, reading: trio.Event) -> None:
        assert self._lanes is not None
        ended = False

        def end() -> None:
            nonlocal ended
            ended = True
            self._memory.drop_copy(fd, perf.owner_uid)
            self._stuck.discard(perf)

        tail = None
        with trio.move_on_after(TAIL_WAIT_S):
            try:
                data = await self._lanes.run(perf.owner_uid, read_through, perf.owner_tgid, fd,
                                             addr, _U64.size, after=end)
            except Exception:  # an unexpected errno: a bug; the records overwrite
                log.exception("data_tail of perf event %d", perf.id)
            else:
                tail = _U64.unpack(data)[0] if len(data) == _U64.size else None
        if not ended:
            self._stuck.add(perf)
            log.debug("data_tail of perf event %d not read in %.1f s", perf.id, TAIL_WAIT_S)
        del self._reading[perf]
        perf.tail_read(tail)
        stored = self._publish()
        if stored is not None:
            await stored.wait()
        reading.set()
