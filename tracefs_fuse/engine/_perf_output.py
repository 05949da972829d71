"""What a perf event writes and reads: ``PERF_RECORD_SAMPLE``, ``PERF_RECORD_LOST``,
``PERF_RECORD_COMM``, ``read()``.

Rules:
  * A sample's fields come in ``perf_output_sample``'s order, each present
    when its ``sample_type`` bit is: IDENTIFIER, IP, TID, TIME, ADDR, ID,
    STREAM_ID, CPU, PERIOD, READ, RAW.
  * A tracepoint's raw data is its ``trace_entry`` plus the payload, padded
    to 8 (``user_event_perf``: ``ALIGN(size, 8)``), then padded again so that
    the u32 size plus the data end on 8 (``perf_sample_save_raw_data``).
  * A tracepoint sample is taken in the kernel (``perf_fetch_caller_regs``):
    misc says ``PERF_RECORD_MISC_KERNEL``; its IP is the kernel's, which we do
    not have: 0.
  * ``PERF_RECORD_COMM``: pid, tid, then the comm NUL-terminated and padded
    to 8; misc says ``PERF_RECORD_MISC_COMM_EXEC`` when an exec set it
    (``perf_event_comm``, ``perf_event_comm_output``).
  * A record other than a sample carries ``sample_id`` when
    ``sample_id_all`` is set: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER.

Kernel: kernel/events/core.c (``perf_prepare_sample``, ``perf_output_sample``,
``__perf_event_header__init_id``, ``perf_read_one``, ``perf_read_group``,
``perf_event_read_size``), kernel/events/ring_buffer.c (``perf_output_begin``:
the LOST record), kernel/trace/trace_events_user.c (``user_event_perf``).
"""

from __future__ import annotations

import errno
import functools
import struct

import msgspec

from ._errors import TracefsError
from ._perf_event_attr import Flag, PerfEventAttr, ReadFormat, Sample

PERF_RECORD_LOST = 2
PERF_RECORD_COMM = 3
PERF_RECORD_SAMPLE = 9
PERF_RECORD_MISC_KERNEL = 1
PERF_RECORD_MISC_COMM_EXEC = 1 << 13
#: TASK_COMM_LEN, the NUL included.
TASK_COMM_LEN = 16

#: struct perf_event_header { __u32 type; __u16 misc; __u16 size; };
HEADER = struct.Struct("=IHH")
_U64 = struct.Struct("=Q")
_U32_PAIR = struct.Struct("=II")


class SampleFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What one write tells each event that records it."""

    pid: int
    tid: int
    time: int
    cpu: int
    #: The tracepoint entry (``struct trace_entry`` then the payload).
    entry: bytes


class EventIds(msgspec.Struct, frozen=True, kw_only=True):
    #: ``primary_event_id``: the parent's id for an inherited child.
    id: int
    #: ``event->id``
    stream_id: int


def raw_data(entry: bytes) -> bytes:
    """``u32 size; char data[size]`` of a tracepoint sample."""
    data = entry + bytes(-len(entry) % 8)  # user_event_perf: ALIGN(size, 8)
    data += bytes(-(len(data) + 4) % 8)  # perf_sample_save_raw_data
    return struct.pack("=I", len(data)) + data


#: A sample's fixed fields before READ, in ``perf_output_sample``'s order:
#: (bit, struct codes, what each holds). "id": ``ids.id``; "zero": IP and
#: ADDR, which we do not have; "one": PERIOD.
_FIXED_FIELDS = (
    (Sample.IDENTIFIER, "Q", ("id",)),
    (Sample.IP, "Q", ("zero",)),
    (Sample.TID, "II", ("pid", "tid")),
    (Sample.TIME, "Q", ("time",)),
    (Sample.ADDR, "Q", ("zero",)),
    (Sample.ID, "Q", ("id",)),
    (Sample.STREAM_ID, "Q", ("stream_id",)),
    (Sample.CPU, "II", ("cpu", "zero")),
    (Sample.PERIOD, "Q", ("one",)),
)
_READ = int(Sample.READ)
_RAW = int(Sample.RAW)


@functools.cache
def _fixed_layout(sample_type: int) -> tuple[struct.Struct, tuple[str, ...]]:
    """The header and fixed fields of a sample of ``sample_type`` (one
    ``struct.Struct``: a write packs it once), and what each field holds."""
    codes = HEADER.format
    names: tuple[str, ...] = ()
    for bit, code, held in _FIXED_FIELDS:
        if sample_type & bit:
            codes += code
            names += held
    return struct.Struct(codes), names


def sample_record(attr: PerfEventAttr, ids: EventIds, facts: SampleFacts,
                  read_value: bytes = b"") -> bytes:
    """One ``PERF_RECORD_SAMPLE`` of period 1; ``read_value``: the
    ``read_format`` block when ``PERF_SAMPLE_READ`` is asked for."""
    st = attr.sample_type
    fixed, names = _fixed_layout(st)
    tail = read_value if st & _READ else b""
    if st & _RAW:
        tail += raw_data(facts.entry)
    held = {"id": ids.id, "zero": 0, "pid": facts.pid, "tid": facts.tid, "time": facts.time,
            "stream_id": ids.stream_id, "cpu": facts.cpu, "one": 1}
    return fixed.pack(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL, fixed.size + len(tail),
                      *[held[name] for name in names]) + tail


def sample_id(attr: PerfEventAttr, ids: EventIds, facts: SampleFacts) -> bytes:
    """``struct sample_id`` appended to non-sample records under ``sample_id_all``."""
    if not attr.has(Flag.SAMPLE_ID_ALL):
        return b""
    st = attr.sample_type
    out = bytearray()
    if st & Sample.TID:
        out += _U32_PAIR.pack(facts.pid, facts.tid)
    if st & Sample.TIME:
        out += _U64.pack(facts.time)
    if st & Sample.ID:
        out += _U64.pack(ids.id)
    if st & Sample.STREAM_ID:
        out += _U64.pack(ids.stream_id)
    if st & Sample.CPU:
        out += _U32_PAIR.pack(facts.cpu, 0)
    if st & Sample.IDENTIFIER:
        out += _U64.pack(ids.id)
    return bytes(out)


def lost_record(attr: PerfEventAttr, ids: EventIds, lost: int, facts: SampleFacts) -> bytes:
    """``PERF_RECORD_LOST``: ``u64 id; u64 lost;`` then ``sample_id``."""
    body = struct.pack("=QQ", ids.id, lost) + sample_id(attr, ids, facts)
    return HEADER.pack(PERF_RECORD_LOST, 0, HEADER.size + len(body)) + body


def comm_record(attr: PerfEventAttr, ids: EventIds, comm: bytes, facts: SampleFacts, *,
                exec_: bool) -> bytes:
    """``PERF_RECORD_COMM``: ``u32 pid, tid; char comm[];`` then ``sample_id``."""
    name = comm[:TASK_COMM_LEN - 1] + b"\0"
    body = _U32_PAIR.pack(facts.pid, facts.tid) + name + bytes(-len(name) % 8) \
        + sample_id(attr, ids, facts)
    misc = PERF_RECORD_MISC_COMM_EXEC if exec_ else 0
    return HEADER.pack(PERF_RECORD_COMM, misc, HEADER.size + len(body)) + body


class Counts(msgspec.Struct, frozen=True, kw_only=True):
    """One event's counter as ``read()`` shows it."""

    value: int
    enabled_ns: int
    running_ns: int
    id: int
    lost: int


def read_size(read_format: int, nr_members: int = 1) -> int:
    """``perf_event_read_size``."""
    entry = 8 + 8 * bool(read_format & ReadFormat.ID) + 8 * bool(read_format & ReadFormat.LOST)
    times = 8 * bool(read_format & ReadFormat.TOTAL_TIME_ENABLED) \
        + 8 * bool(read_format & ReadFormat.TOTAL_TIME_RUNNING)
    if read_format & ReadFormat.GROUP:
        return 8 + times + entry * nr_members
    return times + entry


def read_values(read_format: int, group: list[Counts]) -> bytes:
    """``perf_read_one`` (one member) or ``perf_read_group`` (leader first);
    times are the leader's."""
    leader = group[0]
    times = b""
    if read_format & ReadFormat.TOTAL_TIME_ENABLED:
        times += _U64.pack(leader.enabled_ns)
    if read_format & ReadFormat.TOTAL_TIME_RUNNING:
        times += _U64.pack(leader.running_ns)

    def entry(counts: Counts) -> bytes:
        out = _U64.pack(counts.value)
        if read_format & ReadFormat.ID:
            out += _U64.pack(counts.id)
        if read_format & ReadFormat.LOST:
            out += _U64.pack(counts.lost)
        return out

    if read_format & ReadFormat.GROUP:
        return _U64.pack(len(group)) + times + b"".join(entry(c) for c in group)
    return entry(leader)[:8] + times + entry(leader)[8:]


def read(read_format: int, group: list[Counts], size: int) -> bytes:
    """``perf_read``: a buffer smaller than the whole answer gets ENOSPC."""
    if size < read_size(read_format, len(group)):
        raise TracefsError(errno.ENOSPC, "read buffer too small for read_format")
    return read_values(read_format, group)
