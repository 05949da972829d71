"""Field values: reading an EventHeader payload with its field definitions.

Rules:
  * Sizes come from the encoding alone (the spec's "the encoding indicates
    how a decoder should determine the size of the field"); the format only
    says how to show the bytes, so a format the spec does not list for an
    encoding is read with the encoding's default.
  * Values are JSON's own types (a decoded event equals the same event read
    back from JSON Lines):

    =============================  ============================================
    format                          value
    =============================  ============================================
    unsigned/signed/hex int, errno,  ``int`` (signed for signed_int, errno, pid,
    pid, time, port                  time; port in network byte order)
    boolean                         ``True``/``False`` for 1/0, else the value
                                    as a signed 32-bit ``int`` (the bytes read
                                    unsigned first, so a value8 255 stays 255)
    float                           ``float``; not finite: the ``str``
                                    ``"nan"``, ``"-nan"``, ``"inf"``, ``"-inf"``
    hex_bytes, value128 default     ``str``: the bytes in hex
    string8                         ``str`` (ISO-8859-1)
    string_utf (and _bom/xml/json)  ``str`` (UTF-8/16/32 by code unit; a BOM
                                    decides the byte order where allowed;
                                    bytes of an invalid UTF-8 sequence as
                                    Latin-1, as v1.4's decoders read them;
                                    undecodable UTF-16/32 units as ``\\xNN``)
    uuid, ip_address                ``str`` in their usual notation (IPv4 on 4
                                    bytes, IPv6 on 16)
    =============================  ============================================

    A struct is a ``dict``; an array (constant or variable) a ``list``.
  * v1.4's counted char8 encodings (string_length16_char8 and
    binary_length16_char8) take any format: a fixed-size one (``FIXED_SIZES``)
    shows a value of its size as above and an empty value as ``None``; any
    other size falls back to the encoding's default (UTF-8 text, hex).
  * Fields are stored under their definitions' keys (a name used twice in
    one struct keeps both values: the second is ``name;2``).
  * At most ``ITEM_LIMIT`` structs per event (every other value takes at
    least a payload byte): a struct may hold no payload bytes at all (the
    metadata ended), so arrays of them are bounded by nothing else
    (LinuxTracepoints' decoders have such a limit too, ``move_next_limit``).
  * Running out of payload raises :class:`PayloadError` after the fields
    already read were stored in the dict being filled.
"""

from __future__ import annotations

import ipaddress
import math
import struct
import uuid
from typing import Any

from ._metadata import FieldDefinition
from ._spec import ENCODING_CARRAY, FIXED_SIZES, USABLE_FORMATS, ByteOrder, Encoding, Format

_VALUE_SIZES = {Encoding.VALUE8: 1, Encoding.VALUE16: 2, Encoding.VALUE32: 4,
                Encoding.VALUE64: 8, Encoding.VALUE128: 16}
_ZSTRING_UNITS = {Encoding.ZSTRING_CHAR8: 1, Encoding.ZSTRING_CHAR16: 2,
                  Encoding.ZSTRING_CHAR32: 4}
_COUNTED_UNITS = {Encoding.STRING_LENGTH16_CHAR8: 1, Encoding.BINARY_LENGTH16_CHAR8: 1,
                  Encoding.STRING_LENGTH16_CHAR16: 2, Encoding.STRING_LENGTH16_CHAR32: 4}
_CODECS = {(2, "little"): "utf-16-le", (2, "big"): "utf-16-be", (4, "little"): "utf-32-le",
           (4, "big"): "utf-32-be"}
_ESCAPED_TO_LATIN1 = {0xDC00 + byte: byte for byte in range(0x80, 0x100)}
#: Byte order marks by code unit: (mark, the byte order it announces).
_BOMS: dict[int, tuple[tuple[bytes, ByteOrder], ...]] = {1: ((b"\xef\xbb\xbf", "little"),),
         2: ((b"\xff\xfe", "little"), (b"\xfe\xff", "big")),
         4: ((b"\xff\xfe\x00\x00", "little"), (b"\x00\x00\xfe\xff", "big"))}
_SIGNED = frozenset({Format.SIGNED_INT, Format.ERRNO, Format.PID, Format.TIME})
_BOM_FORMATS = frozenset({Format.STRING_UTF_BOM, Format.STRING_XML, Format.STRING_JSON})
_IP_FORMATS = frozenset({Format.IP_ADDRESS, Format.IP_ADDRESS_OBSOLETE})
_FLOATS = {(4, "little"): struct.Struct("<f"), (4, "big"): struct.Struct(">f"),
           (8, "little"): struct.Struct("<d"), (8, "big"): struct.Struct(">d")}
_REPLACEMENT = "\ufffd"
#: Structs read from one event at most. A ring buffer record is under a
#: page, so a real event never comes near.
ITEM_LIMIT = 1 << 17


class PayloadError(ValueError):
    """The payload ends before its fields do."""


class Payload:
    """The payload bytes and a read position."""

    __slots__ = ("data", "pos", "order", "items")

    def __init__(self, data: bytes, pos: int, order: ByteOrder) -> None:
        self.data = data
        self.pos = pos
        self.order = order
        self.items = ITEM_LIMIT

    def spend(self, count: int, what: str) -> None:
        """Count ``count`` more structs read; raise past ``ITEM_LIMIT``."""
        self.items -= count
        if self.items < 0:
            raise PayloadError(f"{what}: more than {ITEM_LIMIT} structs in one event")

    def take(self, size: int, what: str) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise PayloadError(f"{what}: {size} bytes at {self.pos} past the payload's "
                               f"{len(self.data)}")
        raw = self.data[self.pos:end]
        self.pos = end
        return raw

    def count(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), self.order)

    def zstring(self, unit: int, what: str) -> bytes:
        data, start = self.data, self.pos
        if unit == 1:
            end = data.find(0, start)
        else:
            zero = bytes(unit)
            end = start
            while end + unit <= len(data) and data[end:end + unit] != zero:
                end += unit
            if end + unit > len(data):
                end = -1
        if end < 0:
            raise PayloadError(f"{what}: no terminating NUL after {start}")
        self.pos = end + unit
        return data[start:end]


def _char(code: int) -> str:
    """string_utf on a value16/value32: one code unit or code point."""
    if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        return _REPLACEMENT
    return chr(code)


def _ipv6(raw: bytes) -> str:
    """An IPv6 address as ``inet_ntop`` writes it (LinuxTracepoints' decoders use it).

    That is RFC 5952's text, except that an IPv4-compatible (``::a.b.c.d``)
    or IPv4-mapped (``::ffff:a.b.c.d``) address ends in dotted decimal.
    """
    words = struct.unpack(">8H", raw)
    zeros = next((i for i, word in enumerate(words) if word), 8)
    if zeros == 6 or (zeros == 5 and words[5] == 0xFFFF):
        return ("::" if zeros == 6 else "::ffff:") + str(ipaddress.IPv4Address(raw[12:]))
    return ipaddress.IPv6Address(raw).compressed


def _float(value: float) -> float | str:
    """A float, or for one JSON cannot hold, its text as LinuxTracepoints writes it."""
    if math.isfinite(value):
        return value
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    return sign + ("nan" if math.isnan(value) else "inf")


def _scalar(raw: bytes, shown: Format, order: ByteOrder) -> Any:
    if shown is Format.HEX_BYTES:
        return raw.hex()
    if len(raw) == 16:
        if shown is Format.UUID:
            return str(uuid.UUID(bytes=raw))
        return _ipv6(raw)  # the only other usable format
    if shown is Format.FLOAT:
        return _float(_FLOATS[(len(raw), order)].unpack(raw)[0])
    if shown is Format.PORT:
        return int.from_bytes(raw, "big")
    if shown in _IP_FORMATS:
        return str(ipaddress.IPv4Address(raw))
    if shown is Format.STRING8:
        return raw.decode("latin-1")
    value = int.from_bytes(raw, order, signed=shown in _SIGNED)
    if shown is Format.BOOLEAN:
        if value in (0, 1):
            return bool(value)
        # As LinuxTracepoints' decoders show it: the (zero-extended) value as
        # an int32, so a value32 0x80000000 is -2147483648.
        return value - (1 << 32) if value >= 1 << 31 else value
    if shown is Format.STRING_UTF:
        return _char(value)
    return value


def _counted8(raw: bytes, encoding: Encoding, shown: Format, order: ByteOrder) -> Any:
    """A v1.4 counted char8 value: a fixed-size format's number, null, or the default."""
    sizes = FIXED_SIZES.get(shown)
    if sizes is not None:
        if not raw:
            return None
        if len(raw) in sizes:
            return _scalar(raw, shown, order)
        shown = USABLE_FORMATS[encoding][0]
    return _string(raw, 1, shown, order)


def _string(raw: bytes, unit: int, shown: Format, order: ByteOrder) -> str:
    if shown is Format.HEX_BYTES:
        return raw.hex()
    if shown is Format.STRING8:
        return raw.decode("latin-1")
    if shown in _BOM_FORMATS:
        for mark, marked_order in _BOMS[unit]:
            if raw.startswith(mark):
                raw, order = raw[len(mark):], marked_order
                break
    if unit == 1:
        return _utf8(raw)
    return raw.decode(_CODECS[(unit, order)], "backslashreplace")


def _utf8(raw: bytes) -> str:
    """UTF-8, each byte of an invalid sequence taken as Latin-1 (as v1.4's decoders do)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        # surrogateescape keeps byte b of a bad sequence as U+DC00+b.
        return raw.decode("utf-8", "surrogateescape").translate(_ESCAPED_TO_LATIN1)


def _element(field: FieldDefinition, payload: Payload) -> Any:
    encoding = field.encoding
    if encoding is Encoding.STRUCT:
        values: dict[str, Any] = {}
        read_fields(field.fields, payload, values)
        return values
    assert field.shown is not None
    size = _VALUE_SIZES.get(encoding)
    if size is not None:
        return _scalar(payload.take(size, field.name), field.shown, payload.order)
    unit = _ZSTRING_UNITS.get(encoding)
    if unit is not None:
        raw = payload.zstring(unit, field.name)
    else:
        unit = _COUNTED_UNITS[encoding]
        raw = payload.take(payload.count(field.name) * unit, field.name)
        if unit == 1:
            return _counted8(raw, encoding, field.shown, payload.order)
    return _string(raw, unit, field.shown, payload.order)


def read_fields(fields: tuple[FieldDefinition, ...], payload: Payload,
                values: dict[str, Any]) -> None:
    """Read ``fields`` from the payload into ``values`` (see the module's rules).

    Raises:
        PayloadError: the payload ended first (or ``ITEM_LIMIT`` was reached);
            ``values`` holds what was read, and a partly read array or struct
            is stored as far as it got.
    """
    for field in fields:
        if not field.array:
            if field.encoding is Encoding.STRUCT:
                payload.spend(1, field.name)
                nested: dict[str, Any] = {}
                values[field.key] = nested
                read_fields(field.fields, payload, nested)
            else:
                values[field.key] = _element(field, payload)
            continue
        count = (field.length if field.array == ENCODING_CARRAY
                 else payload.count(field.name))
        if field.encoding is Encoding.STRUCT:
            payload.spend(count, field.name)
        elements: list[Any] = []
        values[field.key] = elements
        for _ in range(count):
            elements.append(_element(field, payload))
