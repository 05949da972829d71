"""A recording of an engine, without FUSE: what it drains, in what order, what it counts."""

from __future__ import annotations

import io
import os
import struct

import pytest

from tracefs_fuse import engine
from tracefs_fuse.decode import Event, Lost, read_lines
from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.record import Recording, RecordSummary

from .engine.fakes import Client, FakeMemory


class Emitter:
    """A fake process registering user events in a tracefs and writing them."""

    def __init__(self, fs: engine.Tracefs, memory: FakeMemory, tgid: int, cpu: int = 0) -> None:
        self.client = Client(memory, tgid)
        self.client.task = engine.Task(pid=tgid, tgid=engine.Tgid(tgid), cpu=cpu,
                                       comm=f"emitter{tgid}")
        self.data = fs.file("user_events_data").open(os.O_RDWR, self.client.task)
        self.indices: dict[str, int] = {}

    def register(self, command: str) -> None:
        word = len(self.indices)
        self.data.ioctl(uapi.DIAG_IOCSREG, self.client.user_reg(command, word=word, bit=0),
                        self.client.task)
        assert self.client.word(word) & 1, f"{command} was not auto-enabled"
        self.indices[command.split(" ")[0]] = self.client.write_index()

    def write(self, name: str, payload: bytes) -> None:
        index = struct.pack("<i", self.indices[name])
        assert self.data.write(index + payload, 0, self.client.task) == 4 + len(payload)


World = tuple[engine.Tracefs, FakeMemory, engine.ManualClock]


@pytest.fixture
def world() -> World:
    clock = engine.ManualClock(1)
    memory = FakeMemory()
    fs = engine.Tracefs(nr_cpus=2, memory=memory, auto_enable=("user_events:*",),
                        clocks=engine.TraceClocks.from_source(clock), buffer_size_kb=8)
    return fs, memory, clock


def test_recording_drains_every_cpu_in_time_order(world: World) -> None:
    fs, memory, clock = world
    a, b = Emitter(fs, memory, 100, cpu=0), Emitter(fs, memory, 200, cpu=1)
    for emitter in (a, b):
        emitter.register("tick u32 n")
    for n in range(6):
        clock.advance(10)
        (a if n % 2 else b).write("tick", struct.pack("<I", n))
    recording = Recording(fs, io.BytesIO(), "out.jsonl")
    records = recording.drain()
    assert [(r.cpu, r.pid, r.comm, r.fields["n"]) for r in records] == [  # type: ignore[union-attr]
        (1, 200, "emitter200", 0), (0, 100, "emitter100", 1), (1, 200, "emitter200", 2),
        (0, 100, "emitter100", 3), (1, 200, "emitter200", 4), (0, 100, "emitter100", 5)]
    assert recording.drain() == []


def test_recording_counts_what_the_buffer_lost(world: World) -> None:
    fs, memory, clock = world
    emitter = Emitter(fs, memory, 100)
    emitter.register("big u32 n; char[500] pad")
    for n in range(100):
        clock.advance(1)
        emitter.write("big", struct.pack("<I", n) + bytes(500))
    out = io.BytesIO()
    recording = Recording(fs, out, "out.jsonl")
    records = recording.drain()
    lost = [r for r in records if isinstance(r, Lost)]
    events = [r for r in records if isinstance(r, Event)]
    assert len(lost) == 1 and lost[0].count == 100 - len(events)
    assert [e.fields["n"] for e in events] == list(range(100 - len(events), 100))


def test_recording_decodes_an_event_deleted_before_the_drain(world: World) -> None:
    """A test program registers, writes, unregisters and exits within one
    batch; its event's id is then handed to the next event. The records are
    drained at the deletion, with the deleted event's own format."""
    fs, memory, clock = world
    recording = Recording(fs, io.BytesIO(), "out.jsonl")
    emitter = Emitter(fs, memory, 100)
    emitter.register("gone u32 a")
    emitter.write("gone", struct.pack("<I", 7))
    gone = fs.events.find("user_events", "gone")
    assert gone is not None
    enable = fs.file("events/user_events/gone/enable").open(os.O_WRONLY, emitter.client.task)
    enable.write(b"0", 0, emitter.client.task)
    enable.release()
    emitter.data.release()
    emitter.data.ioctl(uapi.DIAG_IOCSUNREG, emitter.client.user_unreg(bit=0),
                       emitter.client.task)
    assert fs.events.find("user_events", "gone") is None
    successor = Emitter(fs, memory, 200)
    successor.register("next u64 b")
    nxt = fs.events.find("user_events", "next")
    assert nxt is not None and nxt.id == gone.id
    successor.write("next", struct.pack("<Q", 9))
    records = recording._take()
    assert [(r.name, r.fields) for r in records] == [  # type: ignore[union-attr]
        ("gone", {"a": 7}), ("next", {"b": 9})]


def test_recording_keeps_events_whose_format_does_not_parse(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    fs, memory, clock = world
    emitter = Emitter(fs, memory, 100)
    # A newline in a field name: the kernel takes it, and its format file breaks.
    emitter.register("weird u32 a\nb")
    emitter.register("fine u32 a")
    emitter.write("weird", b"\x01\0\0\0")
    emitter.write("fine", b"\x02\0\0\0")
    records = Recording(fs, io.BytesIO(), "out.jsonl").drain()
    weird, fine = records
    assert isinstance(weird, Event) and isinstance(fine, Event)
    assert weird.error is not None and weird.error.startswith("no usable format for event id")
    assert fine.fields == {"a": 2} and fine.error is None
    assert "user_events:weird: its format does not parse" in caplog.text


@pytest.mark.parametrize(("summary", "line"), [
    (RecordSummary(events=1, lost=0, lost_uncounted=0), "tracefs-fuse: recorded 1 event to f"),
    (RecordSummary(events=0, lost=0, lost_uncounted=0), "tracefs-fuse: recorded 0 events to f"),
    (RecordSummary(events=5, lost=7, lost_uncounted=0),
     "tracefs-fuse: recorded 5 events to f; 7 lost: the ring buffer overflowed "
     "(a larger --buffer-size-kb keeps them)"),
    (RecordSummary(events=5, lost=0, lost_uncounted=1),
     "tracefs-fuse: recorded 5 events to f; some lost: the ring buffer overflowed "
     "(a larger --buffer-size-kb keeps them)"),
    (RecordSummary(events=5, lost=3, lost_uncounted=2),
     "tracefs-fuse: recorded 5 events to f; 3 or more lost: the ring buffer overflowed "
     "(a larger --buffer-size-kb keeps them)"),
])
def test_recording_summary_line(summary: RecordSummary, line: str) -> None:
    assert summary.render("f") == line


class Sink(io.BytesIO):
    """A file whose flushes (from the recording's worker thread) wake the test."""

    def __init__(self, token: object) -> None:
        import trio

        super().__init__()
        self.token = token
        self.flushed = trio.Event()

    def flush(self) -> None:
        super().flush()
        self.token.run_sync_soon(self.flushed.set)  # type: ignore[attr-defined]


async def test_recording_writes_batches_then_the_rest(world: World) -> None:
    import trio

    fs, memory, clock = world
    emitter = Emitter(fs, memory, 100)
    emitter.register("tick u32 n")
    out = Sink(trio.lowlevel.current_trio_token())
    async with trio.open_nursery() as nursery:
        recording: Recording = await nursery.start(Recording(fs, out, "o").run)
        emitter.write("tick", b"\x01\0\0\0")
        recording.data_arrived()
        await out.flushed.wait()  # one batch, BATCH_S after the data arrived
        assert [getattr(r, "fields", {}).get("n") for r in read_lines(out.getvalue())] == [1]
        emitter.write("tick", b"\x02\0\0\0")
        summary = await recording.finish()
    assert [r.fields["n"] for r in read_lines(out.getvalue())] == [1, 2]  # type: ignore[union-attr]
    assert summary == RecordSummary(events=2, lost=0, lost_uncounted=0)
