"""EventHeader: the self-describing event convention on user_events tracepoints.

Most user_events emitters (Microsoft's LinuxTracepoints ``TraceLoggingProvider.h``
and ``EventHeaderDynamic.h``, the Rust and Go ``eventheader`` crates,
OpenTelemetry's user_events exporters, .NET) share one tracepoint among many
events, named ``Provider_L<level>K<keyword>[Options]`` with the fields
``COMMAND_TYPES``; each event carries an 8-byte header, optional extension
blocks (its metadata, an activity id), then fields its metadata describes.

This package decodes them, written from the spec's text
(``libeventheader-tracepoint/include/eventheader/eventheader.h``). It is pure:
bytes in, values out, no I/O.

Owns: the EventHeader format.
May import: nothing of ours.
"""

from ._event import EventHeaderDecoder as EventHeaderDecoder
from ._event import EventHeaderError as EventHeaderError
from ._event import EventHeaderInfo as EventHeaderInfo
from ._metadata import MetadataError as MetadataError
from ._name import TracepointName as TracepointName
from ._name import parse_tracepoint_name as parse_tracepoint_name
from ._spec import COMMAND_TYPES as COMMAND_TYPES
from ._spec import Encoding as Encoding
from ._spec import ExtensionKind as ExtensionKind
from ._spec import Flags as Flags
from ._spec import Format as Format
from ._spec import Level as Level
from ._spec import Opcode as Opcode

__all__ = ["COMMAND_TYPES", "Encoding", "EventHeaderDecoder", "EventHeaderError",
           "EventHeaderInfo", "ExtensionKind", "Flags", "Format", "Level", "MetadataError",
           "Opcode", "TracepointName", "parse_tracepoint_name"]
