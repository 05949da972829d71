"""EventHeader records the project's own C clients wrote, as a reader captured them.

tests/data/eventheader-captures.tracefs-fuse.json comes from
``tests/eventheader/capture.py``: tests/clients/eh_emit.c and
docs/examples/eventheader.c run under ``tracefs-fuse run``, then every
user event's ``format`` file and every ``trace_pipe_raw`` sub-buffer. The
values expected here are the ones those C sources write.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from tracefs_fuse.decode import Event, RecordDecoder, parse_format

CAPTURES = Path(__file__).parents[1] / "data" / "eventheader-captures.tracefs-fuse.json"
ACTIVITY = "a1a2a3a4-b1b2-c1c2-d1d2-e1e2e3e4e5e6"

#: (tracepoint, fields, eventheader attributes), in the order they were written.
EXPECTED = [
    ("Corp_Svc_L5K2Gops",
     {"path": "/api/v1/items", "attempt": 42, "peer": "2001:db8::7", "port": 8080},
     {"provider": "Corp_Svc", "event": "RequestStart", "attributes": {"owner": "ops"},
      "level": 5, "keyword": 2, "options": {"G": "ops"}, "flags": 7, "version": 0, "id": 0,
      "tag": 0, "opcode": 1, "activity_id": ACTIVITY,
      "related_activity_id": "11223344-5566-7788-9900-aabbccddeeff"}),
    ("Corp_Svc_L5K2Gops", {"status": -110, "elapsed": 0.25, "ok": False},
     {"provider": "Corp_Svc", "event": "RequestStop", "level": 5, "keyword": 2,
      "options": {"G": "ops"}, "flags": 7, "version": 0, "id": 0, "tag": 0, "opcode": 2,
      "activity_id": ACTIVITY, "field_tags": {"ok": 0x77}}),
    ("Corp_Svc_L4K1",
     {"items": [{"name": "abc", "weights": [1, 2]}, {"name": "", "weights": [3, 4]}],
      "wide": "hé"},
     {"provider": "Corp_Svc", "event": "Batch", "level": 4, "keyword": 1, "flags": 7,
      "version": 1, "id": 9, "tag": 0, "opcode": 0}),
    ("Corp_Svc_L4K1", {},
     {"provider": "Corp_Svc", "level": 4, "keyword": 1, "flags": 3, "version": 3, "id": 100,
      "tag": 0, "opcode": 0, "payload": "efbeadde"}),
    ("MyCompany_Greeter_L4K1",
     {"message": "captured greeting", "count": 7, "origin": {"x": -3, "y": 7},
      "scores": [1, 2, 3]},
     {"provider": "MyCompany_Greeter", "event": "Greeting", "level": 4, "keyword": 1,
      "flags": 7, "version": 0, "id": 0, "tag": 0, "opcode": 0,
      "activity_id": "6f2a1c3e-474d-4b5a-8e11-029c0d5e7701"}),
]


def test_captured_eventheader_records_decode_to_what_the_clients_wrote() -> None:
    capture = json.loads(CAPTURES.read_text())
    formats = {}
    for entry in capture["formats"]:
        fmt = parse_format(entry["text"], entry["system"])
        formats[fmt.id] = fmt
    decoder = RecordDecoder(formats.get)
    records = [record for page in capture["pages"]
               for record in decoder.decode_page(page["cpu"], bytes.fromhex(page["page"]))]
    events = [r for r in records if isinstance(r, Event)]
    assert len(events) == len(records)
    assert [(e.name, e.fields, msgspec.to_builtins(e.eventheader), e.error) for e in events] == [
        (name, fields, info, None) for name, fields, info in EXPECTED]
