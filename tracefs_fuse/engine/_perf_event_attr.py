"""``struct perf_event_attr`` and the checks ``perf_event_open`` applies before an event exists.

Rules:
  * The layout is the kernel's (VER8, 136 bytes, Linux 6.12); a shorter
    ``size`` reads as zeros beyond it, as ``copy_struct_from_user`` does, and
    bytes beyond 136 must be zero.
  * The checks run in the kernel's order, so the first refusal is the
    kernel's: ``perf_copy_attr``, then the syscall's own, then
    ``perf_event_alloc`` (cpu), then the PMU's init (``perf_tp_event_init``,
    ``perf_swevent_init``), then ``perf_trace_event_perm``, then the context's
    (``perf_allow_cpu`` for a CPU-wide event).
  * Which events are ours (:func:`emulated`): a tracepoint whose id is one of
    our events, and an *inert* ``PERF_COUNT_SW_DUMMY``: one asking for no
    side-band record, so the kernel would never write into its ring by itself.
    Such a dummy exists only to be a ring other events are redirected into
    (one_collect's per-CPU leaders), so we serve it and our tracepoints can be
    redirected into it. Everything else goes to the kernel untouched.

Kernel: include/uapi/linux/perf_event.h, kernel/events/core.c (``perf_copy_attr``,
``SYSCALL_DEFINE5(perf_event_open)``, ``perf_event_alloc``, ``perf_swevent_init``,
``find_get_context``), kernel/trace/trace_event_perf.c (``perf_trace_init``,
``perf_trace_event_perm``), include/linux/perf_event.h (``perf_allow_*``).
"""

from __future__ import annotations

import enum
import errno
import struct
from collections.abc import Callable

import msgspec

from ._errors import TracefsError

PAGE_SIZE = 4096

PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_DUMMY = 9
PERF_COUNT_SW_MAX = 12

#: ``PERF_ATTR_SIZE_VER0``: the size a zero ``attr.size`` means.
PERF_ATTR_SIZE_VER0 = 64
#: ``sizeof(struct perf_event_attr)`` on 6.12 (VER8): what E2BIG writes back.
PERF_ATTR_SIZE = 136

#: include/uapi/linux/perf_event.h::
#:
#:     struct perf_event_attr {
#:         __u32 type;            __u32 size;
#:         __u64 config;
#:         union { __u64 sample_period; __u64 sample_freq; };
#:         __u64 sample_type;     __u64 read_format;
#:         __u64 disabled:1, inherit:1, ... sigtrap:1, __reserved_1:26;
#:         union { __u32 wakeup_events; __u32 wakeup_watermark; };
#:         __u32 bp_type;
#:         union { __u64 bp_addr; __u64 config1; };
#:         union { __u64 bp_len;  __u64 config2; };
#:         __u64 branch_sample_type;
#:         __u64 sample_regs_user;
#:         __u32 sample_stack_user;
#:         __s32 clockid;
#:         __u64 sample_regs_intr;
#:         __u32 aux_watermark;
#:         __u16 sample_max_stack;
#:         __u16 __reserved_2;
#:         __u32 aux_sample_size;
#:         __u32 __reserved_3;
#:         __u64 sig_data;
#:         __u64 config3;
#:     };
ATTR_STRUCT = struct.Struct("=IIQQQQQIIQQQQIiQIHHIIQQ")
assert ATTR_STRUCT.size == PERF_ATTR_SIZE


class Flag(enum.IntFlag):
    """The attr's bit fields, bit 0 first (``disabled:1, inherit:1, …``)."""

    DISABLED = 1 << 0
    INHERIT = 1 << 1
    PINNED = 1 << 2
    EXCLUSIVE = 1 << 3
    EXCLUDE_USER = 1 << 4
    EXCLUDE_KERNEL = 1 << 5
    EXCLUDE_HV = 1 << 6
    EXCLUDE_IDLE = 1 << 7
    MMAP = 1 << 8
    COMM = 1 << 9
    FREQ = 1 << 10
    INHERIT_STAT = 1 << 11
    ENABLE_ON_EXEC = 1 << 12
    TASK = 1 << 13
    WATERMARK = 1 << 14
    PRECISE_IP = 3 << 15
    MMAP_DATA = 1 << 17
    SAMPLE_ID_ALL = 1 << 18
    EXCLUDE_HOST = 1 << 19
    EXCLUDE_GUEST = 1 << 20
    EXCLUDE_CALLCHAIN_KERNEL = 1 << 21
    EXCLUDE_CALLCHAIN_USER = 1 << 22
    MMAP2 = 1 << 23
    COMM_EXEC = 1 << 24
    USE_CLOCKID = 1 << 25
    CONTEXT_SWITCH = 1 << 26
    WRITE_BACKWARD = 1 << 27
    NAMESPACES = 1 << 28
    KSYMBOL = 1 << 29
    BPF_EVENT = 1 << 30
    AUX_OUTPUT = 1 << 31
    CGROUP = 1 << 32
    TEXT_POKE = 1 << 33
    BUILD_ID = 1 << 34
    INHERIT_THREAD = 1 << 35
    REMOVE_ON_EXEC = 1 << 36
    SIGTRAP = 1 << 37


#: ``__reserved_1:26``: bits 38-63.
RESERVED_1 = ~((1 << 38) - 1) & ((1 << 64) - 1)

#: The bits that make the kernel write side-band records (``perf_event_alloc``
#: accounts them: ``account_event``): a dummy with none of them stays empty.
#: A plain int: every write masks with it, and ``&`` with an IntFlag makes a
#: new enum member each time (some microseconds).
SIDE_BAND = int(Flag.MMAP | Flag.MMAP_DATA | Flag.MMAP2 | Flag.COMM | Flag.COMM_EXEC | Flag.TASK
                | Flag.CONTEXT_SWITCH | Flag.NAMESPACES | Flag.KSYMBOL | Flag.BPF_EVENT
                | Flag.CGROUP | Flag.TEXT_POKE | Flag.BUILD_ID)


class Sample(enum.IntFlag):
    """``enum perf_event_sample_format``."""

    IP = 1 << 0
    TID = 1 << 1
    TIME = 1 << 2
    ADDR = 1 << 3
    READ = 1 << 4
    CALLCHAIN = 1 << 5
    ID = 1 << 6
    CPU = 1 << 7
    PERIOD = 1 << 8
    STREAM_ID = 1 << 9
    RAW = 1 << 10
    BRANCH_STACK = 1 << 11
    REGS_USER = 1 << 12
    STACK_USER = 1 << 13
    WEIGHT = 1 << 14
    DATA_SRC = 1 << 15
    IDENTIFIER = 1 << 16
    TRANSACTION = 1 << 17
    REGS_INTR = 1 << 18
    PHYS_ADDR = 1 << 19
    AUX = 1 << 20
    CGROUP = 1 << 21
    DATA_PAGE_SIZE = 1 << 22
    CODE_PAGE_SIZE = 1 << 23
    WEIGHT_STRUCT = 1 << 24


#: ``PERF_SAMPLE_MAX``
SAMPLE_MAX = 1 << 25
#: What we lay out in a sample (``_perf_output``); anything else is refused at
#: open with EINVAL by us (documented in docs/perf.md), not by the kernel.
SAMPLE_EMULATED = (Sample.IDENTIFIER | Sample.IP | Sample.TID | Sample.TIME | Sample.ADDR
                   | Sample.ID | Sample.STREAM_ID | Sample.CPU | Sample.PERIOD | Sample.RAW
                   | Sample.READ)


class ReadFormat(enum.IntFlag):
    """``enum perf_event_read_format``."""

    TOTAL_TIME_ENABLED = 1 << 0
    TOTAL_TIME_RUNNING = 1 << 1
    ID = 1 << 2
    GROUP = 1 << 3
    LOST = 1 << 4


#: ``PERF_FORMAT_MAX``
READ_FORMAT_MAX = 1 << 5

#: ``PERF_FLAG_*`` of the syscall's ``flags``.
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_FLAG_ALL = 0xF


class PerfEventAttr(msgspec.Struct, frozen=True, kw_only=True):
    """The fields we use, as the kernel holds them after ``perf_copy_attr``."""

    type: int
    size: int
    config: int
    sample_period: int
    sample_type: int
    read_format: int
    flags: int
    wakeup_events: int
    clockid: int

    def has(self, flag: Flag) -> bool:
        return bool(self.flags & flag)


class AttrTooBig(TracefsError):
    """E2BIG from ``perf_copy_attr``: the kernel also writes its own
    ``sizeof(struct perf_event_attr)`` into the caller's ``attr.size``."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.E2BIG, message)
        self.kernel_size = PERF_ATTR_SIZE


def copy_attr(user: bytes) -> PerfEventAttr:
    """``perf_copy_attr``: ``user`` is what the caller's pointer holds, at
    least ``attr.size`` bytes when that is below a page (fewer: EFAULT)."""
    if len(user) < 8:
        raise TracefsError(errno.EFAULT, "attr unreadable")
    size = struct.unpack_from("=I", user, 4)[0] or PERF_ATTR_SIZE_VER0
    if size < PERF_ATTR_SIZE_VER0 or size > PAGE_SIZE:
        raise AttrTooBig(f"attr.size {size}")
    if len(user) < size:
        raise TracefsError(errno.EFAULT, "attr unreadable")
    if any(user[PERF_ATTR_SIZE:size]):
        raise AttrTooBig("non-zero bytes beyond the kernel's attr")
    fields = ATTR_STRUCT.unpack(user[:size].ljust(PERF_ATTR_SIZE, b"\0")[:PERF_ATTR_SIZE])
    (type_, _size, config, period, sample_type, read_format, flags, wakeup, _bp_type,
     _config1, _config2, _branch, _regs_user, stack_user, clockid, _regs_intr, _aux_wm,
     _max_stack, reserved_2, _aux_sample, reserved_3, _sig_data, _config3) = fields
    if flags & RESERVED_1 or reserved_2 or reserved_3:
        raise TracefsError(errno.EINVAL, "reserved bits set")
    if sample_type & ~(SAMPLE_MAX - 1):
        raise TracefsError(errno.EINVAL, "unknown sample_type bits")
    if read_format & ~(READ_FORMAT_MAX - 1):
        raise TracefsError(errno.EINVAL, "unknown read_format bits")
    if sample_type & Sample.STACK_USER and stack_user >= 0xFFFF:
        raise TracefsError(errno.EINVAL, "sample_stack_user too big")
    if sample_type & Sample.WEIGHT and sample_type & Sample.WEIGHT_STRUCT:
        raise TracefsError(errno.EINVAL, "WEIGHT with WEIGHT_STRUCT")
    if flags & Flag.SIGTRAP and not flags & Flag.REMOVE_ON_EXEC:
        raise TracefsError(errno.EINVAL, "sigtrap without remove_on_exec")
    return PerfEventAttr(type=type_, size=size, config=config, sample_period=period,
                         sample_type=sample_type, read_format=read_format, flags=flags,
                         wakeup_events=wakeup, clockid=clockid)


class Kind(enum.Enum):
    TRACEPOINT = "tracepoint"
    DUMMY = "dummy"


def emulated(attr: PerfEventAttr, is_ours: Callable[[int], bool]) -> Kind | None:
    """Whether we serve this event (see the module's rules), or the kernel does."""
    if attr.type == PERF_TYPE_TRACEPOINT and is_ours(attr.config):
        return Kind.TRACEPOINT
    if (attr.type == PERF_TYPE_SOFTWARE and attr.config == PERF_COUNT_SW_DUMMY
            and not attr.flags & SIDE_BAND):
        return Kind.DUMMY
    return None


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What the checks read from the system and from ``current``."""

    #: /proc/sys/kernel/perf_event_paranoid
    paranoid: int
    #: perfmon_capable() of the caller (CMD's root in run's user namespace counts).
    perfmon: bool
    nr_cpus: int
    #: /proc/sys/kernel/perf_event_max_sample_rate
    max_sample_rate: int = 100000


def check_open(attr: PerfEventAttr, pid: int, cpu: int, flags: int, limits: Limits) -> None:
    """The syscall's checks for one of ours (``emulated`` said so), in the kernel's order.

    ``pid``: -1 (any task, CPU-wide) or a task that exists (the caller checks
    ESRCH: it is the one that can see tasks). The group leader is checked by
    the caller too (EBADF when not a perf event).
    """
    if flags & ~PERF_FLAG_ALL:
        raise TracefsError(errno.EINVAL, "unknown flags")
    privileged = limits.perfmon
    # Debian's perf_event_paranoid 3 (security_perf_event_open): nothing
    # without CAP_SYS_ADMIN; perfmon stands for it here.
    if limits.paranoid > 2 and not privileged:
        raise TracefsError(errno.EACCES, "perf_event_paranoid > 2")
    if not attr.has(Flag.EXCLUDE_KERNEL) and limits.paranoid > 1 and not privileged:
        raise TracefsError(errno.EACCES, "kernel samples need perf_event_paranoid <= 1")
    if attr.has(Flag.NAMESPACES) and not privileged:
        raise TracefsError(errno.EACCES, "namespaces needs CAP_PERFMON")
    if attr.has(Flag.FREQ):
        if attr.sample_period > limits.max_sample_rate:
            raise TracefsError(errno.EINVAL, "sample_freq above the maximum rate")
    elif attr.sample_period & (1 << 63):
        raise TracefsError(errno.EINVAL, "sample_period's top bit")
    if attr.sample_type & Sample.PHYS_ADDR and limits.paranoid > 1 and not privileged:
        raise TracefsError(errno.EACCES, "PHYS_ADDR")
    if flags & PERF_FLAG_PID_CGROUP and (pid == -1 or cpu == -1):
        raise TracefsError(errno.EINVAL, "cgroup mode needs pid and cpu")
    if flags & PERF_FLAG_PID_CGROUP:
        raise TracefsError(errno.EINVAL, "cgroup events are not emulated")
    # perf_event_alloc: a CPU outside the possible ones only as "any CPU" of a task.
    if not 0 <= cpu < limits.nr_cpus and (pid == -1 or cpu != -1):
        raise TracefsError(errno.EINVAL, "no such cpu")
    if attr.has(Flag.SIGTRAP) and pid == -1:
        raise TracefsError(errno.EINVAL, "sigtrap needs a task")
    # The PMU's init: both refuse branch sampling.
    if attr.sample_type & Sample.BRANCH_STACK:
        raise TracefsError(errno.EOPNOTSUPP, "no branch sampling")
    if attr.type == PERF_TYPE_TRACEPOINT:
        _trace_event_perm(attr, pid, limits)
    # Ours, not the kernel's: what we cannot lay out or do (docs/perf.md).
    if attr.sample_type & ~SAMPLE_EMULATED:
        raise TracefsError(errno.EINVAL, "sample_type bits we do not lay out")
    # find_get_context: a CPU-wide event is perf_allow_cpu's.
    if pid == -1 and limits.paranoid > 0 and not privileged:
        raise TracefsError(errno.EACCES, "CPU-wide events need perf_event_paranoid <= 0")


def _trace_event_perm(attr: PerfEventAttr, pid: int, limits: Limits) -> None:
    """``perf_trace_event_perm`` for a user event (no ``TRACE_EVENT_FL_CAP_ANY``):
    raw samples of a sampling event are ``perf_allow_tracepoint``'s."""
    if not attr.sample_period:
        return  # counting only
    if not attr.sample_type & Sample.RAW:
        return
    if limits.paranoid > -1 and not limits.perfmon:
        raise TracefsError(errno.EPERM, "raw tracepoint samples need CAP_PERFMON")
