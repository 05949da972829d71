"""Recording: a served tracefs's records, decoded and written as JSON Lines while it runs.

What ``tracefs-fuse run --record FILE`` does: the runner serves the tracefs
in-process, so the recording reads the engine's ring buffers directly (no
FUSE round trip, no reader competing for the trio thread's attention in
another thread), decodes each sub-buffer with the engine's own formats
(through their ``format`` text, as any reader would) and appends the
records to FILE, oldest first, one JSON object per line.

Rules:
  * Draining is driven by data: after records arrive the recording waits
    :data:`BATCH_S` for more to gather, then takes everything there is, so a
    busy program pays one drain per batch, not one per event, and a reader
    following the file (the pytest plugin's ``wait_for``) sees an event
    within about that delay.
  * An event about to be deleted has its buffers drained at once (the
    engine's ``retiring_listeners``): its records are decoded with its own
    format, before its id can name another event.
  * Records of all CPUs are merged by time stamp within each drain. The
    engine stamps every record from one clock in one thread, so the file is
    in time order across drains too.
  * Reading consumes, like ``trace_pipe_raw``: a program under recording
    that reads ``trace_pipe``/``trace_pipe_raw`` itself takes records away
    from the recording.
  * What the file gets is written from a worker thread, shielded from
    cancellation: a drained batch is never lost half way.
  * Nothing a program does stops the recording (or the run): an event whose
    ``format`` text does not parse (a field name with a newline, which the
    kernel accepts too) keeps its records, undecoded, with an ``error``; a
    sub-buffer that fails to decode is a bug here: logged at ERROR with its
    traceback and skipped.

Caveats:
  * ``tgid`` is filled only when ``options/record-tgid`` is on (the engine
    then saves it, as the kernel does); a recording does not switch it on,
    because it changes what ``trace`` prints.
"""

from __future__ import annotations

import heapq
import logging
import sys
from typing import BinaryIO, Callable, Protocol

import msgspec
import trio

from ..decode import (
    EventFormat,
    FormatError,
    Lost,
    Record,
    RecordDecoder,
    encode_lines,
    parse_format,
)
from ..engine import Tracefs, WouldBlock

log = logging.getLogger(__name__)

#: How long records may gather after the first arrives before a drain.
BATCH_S = 0.01


class Served(Protocol):
    """What a recording needs of a daemon: its engine, a data-arrived hook,
    and the records its fast path staged, taken in on demand."""

    @property
    def tracefs(self) -> Tracefs:
        ...

    def add_data_listener(self, listener: Callable[[], None]) -> None:
        ...

    def take_in_staged(self) -> None:
        ...


class RecordSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The totals of one recording.

    Attributes:
        events: event records written.
        lost: events the ring buffer overwrote, as far as the pages said.
        lost_uncounted: losses a page reported without a count.
    """

    events: int
    lost: int
    lost_uncounted: int

    def render(self, path: str) -> str:
        """The summary line ``run --record`` prints on stderr."""
        line = f"tracefs-fuse: recorded {self.events} event{'s' * (self.events != 1)} to {path}"
        if self.lost or self.lost_uncounted:
            # A page may say that events were lost without room to say how many.
            count = (f"{self.lost}{' or more' if self.lost_uncounted else ''}" if self.lost
                     else "some")
            line += (f"; {count} lost: the ring buffer overflowed "
                     "(a larger --buffer-size-kb keeps them)")
        return line


class Recording:
    """Records one tracefs into a binary file.

    Args:
        tracefs: the engine being served.
        out: where JSON Lines go (kept open; flushed after every batch).
        path: the file's name, for the summary.
        take_in_staged: brings records the daemon's fast path staged into the
            engine's buffers (a served daemon's; nothing for a bare engine).
    """

    def __init__(self, tracefs: Tracefs, out: BinaryIO, path: str,
                 take_in_staged: Callable[[], None] = lambda: None) -> None:
        self.tracefs = tracefs
        self._take_in_staged = take_in_staged
        self.out = out
        self.path = path
        self._formats: dict[int, tuple[object, EventFormat | None]] = {}
        cmdlines = tracefs.cmdlines
        # Looked up through the object: saved_cmdlines_size replaces its tables.
        self.decoder = RecordDecoder(self._format, comm=lambda pid: cmdlines.comms.get(pid),
                                     tgid=lambda pid: cmdlines.tgids.get(pid))
        #: Drained at an event's deletion, written with the next batch.
        self._pending: list[Record] = []
        tracefs.events.retiring_listeners.append(self._retiring)
        self._arrived = trio.Event()
        self._scope = trio.CancelScope()
        self._stopped = trio.Event()
        self._events = 0
        self._lost = 0
        self._lost_uncounted = 0

    def _format(self, event_id: int) -> EventFormat | None:
        event = self.tracefs.events.by_id(event_id)
        if event is None:
            return None
        cached = self._formats.get(event_id)
        if cached is None or cached[0] is not event:
            try:
                parsed: EventFormat | None = parse_format(event.format_text(), event.system)
            except FormatError as exc:
                log.warning("%s:%s: its format does not parse (%s); its records are kept "
                            "undecoded", event.system, event.name, exc)
                parsed = None
            cached = self._formats[event_id] = (event, parsed)
        return cached[1]

    def _retiring(self, event: object) -> None:
        self._pending += self.drain()

    def _take(self) -> list[Record]:
        """Everything not written yet: what deletions drained, then the buffers
        (with what the fast path staged: the last writes of a program that just
        ended may be nowhere else yet)."""
        self._take_in_staged()
        records = self.drain()
        if self._pending:
            records, self._pending = self._pending + records, []
        return records

    def data_arrived(self) -> None:
        """The daemon's hook: records landed in a buffer."""
        self._arrived.set()

    def drain(self) -> list[Record]:
        """Every record in the buffers now, decoded, oldest first."""
        buffer = self.tracefs.buffer
        per_cpu: list[list[Record]] = []
        for cpu in range(self.tracefs.nr_cpus):
            records: list[Record] = []
            while True:
                try:
                    page = buffer.read_page_nowait(cpu, buffer.subbuf_size)
                except WouldBlock:
                    break
                try:
                    records += self.decoder.decode_page(cpu, page)
                except Exception:
                    log.exception("cpu %d: a sub-buffer failed to decode: skipped", cpu)
            per_cpu.append(records)
        merged = list(heapq.merge(*per_cpu, key=lambda record: record.timestamp))
        for record in merged:
            if isinstance(record, Lost):
                if record.count is None:
                    self._lost_uncounted += 1
                else:
                    self._lost += record.count
            else:
                self._events += 1
        return merged

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    async def run(self, *, task_status: trio.TaskStatus[Recording] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Drain batch after batch until :meth:`finish` stops it."""
        try:
            with self._scope:
                task_status.started(self)
                while True:
                    await self._arrived.wait()
                    await trio.sleep(BATCH_S)
                    self._arrived = trio.Event()
                    data = encode_lines(self._take())
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(self._write, data)
        finally:
            self._stopped.set()

    async def finish(self) -> RecordSummary:
        """Stop following, write whatever is left (after the batch being
        written, if any), and say how it went."""
        self._scope.cancel()
        await self._stopped.wait()
        self.tracefs.events.retiring_listeners.remove(self._retiring)
        self._write(encode_lines(self._take()))
        return RecordSummary(events=self._events, lost=self._lost,
                             lost_uncounted=self._lost_uncounted)


async def start_recording(nursery: trio.Nursery, served: Served,
                          out: tuple[BinaryIO, str] | None) -> Recording | None:
    """Start recording what ``served`` serves into ``out`` (file, name), if any."""
    if out is None:
        return None
    recording: Recording = await nursery.start(
        Recording(served.tracefs, out[0], out[1], served.take_in_staged).run)
    served.add_data_listener(recording.data_arrived)
    return recording


async def finish_recording(recording: Recording | None) -> None:
    """Write the rest and print the summary line on stderr."""
    if recording is not None:
        summary = await recording.finish()
        print(summary.render(recording.path), file=sys.stderr)
