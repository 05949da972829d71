"""The Metadata extension: an event's name and its field definitions.

From the spec (``eventheader_extension_kind_metadata``)::

    char event_name[];       // "eventName{;attribName=attribValue}", NUL-terminated
    field definition blocks, tightly packed:
        char field_name[];   // "fieldName{;attribName=attribValue}", NUL-terminated
        uint8_t encoding;    // 0..31, plus carray 0x20, varray 0x40, chain 0x80
        uint8_t format;      // if encoding & 0x80: 0..127, plus chain 0x80
        uint16_t tag;        // if format & 0x80
        uint16_t array_length;  // if encoding & 0x20; never 0

Rules:
  * A ``struct`` field groups the next N logical fields, N = ``format & 0x7F``
    (never 0); those may be structs themselves. With an array flag it is an
    array of such structs.
  * A struct may declare more fields than the metadata holds: it then holds
    the fields up to the metadata's end. LinuxTracepoints' decoders accept
    that ("a large field count just means this structure contains all the
    remaining fields"); the shortfall is kept (``missing``) so it can be shown.
  * Structs nest at most 8 deep, as in LinuxTracepoints' decoders (their
    enumerators' stack): deeper ones are refused.
  * Attribute values escape ``;`` by doubling it.
  * A definition that breaks a rule (an unknown encoding, both array flags,
    a truncated block, ...) ends what can be read: the definitions before it
    are kept, with a description of the problem. Only an event name without
    its NUL raises :class:`MetadataError`.
  * Two fields of one struct (or of the event) with the same name get
    distinct keys: the second is ``name;2`` (``;`` cannot occur in a name).
"""

from __future__ import annotations

from ._spec import (ENCODING_CARRAY, ENCODING_CHAIN, ENCODING_VALUE_MASK, ENCODING_VARRAY,
                    FORMAT_CHAIN, FORMAT_VALUE_MASK, ByteOrder, Encoding, Format,
                    effective_format)

#: Struct nesting LinuxTracepoints' decoders accept (STRUCT_NEST_LIMIT).
STRUCT_NEST_LIMIT = 8


class MetadataError(ValueError):
    """The metadata extension does not follow the spec."""


class FieldDefinition:
    """One field definition, with the fields of a struct below it.

    Attributes:
        name: the field name (attributes removed).
        key: the name it is stored under (``name;2`` for a second ``name``).
        attributes: the name's ``;name=value`` attributes.
        encoding: the encoding, flags removed.
        format: the format byte's value, flag removed (0 if absent).
        tag: the field tag (0 if absent).
        array: 0, ``ENCODING_CARRAY`` or ``ENCODING_VARRAY``.
        length: the element count of a constant-length array.
        fields: the struct's fields (empty for other encodings).
        missing: how many of the struct's declared fields the metadata lacks.
        shown: the format values are decoded with (None for a struct).
    """

    __slots__ = ("name", "key", "attributes", "encoding", "format", "tag", "array", "length",
                 "fields", "missing", "shown")

    def __init__(self, name: str, attributes: dict[str, str], encoding: Encoding,
                 format_: int, tag: int, array: int, length: int,
                 fields: tuple[FieldDefinition, ...] = (), missing: int = 0) -> None:
        self.name = name
        self.key = name
        self.attributes = attributes
        self.encoding = encoding
        self.format = format_
        self.tag = tag
        self.array = array
        self.length = length
        self.fields = fields
        self.missing = missing
        self.shown: Format | None = (None if encoding is Encoding.STRUCT
                                     else effective_format(encoding, format_))


class EventDefinition:
    """A whole metadata block: the event's name, attributes and fields.

    Attributes:
        name, attributes: the event name and its ``;name=value`` attributes.
        fields: the field definitions that could be read.
        problem: why the definitions stop early, or None.
        tags: the nonzero field tags by field path (struct members as
            ``outer.inner``, the keys the fields are stored under).
        missing: by struct path, how many declared fields the metadata lacks.
    """

    __slots__ = ("name", "attributes", "fields", "problem", "tags", "missing")

    def __init__(self, name: str, attributes: dict[str, str],
                 fields: tuple[FieldDefinition, ...], problem: str | None = None) -> None:
        self.name = name
        self.attributes = attributes
        self.fields = fields
        self.problem = problem
        self.tags: dict[str, int] = {}
        self.missing: dict[str, int] = {}
        self._index(fields, "")

    def _index(self, fields: tuple[FieldDefinition, ...], prefix: str) -> None:
        for field in fields:
            path = prefix + field.key
            if field.tag:
                self.tags[path] = field.tag
            if field.missing:
                self.missing[path] = field.missing
            self._index(field.fields, path + ".")


def split_attributes(text: str) -> tuple[str, dict[str, str]]:
    """``name;a=1;b=x;;y`` -> ``("name", {"a": "1", "b": "x;y"})``."""
    name, sep, rest = text.partition(";")
    attributes: dict[str, str] = {}
    i = 0
    while sep and i <= len(rest):
        # One attribute: up to a single ';' (a doubled one is a literal ';').
        chars: list[str] = []
        while i < len(rest):
            if rest[i] == ";":
                if rest[i + 1:i + 2] == ";":
                    chars.append(";")
                    i += 2
                    continue
                break
            chars.append(rest[i])
            i += 1
        i += 1
        key, _, value = "".join(chars).partition("=")
        if key:
            attributes[key] = value
    return name, attributes


class _Cursor:
    __slots__ = ("data", "pos", "order")

    def __init__(self, data: bytes, order: ByteOrder) -> None:
        self.data = data
        self.pos = 0
        self.order = order

    def string(self) -> str:
        if self.pos >= len(self.data):
            raise MetadataError(f"the definitions end at {self.pos}, where a name should be")
        end = self.data.find(0, self.pos)
        if end < 0:
            raise MetadataError(f"a name at {self.pos} has no NUL")
        text = self.data[self.pos:end].decode("utf-8", "backslashreplace")
        self.pos = end + 1
        return text

    def u8(self) -> int:
        if self.pos >= len(self.data):
            raise MetadataError(f"a field definition ends early at {self.pos}")
        self.pos += 1
        return self.data[self.pos - 1]

    def u16(self) -> int:
        if self.pos + 2 > len(self.data):
            raise MetadataError(f"a field definition ends early at {self.pos}")
        self.pos += 2
        return int.from_bytes(self.data[self.pos - 2:self.pos], self.order)


def _fields(cursor: _Cursor, limit: int | None, depth: int
            ) -> tuple[tuple[FieldDefinition, ...], str | None]:
    """Up to ``limit`` definitions (None: to the end), and why they stopped early."""
    fields: list[FieldDefinition] = []
    keys: set[str] = set()
    while (limit is None or len(fields) < limit) and cursor.pos < len(cursor.data):
        try:
            field, problem = _field(cursor, depth)
        except MetadataError as exc:
            return tuple(fields), str(exc)
        key, n = field.name, 1
        while key in keys:
            n += 1
            key = f"{field.name};{n}"
        keys.add(key)
        field.key = key
        fields.append(field)
        if problem is not None:
            return tuple(fields), problem
    return tuple(fields), None


def _field(cursor: _Cursor, depth: int) -> tuple[FieldDefinition, str | None]:
    name, attributes = split_attributes(cursor.string())
    encoding_byte = cursor.u8()
    format_ = tag = length = 0
    if encoding_byte & ENCODING_CHAIN:
        format_byte = cursor.u8()
        format_ = format_byte & FORMAT_VALUE_MASK
        if format_byte & FORMAT_CHAIN:
            tag = cursor.u16()
    array = encoding_byte & (ENCODING_CARRAY | ENCODING_VARRAY)
    if array == ENCODING_CARRAY | ENCODING_VARRAY:
        raise MetadataError(f"field {name!r} is both a constant and a variable array")
    if array == ENCODING_CARRAY:
        length = cursor.u16()
        if length == 0:
            raise MetadataError(f"field {name!r} is an empty constant-length array")
    try:
        encoding = Encoding(encoding_byte & ENCODING_VALUE_MASK)
    except ValueError:
        raise MetadataError(f"field {name!r} has unknown encoding "
                            f"{encoding_byte & ENCODING_VALUE_MASK}") from None
    if encoding is Encoding.INVALID:
        raise MetadataError(f"field {name!r} has the invalid encoding 0")
    if encoding is not Encoding.STRUCT:
        return FieldDefinition(name, attributes, encoding, format_, tag, array, length), None
    if format_ == 0:
        raise MetadataError(f"struct {name!r} has no fields")
    if depth == STRUCT_NEST_LIMIT:
        raise MetadataError(f"struct {name!r} nests deeper than {STRUCT_NEST_LIMIT} levels")
    fields, problem = _fields(cursor, format_, depth + 1)
    missing = format_ - len(fields) if problem is None else 0
    return FieldDefinition(name, attributes, encoding, format_, tag, array, length, fields,
                           missing), problem


def parse_metadata(data: bytes, byte_order: ByteOrder) -> EventDefinition:
    """Parse one metadata extension block.

    Args:
        data: the extension's bytes.
        byte_order: ``"little"`` or ``"big"``, from the header's flags.

    Returns:
        The definition; its ``problem`` says where and why the field
        definitions that could be read end early.

    Raises:
        MetadataError: the block has no NUL-terminated event name.
    """
    cursor = _Cursor(data, byte_order)
    name, attributes = split_attributes(cursor.string())
    fields, problem = _fields(cursor, None, 0)
    return EventDefinition(name, attributes, fields, problem)
