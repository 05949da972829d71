"""Decoded records: what a recording holds, one JSON object per line.

Rules:
  * Records are frozen msgspec Structs, tagged by ``kind`` (``"event"`` or
    ``"lost"``) so a JSON Lines file reads back into the same objects;
    fields left at their defaults are not written.
  * Every value inside is one of JSON's own types (see the decoders' tables),
    so an event equals itself after a round trip through a file.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Union

import msgspec

from ..eventheader import EventHeaderInfo


class Event(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="kind",
            tag="event"):
    """One trace record, decoded.

    Attributes:
        system: the event's system (``user_events``, ``user_events_multi``, ...).
        name: the tracepoint name (an EventHeader event's is ``Provider_L…K…``;
            its own name is ``eventheader.event``).
        id: the record type (``common_type``), as in the event's ``id`` file.
        cpu: the per-CPU buffer it was recorded in.
        timestamp: trace clock time in nanoseconds (the ``local`` clock:
            ``CLOCK_MONOTONIC`` for tracefs-fuse).
        pid: the writing thread's id (``common_pid``).
        tgid: the writing process, when the tracefs recorded it (``saved_tgids``).
        comm: the writing thread's name, when the tracefs saved it
            (``saved_cmdlines``).
        fields: the event's fields by name, in format order; for an
            EventHeader event, the fields its metadata describes.
        eventheader: the header, extensions and tracepoint attributes of an
            EventHeader event (None for any other event).
        error: what could not be decoded, if anything (the fields concerned
            are None or missing).
    """

    system: str
    name: str
    id: int
    cpu: int
    timestamp: int
    pid: int
    tgid: int | None = None
    comm: str | None = None
    fields: dict[str, Any] = {}
    eventheader: EventHeaderInfo | None = None
    error: str | None = None

    @property
    def full_name(self) -> str:
        """``system:name``, as ``set_event`` and trace-cmd spell it."""
        return f"{self.system}:{self.name}"


class Lost(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="kind",
           tag="lost"):
    """Events the ring buffer overwrote before they could be read.

    Attributes:
        cpu: the buffer that lost them.
        timestamp: the time of the first page read after the loss.
        count: how many, when the page had room to say (None: some).
    """

    cpu: int
    timestamp: int
    count: int | None = None


Record = Union[Event, Lost]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


def encode_lines(records: Iterable[Record]) -> bytes:
    """JSON Lines: one record per line, each line ending in a newline."""
    return _encoder.encode_lines(records)


def read_lines(data: bytes) -> Iterator[Record]:
    """Every record of a JSON Lines text (blank lines skipped).

    Raises:
        msgspec.DecodeError: a line is not a record; the message names the line.
    """
    for number, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                yield _decoder.decode(line)
            except msgspec.DecodeError as exc:
                raise msgspec.DecodeError(f"line {number}: {exc}") from None
