"""One EventHeader event: header, extension blocks, then the payload's fields.

Layout (the spec's "Event = eventheader + [HeaderExtensions] + Data"): the
8-byte ``eventheader``; if ``flags`` has the extension bit, extension blocks
follow back to back (a 4-byte ``eventheader_extension`` and ``size`` bytes
each, the chain bit saying another follows); then the payload, decoded with
the Metadata extension's field definitions if there is one.

Rules:
  * The byte order of everything after ``flags`` is the one ``flags`` says.
  * An activity-id block holds 16 bytes (the activity) or 32 (the activity,
    then its parent); both are shown as UUIDs.
  * Without a Metadata block the payload cannot be named (the spec's
    decoding manifests are outside the event): it is kept in hex. So is the
    payload of a Metadata block without an event name; a block whose field
    definitions break off keeps the name and the fields before the break.
  * Parsed metadata is cached by its bytes: events of one definition repeat
    the same block.
  * What LinuxTracepoints' decoders refuse (header flags the spec does not
    define, an extension of the invalid kind 0, a second Metadata or
    activity-id block) is reported; the event is decoded anyway, with the
    first block of each kind.
  * Decoding never raises for anything after the header: what could not be
    read is described in the returned problem.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from ._metadata import EventDefinition, MetadataError, parse_metadata
from ._name import TracepointName
from ._spec import (EXTENSION_BE, EXTENSION_CHAIN, EXTENSION_KIND_MASK, EXTENSION_LE,
                    HEADER_BE, HEADER_LE, ByteOrder, ExtensionKind, Flags)
from ._values import Payload, PayloadError, read_fields

HEADER_SIZE = HEADER_LE.size
_EXTENSION_SIZE = EXTENSION_LE.size
_KNOWN_FLAGS = int(Flags.POINTER64 | Flags.LITTLE_ENDIAN | Flags.EXTENSION)
#: Distinct metadata blocks kept parsed.
_CACHE_SIZE = 4096


class EventHeaderError(ValueError):
    """The bytes are too short to hold an ``eventheader``."""


class EventHeaderInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What an EventHeader event says about itself, beside its fields.

    Attributes:
        provider: the provider, from the tracepoint name.
        event: the event's name, from the Metadata extension (None without one).
        attributes: the event name's ``;name=value`` attributes.
        level: severity from the header (1 critical .. 5 verbose).
        keyword: category bits, from the tracepoint name.
        options: the tracepoint name's options by letter (``G``: provider group).
        flags: the header's ``eventheader_flags``.
        version: the event's version.
        id: the event's stable id (0: none).
        tag: the provider-defined event tag.
        opcode: special semantics (``Opcode``: 1 activity start, 2 stop, ...).
        activity_id: the activity the event belongs to, as a UUID string.
        related_activity_id: the parent activity (on an activity's first event).
        payload: the payload in hex, when there is no Metadata to decode it: the
            bytes to the end of ``data``. A ring buffer record is rounded up to
            4 bytes and keeps no length, so from ``trace_pipe_raw`` up to 3
            bytes the program did not write (stale page bytes) may end it;
            nothing in the record tells them apart from the payload's own.
        extensions: blocks of kinds the spec does not define, in hex by kind.
        field_tags: the metadata's nonzero field tags by field path: the key in
            ``fields``, a struct's members as ``struct.member`` (so too in an
            array of structs, whose elements share their definitions).
        missing_fields: by struct path, how many fields a struct declares
            beyond the metadata's end (it holds the fields up to there).
    """

    provider: str
    event: str | None = None
    attributes: dict[str, str] = {}
    level: int
    keyword: int
    options: dict[str, str] = {}
    flags: int
    version: int
    id: int
    tag: int
    opcode: int
    activity_id: str | None = None
    related_activity_id: str | None = None
    payload: str | None = None
    extensions: dict[int, str] = {}
    field_tags: dict[str, int] = {}
    missing_fields: dict[str, int] = {}

    @property
    def group(self) -> str | None:
        """The provider group (the tracepoint name's ``G`` option)."""
        return self.options.get("G")


class EventHeaderDecoder:
    """Decodes EventHeader events, keeping parsed metadata blocks for reuse."""

    def __init__(self) -> None:
        self._definitions: dict[tuple[bytes, ByteOrder], EventDefinition] = {}

    def _definition(self, block: bytes, order: ByteOrder) -> EventDefinition:
        key = (block, order)
        found = self._definitions.get(key)
        if found is None:
            found = parse_metadata(block, order)
            if len(self._definitions) >= _CACHE_SIZE:
                self._definitions.clear()
            self._definitions[key] = found
        return found

    def decode(self, tracepoint: TracepointName, data: bytes
               ) -> tuple[EventHeaderInfo, dict[str, Any], str | None]:
        """Decode an EventHeader event.

        Args:
            tracepoint: the attributes of the tracepoint it was written to.
            data: the event from its ``eventheader`` on (the record after its
                common fields); trailing bytes beyond the payload are ignored.

        Returns:
            The event's header information, its fields by name (nested for
            structs), and a description of what could not be decoded, or None.

        Raises:
            EventHeaderError: fewer than 8 bytes.
        """
        if len(data) < HEADER_SIZE:
            raise EventHeaderError(f"{len(data)} bytes cannot hold an eventheader")
        flags = data[0]
        little = bool(flags & Flags.LITTLE_ENDIAN)
        order: ByteOrder = "little" if little else "big"
        _, version, event_id, tag, opcode, level = (HEADER_LE if little else HEADER_BE
                                                    ).unpack_from(data, 0)
        extension = EXTENSION_LE if little else EXTENSION_BE
        pos = HEADER_SIZE
        problems: list[str] = []
        definition: EventDefinition | None = None
        activity: list[str | None] = [None, None]
        unknown: dict[int, str] = {}
        seen_metadata = False
        if flags & ~_KNOWN_FLAGS:
            problems.append(f"unknown header flags {flags & ~_KNOWN_FLAGS:#04x}")
        more = bool(flags & Flags.EXTENSION)
        while more:
            if pos + _EXTENSION_SIZE > len(data):
                problems.append(f"an extension header at {pos} runs past the event")
                break
            size, kind = extension.unpack_from(data, pos)
            pos += _EXTENSION_SIZE
            block = data[pos:pos + size]
            if len(block) < size:
                problems.append(f"a {size}-byte extension at {pos} runs past the event")
                break
            pos += size
            more = bool(kind & EXTENSION_CHAIN)
            kind &= EXTENSION_KIND_MASK
            if kind == ExtensionKind.METADATA and seen_metadata:
                problems.append("a second metadata extension (the first is used)")
            elif kind == ExtensionKind.METADATA:
                seen_metadata = True
                try:
                    definition = self._definition(block, order)
                except MetadataError as exc:
                    problems.append(f"metadata: {exc}")
            elif kind == ExtensionKind.ACTIVITY_ID and activity[0] is not None:
                problems.append("a second activity id extension (the first is used)")
            elif kind == ExtensionKind.ACTIVITY_ID and size in (16, 32):
                activity = [str(uuid.UUID(bytes=block[:16])),
                            str(uuid.UUID(bytes=block[16:])) if size == 32 else None]
            elif kind == ExtensionKind.ACTIVITY_ID:
                problems.append(f"an activity id extension of {size} bytes (16 or 32)")
            elif kind == ExtensionKind.INVALID:
                problems.append(f"an extension of the invalid kind 0 ({size} bytes)")
            else:
                unknown[kind] = block.hex()
        fields: dict[str, Any] = {}
        payload = None
        if definition is not None:
            if definition.problem is not None:
                problems.append(f"metadata: {definition.problem}")
            try:
                read_fields(definition.fields, Payload(data, pos, order), fields)
            except PayloadError as exc:
                problems.append(str(exc))
        else:
            payload = data[pos:].hex()
        if level != tracepoint.level:
            problems.append(f"header level {level} differs from the tracepoint's "
                            f"L{tracepoint.level:x}")
        info = EventHeaderInfo(
            provider=tracepoint.provider, event=definition.name if definition else None,
            attributes=definition.attributes if definition else {}, level=level,
            keyword=tracepoint.keyword, options=tracepoint.options, flags=flags,
            version=version, id=event_id, tag=tag, opcode=opcode, activity_id=activity[0],
            related_activity_id=activity[1], payload=payload, extensions=unknown,
            field_tags=definition.tags if definition else {},
            missing_fields=definition.missing if definition else {})
        return info, fields, "; ".join(problems) or None
