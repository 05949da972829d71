"""perf_event_open's rules for our events: attr checks, records, read(), the ring."""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable

import pytest

from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._perf_buffer import DATA_HEAD, PAGE_SIZE, PerfBuffer, check_mapping
from tracefs_fuse.engine._perf_event_attr import (
    ATTR_STRUCT,
    PERF_ATTR_SIZE,
    AttrTooBig,
    Flag,
    Kind,
    Limits,
    ReadFormat,
    Sample,
    check_open,
    copy_attr,
    emulated,
)
from tracefs_fuse.engine._perf_events import PerfEvents
from tracefs_fuse.engine._perf_output import (
    Counts,
    EventIds,
    SampleFacts,
    comm_record,
    lost_record,
    raw_data,
    read,
    sample_record,
)
from tracefs_fuse.engine._task import Task

OUR_ID = 1234
ROOT = Limits(paranoid=2, perfmon=True, nr_cpus=2)
USER = Limits(paranoid=2, perfmon=False, nr_cpus=2)


def attr_bytes(type_: int = 2, config: int = OUR_ID, *, size: int = PERF_ATTR_SIZE,
               period: int = 1, sample_type: int = Sample.RAW, read_format: int = 0,
               flags: int = 0, wakeup: int = 0, reserved_2: int = 0) -> bytes:
    whole = ATTR_STRUCT.pack(type_, size, config, period, sample_type, read_format, flags, wakeup,
                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, reserved_2, 0, 0, 0, 0)
    return whole[:size] if size <= PERF_ATTR_SIZE else whole + bytes(size - PERF_ATTR_SIZE)


@pytest.mark.parametrize("user, expected", [
    (attr_bytes(size=63), errno.E2BIG),
    (attr_bytes(size=PAGE_SIZE + 8), errno.E2BIG),
    (attr_bytes(size=PERF_ATTR_SIZE + 8) [:-1] + b"\1", errno.E2BIG),
    (attr_bytes(flags=1 << 40), errno.EINVAL),
    (attr_bytes(reserved_2=1), errno.EINVAL),
    (attr_bytes(sample_type=1 << 25), errno.EINVAL),
    (attr_bytes(read_format=1 << 5), errno.EINVAL),
    (attr_bytes(sample_type=Sample.WEIGHT | Sample.WEIGHT_STRUCT), errno.EINVAL),
    (attr_bytes(flags=Flag.SIGTRAP), errno.EINVAL),
    (attr_bytes()[:100], errno.EFAULT),
])
def test_copy_attr_refusals(user: bytes, expected: int) -> None:
    with pytest.raises(TracefsError) as exc:
        copy_attr(user)
    assert exc.value.errno == expected
    if expected == errno.E2BIG:
        assert isinstance(exc.value, AttrTooBig) and exc.value.kernel_size == 136


@pytest.mark.parametrize("size", [0, 64, 72, 96, 112, 120, 136, 200])
def test_copy_attr_sizes(size: int) -> None:
    user = attr_bytes(size=size if size else 64)
    if size == 0:
        user = user[:4] + b"\0\0\0\0" + user[8:]
    attr = copy_attr(user)
    assert (attr.type, attr.config, attr.size) == (2, OUR_ID, size or 64)


@pytest.mark.parametrize("type_, config, flags, kind", [
    (2, OUR_ID, 0, Kind.TRACEPOINT),
    (2, 7, 0, None),  # the host's tracepoint: the kernel's
    (1, 9, Flag.SAMPLE_ID_ALL | Flag.DISABLED, Kind.DUMMY),  # one_collect's leader
    (1, 9, Flag.MMAP | Flag.COMM, None),  # perf record's tracking dummy
    (1, 9, Flag.BPF_EVENT, None),
    (1, 0, 0, None),  # cpu-clock
    (0, 0, 0, None),  # hardware
])
def test_emulated(type_: int, config: int, flags: int, kind: Kind | None) -> None:
    attr = copy_attr(attr_bytes(type_, config, flags=flags))
    assert emulated(attr, lambda i: i == OUR_ID) == kind


@pytest.mark.parametrize("fields, pid, cpu, flags, limits, expected", [
    ({}, 0, -1, 0, ROOT, None),  # perf_test
    ({}, 0, -1, 0x10, ROOT, errno.EINVAL),  # unknown flag
    ({}, 0, -1, 0, USER, errno.EACCES),  # kernel samples at paranoid 2
    ({"flags": Flag.EXCLUDE_KERNEL}, 0, -1, 0, USER, errno.EPERM),  # raw samples
    ({"flags": Flag.EXCLUDE_KERNEL, "sample_type": Sample.TID}, 0, -1, 0, USER, None),
    ({"flags": Flag.EXCLUDE_KERNEL, "period": 0}, 0, -1, 0, USER, None),  # counting
    ({}, 0, -1, 0, Limits(paranoid=3, perfmon=False, nr_cpus=2), errno.EACCES),
    ({"period": 1 << 63}, 0, -1, 0, ROOT, errno.EINVAL),
    ({"flags": Flag.FREQ, "period": 10**6}, 0, -1, 0, ROOT, errno.EINVAL),
    ({}, -1, -1, 0, ROOT, errno.EINVAL),  # no task, no cpu
    ({}, 0, 2, 0, ROOT, errno.EINVAL),  # no such cpu
    ({}, -1, 1, 0, ROOT, None),  # CPU-wide, root
    ({"flags": Flag.EXCLUDE_KERNEL, "sample_type": Sample.TID}, -1, 1, 0,
     Limits(paranoid=1, perfmon=False, nr_cpus=2), errno.EACCES),  # perf_allow_cpu
    ({}, 0, -1, 4, ROOT, errno.EINVAL),  # cgroup without cpu
    ({"sample_type": Sample.BRANCH_STACK}, 0, -1, 0, ROOT, errno.EOPNOTSUPP),
    ({"sample_type": Sample.CALLCHAIN}, 0, -1, 0, ROOT, errno.EINVAL),  # not emulated
    ({"flags": Flag.WRITE_BACKWARD}, 0, -1, 0, ROOT, None),  # circular mode
    ({"flags": Flag.NAMESPACES | Flag.EXCLUDE_KERNEL}, 0, -1, 0, USER, errno.EACCES),
])
def test_check_open(fields: dict[str, int], pid: int, cpu: int, flags: int, limits: Limits,
                    expected: int | None) -> None:
    attr = copy_attr(attr_bytes(**fields))
    if expected is None:
        check_open(attr, pid, cpu, flags, limits)
        return
    with pytest.raises(TracefsError) as exc:
        check_open(attr, pid, cpu, flags, limits)
    assert exc.value.errno == expected


FACTS = SampleFacts(pid=10, tid=11, time=12345, cpu=1, entry=b"E" * 12)
IDS = EventIds(id=77, stream_id=78)


def u64(n: int) -> bytes:
    return struct.pack("=Q", n)


@pytest.mark.parametrize("sample_type, body", [
    (Sample.RAW, raw_data(b"E" * 12)),
    (Sample.IDENTIFIER | Sample.TID | Sample.TIME,
     u64(77) + struct.pack("=II", 10, 11) + u64(12345)),
    (Sample.IP | Sample.ADDR | Sample.ID | Sample.STREAM_ID | Sample.CPU | Sample.PERIOD,
     u64(0) + u64(0) + u64(77) + u64(78) + struct.pack("=II", 1, 0) + u64(1)),
    # perf-collect's default: IDENTIFIER|TID|TIME|CPU|RAW
    (0x10486, u64(77) + struct.pack("=II", 10, 11) + u64(12345) + struct.pack("=II", 1, 0)
     + raw_data(b"E" * 12)),
])
def test_sample_layout(sample_type: int, body: bytes) -> None:
    attr = copy_attr(attr_bytes(sample_type=sample_type))
    record = sample_record(attr, IDS, FACTS)
    assert record == struct.pack("=IHH", 9, 1, 8 + len(body)) + body
    assert len(record) % 8 == 0


@pytest.mark.parametrize("entry_size, raw_size", [(8, 12), (12, 20), (16, 20), (20, 28)])
def test_raw_padding(entry_size: int, raw_size: int) -> None:
    raw = raw_data(b"x" * entry_size)
    assert struct.unpack_from("=I", raw)[0] == raw_size and len(raw) == 4 + raw_size
    assert raw[4 + entry_size:] == bytes(raw_size - entry_size)


def test_lost_record_with_sample_id() -> None:
    attr = copy_attr(attr_bytes(sample_type=Sample.IDENTIFIER | Sample.TID,
                                flags=Flag.SAMPLE_ID_ALL))
    assert lost_record(attr, IDS, 3, FACTS) == (
        struct.pack("=IHH", 2, 0, 40) + u64(77) + u64(3) + struct.pack("=II", 10, 11) + u64(77))


C = Counts(value=5, enabled_ns=100, running_ns=90, id=77, lost=2)


@pytest.mark.parametrize("read_format, size, expected", [
    (0, 8, u64(5)),
    (ReadFormat.ID, 16, u64(5) + u64(77)),  # one_collect
    (ReadFormat.ID | ReadFormat.LOST, 24, u64(5) + u64(77) + u64(2)),  # perf record
    (ReadFormat.TOTAL_TIME_ENABLED | ReadFormat.TOTAL_TIME_RUNNING | ReadFormat.ID, 32,
     u64(5) + u64(100) + u64(90) + u64(77)),
    (ReadFormat.GROUP | ReadFormat.ID, 24, u64(1) + u64(5) + u64(77)),
    (ReadFormat.ID, 15, errno.ENOSPC),
    (ReadFormat.GROUP, 8, errno.ENOSPC),
])
def test_read(read_format: int, size: int, expected: bytes | int) -> None:
    if isinstance(expected, int):
        with pytest.raises(TracefsError) as exc:
            read(read_format, [C], size)
        assert exc.value.errno == expected
    else:
        assert read(read_format, [C], size) == expected


@pytest.mark.parametrize("nr_pages, shared, pgoff, expected", [
    (2, True, 0, 1), (33, True, 0, 32), (1, True, 0, 0), (129, True, 0, 128),
    (4, True, 0, errno.EINVAL), (2, False, 0, errno.EINVAL), (2, True, 1, errno.EINVAL),
])
def test_check_mapping(nr_pages: int, shared: bool, pgoff: int, expected: int) -> None:
    if expected == errno.EINVAL:
        with pytest.raises(TracefsError):
            check_mapping(nr_pages, shared, pgoff)
    else:
        assert check_mapping(nr_pages, shared, pgoff) == expected


def test_user_page() -> None:
    page = PerfBuffer(8, writable=True, wakeup_events=1, watermark=None).user_page()
    assert len(page) == PAGE_SIZE
    assert struct.unpack_from("=QQQQ", page, DATA_HEAD) == (0, 0, PAGE_SIZE, 8 * PAGE_SIZE)
    assert struct.unpack_from("=Q", page, 40)[0] == 2  # cap_bit0_is_deprecated
    assert struct.unpack_from("=I", page, 72)[0] == 96  # size


def no_lost(n: int) -> bytes:
    return b"L" * 16


def tail(value: int | None) -> Callable[[], int | None]:
    return lambda: value


def test_ring_wraps_and_reports_changes() -> None:
    ring = PerfBuffer(1, writable=False, wakeup_events=1, watermark=None)
    record = b"r" * 1000
    for _ in range(4):
        ring.output(record, tail(0), no_lost)
    changes, wakeup = ring.output(record, tail(0), no_lost)  # overwrite: no tail
    assert wakeup
    assert changes == [(PAGE_SIZE + 4000, b"r" * 96), (PAGE_SIZE, b"r" * 904),
                       (DATA_HEAD, u64(5000))]
    assert ring.file_bytes(PAGE_SIZE, 904) == b"r" * 904


def test_ring_respects_tail_and_owes_lost() -> None:
    ring = PerfBuffer(1, writable=True, wakeup_events=0, watermark=None)
    record = b"r" * 2048
    assert ring.output(record, tail(0), no_lost)[0]
    # CIRC_SPACE: one byte short of the ring, so a second half does not fit.
    assert ring.output(record, tail(0), no_lost) == ([], False)
    assert ring.lost == 1
    changes, _ = ring.output(record, tail(8), no_lost)  # tail moved: a record and a lost one?
    assert changes == [] and ring.lost == 2  # 16 + 2048 do not fit in 2055
    changes, _ = ring.output(b"s" * 8, tail(8), no_lost)
    assert changes[0] == (PAGE_SIZE + 2048, b"L" * 16 + b"s" * 8) and ring.lost == 0
    assert ring.head == 2048 + 24


@pytest.mark.parametrize(("reader_tail", "head", "fits"), [
    (0, 4096 - 16, False),          # CIRC_SPACE 15 < 16
    (8, 4096 - 16, True),           # 23
    (4096 + 8, 4096 - 16, True),    # a tail past the head: modulo the ring, as the kernel's mask
    (None, 4096 - 8, True),         # unreadable tail: overwrite
])
def test_ring_space_is_circ_space(reader_tail: int | None, head: int, fits: bool) -> None:
    ring = PerfBuffer(1, writable=True, wakeup_events=0, watermark=None)
    ring.head = head
    changes, _ = ring.output(b"r" * 16, tail(reader_tail), no_lost)
    assert bool(changes) is fits
    assert ring.lost == (0 if fits else 1)


def test_ring_reads_the_tail_only_when_full() -> None:
    ring = PerfBuffer(1, writable=True, wakeup_events=0, watermark=None)
    reads = []

    def reader_tail() -> int:
        reads.append(ring.head)
        return ring.head

    for _ in range(3):
        ring.output(b"r" * 1024, reader_tail, no_lost)
    assert reads == []
    ring.output(b"r" * 1024, reader_tail, no_lost)  # 1023 bytes of space left
    assert reads == [3072] and ring.head == 4096


def test_ring_without_data_pages_loses_uncounted() -> None:
    # ring_buffer_init pauses it; a paused ring counts only when it has pages.
    ring = PerfBuffer(0, writable=True, wakeup_events=1, watermark=None)
    assert ring.output(b"r" * 8, tail(0), no_lost) == ([], False)
    assert (ring.lost, ring.dropped) == (0, 0)


def test_wakeup_events_and_watermark() -> None:
    ring = PerfBuffer(1, writable=False, wakeup_events=2, watermark=None)
    assert [ring.output(b"r" * 8, tail(0), no_lost)[1] for _ in range(4)] == [False, True, False, True]
    ring = PerfBuffer(1, writable=False, wakeup_events=0, watermark=100)
    assert [ring.output(b"r" * 64, tail(0), no_lost)[1] for _ in range(4)] == [False, True, False, True]


@pytest.mark.parametrize(("flags", "images", "counted"), [
    (Flag.DISABLED | Flag.ENABLE_ON_EXEC, [b"a", b"a", b"b"], [0, 1, 2]),  # exec'd before write 2
    (Flag.DISABLED | Flag.ENABLE_ON_EXEC, [b"a", None, None], [0, 0]),  # image unknown: never
    (Flag.DISABLED | Flag.ENABLE_ON_EXEC, [None], [0, 0]),  # unknown at open: never asked again
    (Flag.DISABLED, [], [0, 0]),  # no enable_on_exec: images are never asked for
])
def test_enable_on_exec(flags: int, images: list[bytes | None], counted: list[int]) -> None:
    # images: the task's image at open, then at each of its writes until enabled.
    perfs = PerfEvents(TraceClocks.from_source(ManualClock(1)), lambda *change: None, [])
    seen = iter(images)
    perfs.image_of = lambda tgid: next(seen)
    task = Task(pid=7, tgid=Tgid(7), cpu=0, comm="t")
    perf = perfs.open(copy_attr(attr_bytes(flags=flags)), Kind.TRACEPOINT, None, task, -1,
                      Tgid(1))
    for count in counted:
        if perf.can_record(8, 0):
            perf.record(b"e" * 8, task)
        assert perf.count == count


@pytest.mark.parametrize(("comm", "name"), [
    (b"ue_emit", b"ue_emit\0"),
    (b"a" * 20, b"a" * 15 + b"\0"),     # TASK_COMM_LEN
    (b"", b"\0" + bytes(7)),
])
def test_comm_record(comm: bytes, name: bytes) -> None:
    attr = copy_attr(attr_bytes(sample_type=Sample.TID, flags=Flag.SAMPLE_ID_ALL))
    facts = SampleFacts(pid=5, tid=6, time=7, cpu=0, entry=b"")
    record = comm_record(attr, EventIds(id=1, stream_id=1), comm, facts, exec_=True)
    body = struct.pack("=II", 5, 6) + name + struct.pack("=II", 5, 6)
    assert record == struct.pack("=IHH", 3, 1 << 13, 8 + len(body)) + body
