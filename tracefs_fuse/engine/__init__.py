"""The tracefs engine: the kernel's rules for user_events and tracing, with no I/O.

This package is pure, synchronous and deterministic. It never imports pyfuse3,
trio, time, threading, ctypes or anything that performs I/O; clocks, CPU numbers
and process memory are handed to it. It takes bytes and commands, returns bytes
and records, and reports every refusal as a :class:`TracefsError` carrying the
errno the kernel would return.

The public surface is re-exported here; the modules themselves are private.

Owns: the kernel's rules (one concept a file, named as the kernel names it).
May import: nothing of ours.
"""

import typing as _typing

from ._auto_enable import EnablePattern as EnablePattern
from ._clock import ManualClock as ManualClock
from ._clock import TraceClocks as TraceClocks
from ._errors import TracefsError as TracefsError
from ._errors import WouldBlock as WouldBlock
from ._memory import ProcessMemory as ProcessMemory
from ._memory import Tgid as Tgid
from ._task import Task as Task
from ._uapi import Abi as Abi

if _typing.TYPE_CHECKING:
    from ._tracefs import ABI_MODES as ABI_MODES
    from ._tracefs import Tracefs as Tracefs

__all__ = ["ABI_MODES", "Abi", "EnablePattern", "ManualClock", "ProcessMemory", "Task", "Tgid",
           "TraceClocks", "Tracefs", "TracefsError", "WouldBlock"]


def __getattr__(name: str) -> _typing.Any:
    """The engine proper, loaded on first use (and kept here from then on): a
    command line that only checks its options (``EnablePattern``) does without
    it, 13 ms of ``run``'s start-up (issue 21)."""
    if name in ("ABI_MODES", "Tracefs"):
        from . import _tracefs

        value = globals()[name] = getattr(_tracefs, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
