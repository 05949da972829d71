"""The EventHeader convention's numbers and layouts.

Written from the specification's text (``eventheader.h`` in
microsoft/LinuxTracepoints, libeventheader-tracepoint) as of format v1.4
(its CHANGELOG: encoding ``binary_length16_char8``, any format on the counted
char8 encodings, ``ip_address`` in place of ``ipv4``/``ipv6``): every value
below is the one the spec defines; names follow it without the
``event_field_`` prefixes.

Rules:
  * Only what decoding needs: enums, the two header layouts, the tracepoint's
    field list. The C aliases that depend on the writer's ``sizeof`` (``long``,
    ``wchar_t``, pointers) are not encodings of their own: a writer resolves
    them to ``value32``/``value64`` etc. before they reach the metadata.
"""

from __future__ import annotations

import enum
import struct
from typing import Literal

#: The tracepoint's fields (``EVENTHEADER_COMMAND_TYPES``): what tells an
#: EventHeader tracepoint from any other, together with its name.
COMMAND_TYPES = "u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode;u8 level"
#: What the header's little_endian flag says about everything after it.
ByteOrder = Literal["little", "big"]
#: ``EVENTHEADER_NAME_MAX``: tracepoint names are shorter than this.
NAME_MAX = 256

# typedef struct eventheader {
#     uint8_t  flags;   // eventheader_flags
#     uint8_t  version;
#     uint16_t id;
#     uint16_t tag;
#     uint8_t  opcode;  // event_opcode
#     uint8_t  level;   // event_level
# } eventheader;
# (id and tag are in the event's byte order, which flags say.)
HEADER_LE = struct.Struct("<BBHHBB")
HEADER_BE = struct.Struct(">BBHHBB")

# typedef struct eventheader_extension {
#     uint16_t size;
#     uint16_t kind; // eventheader_extension_kind
#     // Followed by size bytes of data. No padding/alignment.
# } eventheader_extension;
EXTENSION_LE = struct.Struct("<HH")
EXTENSION_BE = struct.Struct(">HH")


class Flags(enum.IntFlag):
    """``eventheader_flags``."""

    NONE = 0
    POINTER64 = 0x01
    LITTLE_ENDIAN = 0x02
    EXTENSION = 0x04


class Opcode(enum.IntEnum):
    """``event_opcode``: special semantics of an event."""

    INFO = 0
    ACTIVITY_START = 1
    ACTIVITY_STOP = 2
    COLLECTION_START = 3
    COLLECTION_STOP = 4
    EXTENSION = 5
    REPLY = 6
    RESUME = 7
    SUSPEND = 8
    SEND = 9
    RECEIVE = 0xF0


class Level(enum.IntEnum):
    """``event_level``: 0 is invalid; values above 5 are allowed, not defined."""

    INVALID = 0
    CRITICAL_ERROR = 1
    ERROR = 2
    WARNING = 3
    INFORMATION = 4
    VERBOSE = 5


class ExtensionKind(enum.IntEnum):
    """``eventheader_extension_kind`` (the low 15 bits of ``kind``)."""

    INVALID = 0
    METADATA = 1
    ACTIVITY_ID = 2


#: ``eventheader_extension_kind_chain_flag``: another extension follows.
EXTENSION_CHAIN = 0x8000
EXTENSION_KIND_MASK = 0x7FFF


class Encoding(enum.IntEnum):
    """``event_field_encoding``: how big a field is (the low 5 bits)."""

    INVALID = 0
    STRUCT = 1
    VALUE8 = 2
    VALUE16 = 3
    VALUE32 = 4
    VALUE64 = 5
    VALUE128 = 6
    ZSTRING_CHAR8 = 7
    ZSTRING_CHAR16 = 8
    ZSTRING_CHAR32 = 9
    STRING_LENGTH16_CHAR8 = 10
    STRING_LENGTH16_CHAR16 = 11
    STRING_LENGTH16_CHAR32 = 12
    #: v1.4: string_length16_char8 whose default format is hex_bytes.
    BINARY_LENGTH16_CHAR8 = 13


ENCODING_VALUE_MASK = 0x1F
#: A constant-length array: the count (not 0) follows in the metadata.
ENCODING_CARRAY = 0x20
#: A variable-length array: a u16 count precedes the elements in the payload.
ENCODING_VARRAY = 0x40
#: A format byte follows the encoding byte.
ENCODING_CHAIN = 0x80


class Format(enum.IntEnum):
    """``event_field_format``: how to show a field (the low 7 bits)."""

    DEFAULT = 0
    UNSIGNED_INT = 1
    SIGNED_INT = 2
    HEX_INT = 3
    ERRNO = 4
    PID = 5
    TIME = 6
    BOOLEAN = 7
    FLOAT = 8
    HEX_BYTES = 9
    STRING8 = 10
    STRING_UTF = 11
    STRING_UTF_BOM = 12
    STRING_XML = 13
    STRING_JSON = 14
    UUID = 15
    PORT = 16
    #: v1.4: IPv4 on 4 bytes, IPv6 on 16 (was ``ipv4``, which stays its alias).
    IP_ADDRESS = 17
    #: v1.4: deprecated (was ``ipv6``); decoded as ``ip_address``.
    IP_ADDRESS_OBSOLETE = 18


FORMAT_VALUE_MASK = 0x7F
#: A u16 field tag follows the format byte.
FORMAT_CHAIN = 0x80

_STRING8_FORMATS = (Format.STRING_UTF, frozenset({
    Format.HEX_BYTES, Format.STRING8, Format.STRING_UTF, Format.STRING_UTF_BOM,
    Format.STRING_XML, Format.STRING_JSON}))
_WIDE_STRING_FORMATS = (Format.STRING_UTF, frozenset({
    Format.HEX_BYTES, Format.STRING_UTF, Format.STRING_UTF_BOM, Format.STRING_XML,
    Format.STRING_JSON}))
_IP = (Format.IP_ADDRESS, Format.IP_ADDRESS_OBSOLETE)

#: Each encoding's default format, and the formats the spec lists as usable
#: with it; any other format (0 included) falls back to the default.
USABLE_FORMATS: dict[Encoding, tuple[Format, frozenset[Format]]] = {
    Encoding.VALUE8: (Format.UNSIGNED_INT, frozenset({
        Format.UNSIGNED_INT, Format.SIGNED_INT, Format.HEX_INT, Format.BOOLEAN,
        Format.HEX_BYTES, Format.STRING8})),
    Encoding.VALUE16: (Format.UNSIGNED_INT, frozenset({
        Format.UNSIGNED_INT, Format.SIGNED_INT, Format.HEX_INT, Format.BOOLEAN,
        Format.HEX_BYTES, Format.STRING_UTF, Format.PORT})),
    Encoding.VALUE32: (Format.UNSIGNED_INT, frozenset({
        Format.UNSIGNED_INT, Format.SIGNED_INT, Format.HEX_INT, Format.ERRNO, Format.PID,
        Format.TIME, Format.BOOLEAN, Format.FLOAT, Format.HEX_BYTES, Format.STRING_UTF,
        *_IP})),
    Encoding.VALUE64: (Format.UNSIGNED_INT, frozenset({
        Format.UNSIGNED_INT, Format.SIGNED_INT, Format.HEX_INT, Format.TIME, Format.FLOAT,
        Format.HEX_BYTES})),
    Encoding.VALUE128: (Format.HEX_BYTES, frozenset({Format.HEX_BYTES, Format.UUID, *_IP})),
    Encoding.ZSTRING_CHAR8: _STRING8_FORMATS,
    Encoding.ZSTRING_CHAR16: _WIDE_STRING_FORMATS,
    Encoding.ZSTRING_CHAR32: _WIDE_STRING_FORMATS,
    # v1.4: the two counted char8 encodings take every format; a fixed-size
    # one applies to a value of its size only (see FIXED_SIZES).
    Encoding.STRING_LENGTH16_CHAR8: (Format.STRING_UTF, frozenset(Format)),
    Encoding.BINARY_LENGTH16_CHAR8: (Format.HEX_BYTES, frozenset(Format)),
    Encoding.STRING_LENGTH16_CHAR16: _WIDE_STRING_FORMATS,
    Encoding.STRING_LENGTH16_CHAR32: _WIDE_STRING_FORMATS,
}

#: v1.4, for string_length16_char8 and binary_length16_char8: the sizes a
#: fixed-size format reads. A value of one of these sizes is shown in the
#: format, an empty one is null, any other in the encoding's default format.
FIXED_SIZES: dict[Format, frozenset[int]] = {
    Format.UNSIGNED_INT: frozenset({1, 2, 4, 8}),
    Format.SIGNED_INT: frozenset({1, 2, 4, 8}),
    Format.HEX_INT: frozenset({1, 2, 4, 8}),
    Format.ERRNO: frozenset({4}),
    Format.PID: frozenset({4}),
    Format.TIME: frozenset({4, 8}),
    Format.BOOLEAN: frozenset({1, 2, 4}),
    Format.FLOAT: frozenset({4, 8}),
    Format.UUID: frozenset({16}),
    Format.PORT: frozenset({2}),
    Format.IP_ADDRESS: frozenset({4, 16}),
    Format.IP_ADDRESS_OBSOLETE: frozenset({4, 16}),
}


def effective_format(encoding: Encoding, format_: int) -> Format:
    """The format a decoder uses: the given one if usable, else the default."""
    default, usable = USABLE_FORMATS[encoding]
    try:
        chosen = Format(format_)
    except ValueError:
        return default
    return chosen if chosen in usable and chosen is not Format.DEFAULT else default
