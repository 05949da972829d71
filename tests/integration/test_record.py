"""``tracefs-fuse run --record``: what a C client writes comes back, field by field.

The client (tests/clients/ue_replay.c) registers and writes what the test
built: plain user events packed with ``struct``, and EventHeader events
built byte by byte from the spec (tests/eventheader/build.py). Nothing
enables them but ``run --record``'s auto-enable; the client refuses to write
an event whose bit is not set.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from tracefs_fuse.decode import Event, Lost, read_lines

from ..eventheader.build import EXT_ACTIVITY_ID, EXT_METADATA, extension, field, header, metadata
from .conftest import start_mount, stop_mount

pytestmark = pytest.mark.uses_fuse

#: The session fixture that compiles tests/clients/<name>.c.
Build = Callable[[str], Path]

RUN = [sys.executable, "-m", "tracefs_fuse", "run"]
EH = "u8 eventheader_flags;u8 version;u16 id;u16 tag;u8 opcode;u8 level"
ACTIVITY = bytes.fromhex("0123456789abcdef0011223344556677")
PARENT = bytes.fromhex("fedcba98765432100011223344556677")


def plain_events() -> list[tuple[str, bytes, dict[str, Any]]]:
    """(registration, payload, fields) of events with every field kind."""
    scalars = ("scalars u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h; char c1; "
               "unsigned char c2; int i; unsigned int ui; short sh; unsigned short ush")
    values = dict(a=255, b=-128, c=65535, d=-32768, e=4294967295, f=-2147483648,
                  g=18446744073709551615, h=-9223372036854775808, c1=-1, c2=200, i=-7,
                  ui=7, sh=-300, ush=300)
    scalar_payload = struct.pack("<BbHhIiQqbBiIhH", *values.values())
    # strings: char[12] name @8, __data_loc dl @20, __rel_loc rl @24, u32 after @28; data @32.
    dl, rl = "data-loc text".encode() + b"\0", "rel-loc ü".encode() + b"\0"
    strings_payload = (b"name-here\0\0\0"
                       + struct.pack("<I", len(dl) << 16 | 32)
                       + struct.pack("<I", len(rl) << 16 | (32 + len(dl) - 28))
                       + struct.pack("<I", 99) + dl + rl)
    # arrays: unsigned char[4] raw @8, __data_loc u32[] @12, __rel_loc u16[] @16,
    # struct blob b 6 @20; data @26.
    nums, shorts = struct.pack("<3I", 1, 2, 4000000000), struct.pack("<2H", 7, 65535)
    arrays_payload = (b"\x00\x01\xfe\xff"
                      + struct.pack("<I", len(nums) << 16 | 26)
                      + struct.pack("<I", len(shorts) << 16 | (26 + len(nums) - 20))
                      + bytes(range(0xA0, 0xA6)) + nums + shorts)
    return [
        (scalars, scalar_payload, values),
        ("strings char[12] name; __data_loc char[] dl; __rel_loc char[] rl; u32 after",
         strings_payload, {"name": "name-here", "dl": "data-loc text", "rl": "rel-loc ü",
                           "after": 99}),
        ("arrays unsigned char[4] raw; __data_loc u32[] nums; __rel_loc u16[] shorts; "
         "struct blob b 6", arrays_payload,
         {"raw": [0, 1, 254, 255], "nums": [1, 2, 4000000000], "shorts": [7, 65535],
          "b": "a0a1a2a3a4a5"}),
    ]


def eventheader_events() -> list[tuple[str, bytes, dict[str, Any], dict[str, Any]]]:
    """(tracepoint, payload, fields, eventheader attributes), built from the spec."""
    all_scalars = (
        header(level=4)
        + extension(EXT_METADATA, metadata(
            "AllScalars;owner=tests",
            field("u8", 2), field("i8", 2, 2), field("bool", 2, 7), field("ch", 2, 10),
            field("u16", 3, tag=0x55), field("port", 3, 16), field("u32", 4),
            field("errno", 4, 4), field("pid", 4, 5), field("f32", 4, 8), field("ip4", 4, 17),
            field("u64", 5), field("i64", 5, 2), field("f64", 5, 8), field("hex", 5, 3),
            field("uuid", 6, 15), field("ip6", 6, 18), field("raw", 6))))
    all_scalars += (struct.pack("<BbBB", 250, -5, 1, 0xE9) + struct.pack("<HH", 1234, 0x5000)
                    + struct.pack("<Iii", 3000000000, -2, 4242) + struct.pack("<f", 0.5)
                    + bytes([10, 0, 0, 1]) + struct.pack("<Qqd", 2**63, -(2**40), -1.25)
                    + struct.pack("<Q", 0xFEED) + ACTIVITY + bytes(15) + b"\x01" + PARENT)
    scalar_fields = {
        "u8": 250, "i8": -5, "bool": True, "ch": "é", "u16": 1234, "port": 80,
        "u32": 3000000000, "errno": -2, "pid": 4242, "f32": 0.5, "ip4": "10.0.0.1",
        "u64": 2**63, "i64": -(2**40), "f64": -1.25, "hex": 0xFEED,
        "uuid": "01234567-89ab-cdef-0011-223344556677", "ip6": "::1", "raw": PARENT.hex()}
    structured = (
        header(version=2, id=7, tag=0xBEEF, opcode=1, level=2)
        + extension(EXT_ACTIVITY_ID, ACTIVITY + PARENT, chain=True)
        + extension(EXT_METADATA, metadata(
            "Structured",
            field("point", 1, 2), field("x", 4, 2), field("y", 4, 2),
            field("spans", 1 | 0x40, 2), field("name", 7), field("ticks", 3 | 0x20, length=2),
            field("wide16", 8), field("wide32", 9), field("counted", 10),
            field("labels", 7 | 0x40), field("blob", 10, 9))))
    structured += (struct.pack("<ii", -10, 20)
                   + b"\x02\x00" + b"first\0" + struct.pack("<2H", 1, 2)
                   + b"second\0" + struct.pack("<2H", 3, 4)
                   + "añb".encode("utf-16-le") + b"\0\0"
                   + "\U0001F600".encode("utf-32-le") + bytes(4)
                   + b"\x05\x00hello" + b"\x03\x00a\0bb\0\0" + b"\x02\x00\xca\xfe")
    structured_fields = {
        "point": {"x": -10, "y": 20},
        "spans": [{"name": "first", "ticks": [1, 2]}, {"name": "second", "ticks": [3, 4]}],
        "wide16": "añb", "wide32": "\U0001F600", "counted": "hello",
        "labels": ["a", "bb", ""], "blob": "cafe"}
    # No metadata: the payload stays hex. 8 + 8 + 4 bytes: no alignment padding.
    bare = header(flags=0x03, id=42, version=1, level=4) + b"\x01\x02\x03\x04"
    big = (header(flags=0x04, id=0x0102, level=4, big=True)
           + extension(EXT_METADATA, metadata("Big", field("v", 4), field("a", 3 | 0x40)),
                       big=True)
           + b"\x00\x01\x00\x02" + b"\x00\x02\x00\x05\x00\x06")
    return [
        ("Replay_Prov_L4K3", all_scalars, scalar_fields,
         dict(provider="Replay_Prov", event="AllScalars", level=4, keyword=3, opcode=0,
              attributes={"owner": "tests"})),
        ("Replay_Prov_L2K10Gtools", structured, structured_fields,
         dict(provider="Replay_Prov", event="Structured", level=2, keyword=0x10,
              options={"G": "tools"}, opcode=1, id=7, version=2, tag=0xBEEF,
              activity_id="01234567-89ab-cdef-0011-223344556677",
              related_activity_id="fedcba98-7654-3210-0011-223344556677")),
        ("Replay_Prov_L4K3", bare, {},
         dict(provider="Replay_Prov", event=None, id=42, version=1, payload="01020304")),
        ("Replay_Prov_L4K3", big, {"v": 0x00010002, "a": [5, 6]},
         dict(provider="Replay_Prov", event="Big", id=0x0102, flags=0x04)),
    ]


def test_record_gives_back_every_field_of_a_mix_of_events(c_client: Build, tmp_path: Path) -> None:
    commands: list[str] = []
    writes: list[tuple[int, bytes, str, dict[str, Any], dict[str, Any] | None]] = []
    for command, payload, fields in plain_events():
        commands.append(command)
        writes.append((len(commands) - 1, payload, command.split(" ")[0], fields, None))
    for tracepoint, payload, fields, info in eventheader_events():
        if tracepoint not in [c.split(" ")[0] for c in commands]:
            commands.append(f"{tracepoint} {EH}")
        index = [c.split(" ")[0] for c in commands].index(tracepoint)
        writes.append((index, payload, tracepoint, fields, info))
    # Once more, interleaved, so that order and repetition show too.
    writes += writes[::-1]
    script = tmp_path / "script"
    script.write_text("".join(f"reg {c}\n" for c in commands)
                      + "".join(f"write {k} {p.hex()}\n" for k, p, *_ in writes))
    out = tmp_path / "events.jsonl"
    result = subprocess.run([*RUN, "--record", str(out), "--", str(c_client("ue_replay")),
                             str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    pid = int(result.stdout.split()[1])
    assert result.stderr == f"tracefs-fuse: recorded {len(writes)} events to {out}\n"
    records = list(read_lines(out.read_bytes()))
    assert all(isinstance(r, Event) for r in records)
    assert len(records) == len(writes)
    for record, (_, _, name, fields, info) in zip(records, writes):
        assert isinstance(record, Event)
        assert (record.system, record.name, record.pid, record.comm) == (
            "user_events", name, pid, "ue_replay")
        assert record.error is None, record
        assert record.fields == fields
        # Same types too (1 == True in Python): compare the JSON.
        assert json.dumps(record.fields, sort_keys=True) == json.dumps(fields, sort_keys=True)
        if info is None:
            assert record.eventheader is None
        else:
            assert record.eventheader is not None
            for attribute, value in info.items():
                assert getattr(record.eventheader, attribute) == value, attribute
    stamps = [r.timestamp for r in records if isinstance(r, Event)]
    assert stamps == sorted(stamps)


def test_record_events_option_chooses_what_is_enabled(c_client: Build, tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("reg wanted u32 a\nreg unwanted u32 a\nwrite 0 01000000\n")
    out = tmp_path / "events.jsonl"
    result = subprocess.run([*RUN, "--record", str(out), "--events", "user_events:want*",
                             "--", str(c_client("ue_replay")), str(script)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [r.name for r in read_lines(out.read_bytes())] == ["wanted"]  # type: ignore[union-attr]
    # The unwanted one was never enabled: writing it would have failed.
    script.write_text("reg wanted u32 a\nreg unwanted u32 a\nwrite 1 01000000\n")
    result = subprocess.run([*RUN, "--record", str(out), "--events", "user_events:*",
                             "--events", "!unwanted", "--", str(c_client("ue_replay")),
                             str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "event 1 is not enabled" in result.stderr


def test_record_includes_trace_marker_writes(tmp_path: Path) -> None:
    # Everything that reaches the buffer is recorded: markers too (ftrace:print).
    out = tmp_path / "events.jsonl"
    result = subprocess.run(
        [*RUN, "--record", str(out), "--", "sh", "-c",
         "for i in 1 2 3; do echo note$i > /sys/kernel/tracing/trace_marker; done"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    records = list(read_lines(out.read_bytes()))
    assert [(r.full_name, r.fields["buf"]) for r in records if isinstance(r, Event)] == [
        ("ftrace:print", f"note{i}\n") for i in (1, 2, 3)]


def test_record_keeps_what_the_ring_buffer_overwrote_in_the_count(c_client: Build,
                                                                  tmp_path: Path) -> None:
    script = tmp_path / "script"
    payload = bytes(3000).hex()
    script.write_text("reg big char[1000] a; char[1000] b; char[1000] c\n"
                      + f"write 0 {payload}\n" * 400)
    out = tmp_path / "events.jsonl"
    result = subprocess.run(
        [*RUN, "--record", str(out), "--buffer-size-kb", "8", "--cpus", "1", "--",
         str(c_client("ue_replay")), str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    records = list(read_lines(out.read_bytes()))
    events = [r for r in records if isinstance(r, Event)]
    lost = sum(r.count or 0 for r in records if isinstance(r, Lost))
    # 8 KiB (two 4 KiB sub-buffers) hold 2 of these; a batch gathers for 10 ms,
    # long enough for more writes even on a loaded machine (with 1,000-byte
    # events, 8 to a ring, CI once caught every one): what the batches did not
    # catch is counted as lost, and said so.
    assert lost > 0
    assert len(events) + lost == 400
    assert f"{lost} lost: the ring buffer overflowed" in result.stderr


def test_show_prints_a_recording(tmp_path: Path, c_client: Build) -> None:
    script = tmp_path / "script"
    script.write_text("reg shown u32 n; char[8] who\nwrite 0 05000000" + b"you".hex() + "0" * 10
                      + "\n")
    out = tmp_path / "events.jsonl"
    subprocess.run([*RUN, "--record", str(out), "--", str(c_client("ue_replay")), str(script)],
                   check=True, capture_output=True, timeout=60)
    shown = subprocess.run([sys.executable, "-m", "tracefs_fuse", "show", str(out)],
                           capture_output=True, text=True, check=True).stdout
    assert shown.endswith(': user_events:shown n=5 who="you"\n')
    assert " ue_replay-" in shown
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"event"}\n')
    result = subprocess.run([sys.executable, "-m", "tracefs_fuse", "show", str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "line 1" in result.stderr and "Traceback" not in result.stderr


def test_mount_events_option_enables_on_registration(tmp_path: Path, c_client: Build) -> None:
    mount = start_mount(tmp_path / "tracing", tmp_path / "daemon.log", "--events",
                        "user_events:auto*")
    try:
        script = tmp_path / "script"
        script.write_text("reg auto_on u32 a\nwrite 0 2a000000\n")
        # A namespace of our own (not run's: it detaches every other tracefs-fuse
        # mount, issue 19 item 9) in which the mount is /sys/kernel/tracing.
        result = subprocess.run(
            ["unshare", "--mount", "sh", "-c", f"mount --bind {mount} /sys/kernel/tracing && "
             f"{c_client('ue_replay')} {script}"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert mount.read("set_event") == "user_events:auto_on\n"
        assert "auto_on: a=0x2a (42)" in mount.read("trace")
    finally:
        stop_mount(mount)


def test_background_mount_keeps_its_events_option(tmp_path: Path) -> None:
    mountpoint = tmp_path / "tracing"
    mountpoint.mkdir()
    subprocess.run([sys.executable, "-m", "tracefs_fuse", "mount", str(mountpoint),
                    "--events", "user_events:x"], check=True, timeout=60)
    try:
        (mountpoint / "dynamic_events").write_text("u:x u32 a\n")
        assert (mountpoint / "set_event").read_text() == "user_events:x\n"
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)


@pytest.mark.parametrize("bad", ["a b", ""])
def test_events_option_refuses_what_is_no_pattern(bad: str, tmp_path: Path) -> None:
    result = subprocess.run([*RUN, "--events", bad, "--", "true"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert "not an event pattern" in result.stderr and "Traceback" not in result.stderr


def test_record_file_that_cannot_be_written(tmp_path: Path) -> None:
    result = subprocess.run([*RUN, "--record", str(tmp_path / "no" / "such.jsonl"), "--",
                             "true"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "No such file or directory" in result.stderr
    assert os.listdir(tmp_path) == []
