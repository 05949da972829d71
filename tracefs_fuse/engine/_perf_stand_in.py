"""Side-band dummies the host kernel refuses inside a rootless ``run``: ours.

``perf record -a`` opens, beside its events, a ``PERF_COUNT_SW_DUMMY`` per CPU
that asks for side-band records (comm, task, mmap, …) and redirects it into
the first event's ring. Under sudo the host kernel grants it. In a rootless
``run`` CMD is root of a user namespace, which the host kernel does not count
(``perfmon_capable`` asks the initial user namespace): the dummy gets EACCES
and perf stops, although our own events are allowed there (CMD's root counts
for them, docs/perf.md).

Rules:
  * Such a dummy is ours when the caller's user namespace is not the initial
    one, the kernel would refuse it to an unprivileged caller, and our checks
    (CMD's root counting) accept it. Elsewhere the kernel answers, as before.
  * Ours, it writes no record by itself (we see no mmap, no context switch);
    redirected into one of our rings, its side-band bits are that ring's to
    write for the tasks whose samples it carries (``_perf_side_band``).

Kernel: kernel/events/core.c (``perf_event_open``, ``find_get_context``:
``perf_allow_cpu``), include/linux/perf_event.h (``perf_allow_kernel``),
include/linux/capability.h (``perfmon_capable``: ``capable()``, the initial
user namespace).
"""

from __future__ import annotations

import msgspec

from ._errors import TracefsError
from ._perf_event_attr import (PERF_COUNT_SW_DUMMY, PERF_TYPE_SOFTWARE, Limits, PerfEventAttr,
                               check_open)


def stands_in(attr: PerfEventAttr, pid: int, cpu: int, flags: int, limits: Limits, *,
              initial_userns: bool) -> bool:
    """Whether we serve this side-band dummy for a caller the host refuses."""
    if initial_userns or not limits.perfmon:
        return False
    if attr.type != PERF_TYPE_SOFTWARE or attr.config != PERF_COUNT_SW_DUMMY:
        return False
    try:
        check_open(attr, pid, cpu, flags, msgspec.structs.replace(limits, perfmon=False))
    except TracefsError:
        pass  # the host refuses it: ours if our own checks accept it
    else:
        return False
    try:
        check_open(attr, pid, cpu, flags, limits)
    except TracefsError:
        return False
    return True
