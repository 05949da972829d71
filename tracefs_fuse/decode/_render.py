"""Records as text, one line each, for people (``tracefs-fuse show``).

Rules:
  * The line starts like the kernel's ``trace`` file (``comm-pid [cpu]
    seconds.micros:``) so it reads like what users know; then the event's
    name and its fields as ``name=value``, values written as JSON (strings
    quoted, nested structs and arrays as JSON objects and lists).
  * An EventHeader event is named ``Provider:EventName`` and shows its level,
    keyword and, when set, opcode, id/version, tag and activity ids before its
    fields. A field with a field tag is named ``name;tag=0xTAG``, as
    LinuxTracepoints' decoders name it when asked for field tags; a struct
    that declares more fields than its metadata holds is listed in
    ``missing_fields``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..eventheader import EventHeaderInfo, Opcode
from ._records import Event, Lost, Record

_json = msgspec.json.Encoder()


def _value(value: Any) -> str:
    return _json.encode(value).decode()


def _fields(fields: dict[str, Any]) -> str:
    return " ".join(f"{name}={_value(value)}" for name, value in fields.items())


def _tagged(fields: dict[str, Any], tags: dict[str, int], prefix: str) -> dict[str, Any]:
    """``fields`` with each tagged field's key followed by ``;tag=0xTAG``."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        path = prefix + key
        if isinstance(value, dict):
            value = _tagged(value, tags, path + ".")
        elif isinstance(value, list):
            value = [_tagged(item, tags, path + ".") if isinstance(item, dict) else item
                     for item in value]
        tag = tags.get(path)
        out[f"{key};tag=0x{tag:X}" if tag else key] = value
    return out


def _opcode(opcode: int) -> str:
    try:
        return Opcode(opcode).name.lower()
    except ValueError:
        return str(opcode)


def _eventheader(info: EventHeaderInfo) -> tuple[str, str]:
    name = f"{info.provider}:{info.event if info.event is not None else '?'}"
    parts = [f"level={info.level}", f"keyword={info.keyword:#x}"]
    if info.group is not None:
        parts.append(f"group={info.group}")
    if info.opcode:
        parts.append(f"opcode={_opcode(info.opcode)}")
    if info.id or info.version:
        parts.append(f"id={info.id} version={info.version}")
    if info.tag:
        parts.append(f"tag={info.tag:#x}")
    if info.activity_id is not None:
        parts.append(f"activity={info.activity_id}")
    if info.related_activity_id is not None:
        parts.append(f"related={info.related_activity_id}")
    if info.payload is not None:
        parts.append(f"payload={info.payload}")
    if info.missing_fields:
        parts.append(f"missing_fields={_value(info.missing_fields)}")
    return name, " ".join(parts)


def render_record(record: Record) -> str:
    """One line for a record (no newline)."""
    if isinstance(record, Lost):
        count = "some" if record.count is None else str(record.count)
        return f"# [{record.cpu:03d}] {_seconds(record.timestamp)}: lost {count} events"
    return render_event(record)


def _seconds(timestamp: int) -> str:
    seconds, nanos = divmod(timestamp, 1_000_000_000)
    return f"{seconds:5d}.{nanos // 1000:06d}"


def render_event(event: Event) -> str:
    who = f"{event.comm if event.comm is not None else '<...>'}-{event.pid}"
    head = f"{who:>16} [{event.cpu:03d}] {_seconds(event.timestamp)}:"
    if event.eventheader is not None:
        name, attributes = _eventheader(event.eventheader)
        line = f"{head} {name} {attributes}"
    else:
        line = f"{head} {event.full_name}"
    fields = event.fields
    if event.eventheader is not None and event.eventheader.field_tags:
        fields = _tagged(fields, event.eventheader.field_tags, "")
    if fields:
        line += " " + _fields(fields)
    if event.error is not None:
        line += f"  !! {event.error}"
    return line
