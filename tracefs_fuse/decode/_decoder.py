"""Sub-buffers in, :class:`Event` and :class:`Lost` records out.

Rules:
  * The decoder knows events only through their formats, looked up by record
    type as records arrive (events come and go while a program runs); a
    format that changed under an id (the event was removed and its id reused)
    is compiled again.
  * An EventHeader tracepoint is recognised by its fields (exactly
    ``COMMAND_TYPES``) and its name (``Provider_L…K…``); its records are
    decoded by :mod:`tracefs_fuse.eventheader`, the rest field by field.
  * Nothing a record holds makes decoding raise: a record that cannot be
    decoded becomes an :class:`Event` whose ``error`` says why. Only a page
    whose structure is broken raises (:class:`~._page.PageError`).

Kernel: include/linux/trace_events.h (``struct trace_entry``).
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from ..eventheader import (COMMAND_TYPES, EventHeaderDecoder, EventHeaderError,
                           TracepointName, parse_tracepoint_name)
from ._fields import FieldsDecoder
from ._format import EventFormat
from ._page import read_page
from ._records import Event, Lost, Record

# struct trace_entry {
#         unsigned short          type;
#         unsigned char           flags;
#         unsigned char           preempt_count;
#         int                     pid;
# };
_TRACE_ENTRY = struct.Struct("<HBBi")
TRACE_ENTRY_SIZE = _TRACE_ENTRY.size
#: (type, name) of an EventHeader tracepoint's fields, from the command text.
_EVENTHEADER_FIELDS = tuple(tuple(field.split(" ")) for field in COMMAND_TYPES.split(";"))
_MULTI_SYSTEM = "user_events_multi"


def eventheader_tracepoint(event: EventFormat) -> TracepointName | None:
    """The name's attributes if ``event`` is an EventHeader tracepoint, else None."""
    if tuple((f.type, f.name) for f in event.fields) != _EVENTHEADER_FIELDS:
        return None
    if event.fields[0].offset != TRACE_ENTRY_SIZE:
        return None
    return parse_tracepoint_name(event.name, multi_format=event.system == _MULTI_SYSTEM)


class _Compiled:
    """One format, ready to decode records."""

    __slots__ = ("format", "fields", "tracepoint")

    def __init__(self, event: EventFormat) -> None:
        self.format = event
        self.tracepoint = eventheader_tracepoint(event)
        self.fields = FieldsDecoder(event.fields) if self.tracepoint is None else None


class RecordDecoder:
    """Decodes the records of one tracefs.

    Args:
        formats: the format of a record type, or None if unknown.
        comm: a thread's name by thread id, or None (``saved_cmdlines``).
        tgid: a thread's process by thread id, or None (``saved_tgids``).
    """

    def __init__(self, formats: Callable[[int], EventFormat | None], *,
                 comm: Callable[[int], str | None] = lambda pid: None,
                 tgid: Callable[[int], int | None] = lambda pid: None) -> None:
        self._formats = formats
        self._comm = comm
        self._tgid = tgid
        self._compiled: dict[int, _Compiled] = {}
        self._eventheader = EventHeaderDecoder()

    def _compile(self, event_id: int) -> _Compiled | None:
        event = self._formats(event_id)
        if event is None:
            return None
        compiled = self._compiled.get(event_id)
        if compiled is None or (compiled.format is not event and compiled.format != event):
            compiled = self._compiled[event_id] = _Compiled(event)
        return compiled

    def decode_page(self, cpu: int, page: bytes | memoryview) -> list[Record]:
        """Every record of one sub-buffer of ``per_cpu/cpu<cpu>/trace_pipe_raw``.

        A :class:`Lost` record comes first if events were lost before the page.

        Raises:
            PageError: the page's structure is broken.
        """
        found = read_page(page)
        records: list[Record] = []
        if found.missed:
            records.append(Lost(cpu=cpu, timestamp=found.time_stamp, count=found.lost))
        view = memoryview(page)
        # Formats are looked up once per page: an id is reused only after its
        # event is gone, and the kernel clears the buffer then.
        compiled: dict[int, _Compiled | None] = {}
        for timestamp, start, end in found.records:
            records.append(self._decode(cpu, timestamp, view[start:end], compiled))
        return records

    def decode_record(self, cpu: int, timestamp: int, record: bytes | memoryview) -> Event:
        """One record (common fields first), as the ring buffer stored it."""
        return self._decode(cpu, timestamp, record, {})

    def _decode(self, cpu: int, timestamp: int, record: bytes | memoryview,
                compiled_by_id: dict[int, _Compiled | None]) -> Event:
        if len(record) < TRACE_ENTRY_SIZE:
            return Event(system="", name="", id=0, cpu=cpu, timestamp=timestamp, pid=0,
                         error=f"a {len(record)}-byte record has no trace_entry")
        event_id, _, _, pid = _TRACE_ENTRY.unpack_from(record, 0)
        try:
            compiled = compiled_by_id[event_id]
        except KeyError:
            compiled = compiled_by_id[event_id] = self._compile(event_id)
        if compiled is None:
            return Event(system="", name="", id=event_id, cpu=cpu, timestamp=timestamp,
                         pid=pid, comm=self._comm(pid), tgid=self._tgid(pid),
                         error=f"no usable format for event id {event_id}: {bytes(record).hex()}")
        eventheader = None
        fields: dict[str, Any]
        if compiled.fields is not None:
            fields, error = compiled.fields.decode(record)
        else:
            assert compiled.tracepoint is not None
            try:
                eventheader, fields, error = self._eventheader.decode(
                    compiled.tracepoint, bytes(record[TRACE_ENTRY_SIZE:]))
            except EventHeaderError as exc:
                fields, error = {}, str(exc)
        event = compiled.format
        return Event(system=event.system, name=event.name, id=event_id, cpu=cpu,
                     timestamp=timestamp, pid=pid, tgid=self._tgid(pid), comm=self._comm(pid),
                     fields=fields, eventheader=eventheader, error=error)
