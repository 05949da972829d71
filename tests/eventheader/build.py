"""EventHeader events built byte by byte, from the spec's layouts (for tests only).

Every helper returns the bytes the spec describes, nothing more: the tests
spell out each event's structure so that a failure points at one rule.
"""

from __future__ import annotations

import struct

FLAGS_LE64 = 0x07  # pointer64 | little_endian | extension
FLAGS_LE64_NO_EXT = 0x03
EXT_METADATA = 1
EXT_ACTIVITY_ID = 2
EXT_CHAIN = 0x8000


def header(*, flags: int = FLAGS_LE64, version: int = 0, id: int = 0, tag: int = 0,
           opcode: int = 0, level: int = 4, big: bool = False) -> bytes:
    """``struct eventheader``: flags, version, id, tag, opcode, level."""
    return struct.pack(">BBHHBB" if big else "<BBHHBB", flags, version, id, tag, opcode, level)


def extension(kind: int, data: bytes, *, chain: bool = False, big: bool = False) -> bytes:
    """``struct eventheader_extension`` (size, kind) and its data."""
    return struct.pack(">HH" if big else "<HH", len(data),
                       kind | (EXT_CHAIN if chain else 0)) + data


def field(name: str, encoding: int, format: int | None = None, *, tag: int | None = None,
          length: int | None = None, big: bool = False) -> bytes:
    """One field definition: name, encoding byte, [format byte, [tag]], [array length]."""
    out = name.encode() + b"\0"
    if format is not None or tag is not None:
        encoding |= 0x80
    out += bytes([encoding])
    if encoding & 0x80:
        out += bytes([(format or 0) | (0x80 if tag is not None else 0)])
        if tag is not None:
            out += struct.pack(">H" if big else "<H", tag)
    if length is not None:
        out += struct.pack(">H" if big else "<H", length)
    return out


def metadata(name: str, *fields: bytes) -> bytes:
    """A Metadata extension's data: the event name, then field definitions."""
    return name.encode() + b"\0" + b"".join(fields)


def event(name: str, fields: list[bytes], payload: bytes, *, activity: bytes | None = None,
          **head: int) -> bytes:
    """A whole event: header, [activity id], metadata, payload."""
    out = header(**head)
    if activity is not None:
        out += extension(EXT_ACTIVITY_ID, activity, chain=True)
    return out + extension(EXT_METADATA, metadata(name, *fields)) + payload
