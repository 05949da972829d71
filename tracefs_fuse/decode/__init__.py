"""Events as data: trace records decoded into msgspec Structs.

A tracefs hands out records as bytes (``per_cpu/cpuN/trace_pipe_raw``) and
describes them in text (``events/<system>/<name>/format``). This package turns
the two into :class:`Event` records with fields by name, EventHeader events
included (:mod:`tracefs_fuse.eventheader`), and reads and writes them as JSON
Lines. It works on any tracefs, ours or a real kernel's.

It is pure: bytes and text in, records out, no I/O.

Owns: record decoding, JSON Lines.
May import: ``eventheader``.
"""

from ._decoder import RecordDecoder as RecordDecoder
from ._format import EventFormat as EventFormat
from ._format import FieldFormat as FieldFormat
from ._format import FormatError as FormatError
from ._format import parse_format as parse_format
from ._page import PageError as PageError
from ._records import Event as Event
from ._records import Lost as Lost
from ._records import Record as Record
from ._records import encode_lines as encode_lines
from ._records import read_lines as read_lines
from ._render import render_record as render_record

__all__ = ["Event", "EventFormat", "FieldFormat", "FormatError", "Lost", "PageError",
           "Record", "RecordDecoder", "encode_lines", "parse_format", "read_lines",
           "render_record"]
