"""kprobe events (``kprobe_events``, ``p:``/``r:`` lines): parsed, then refused.

There is no kernel to probe, so no kprobe event can ever exist. Every command
is parsed by ``__trace_kprobe_create``'s steps up to the point where the
kernel would look the probe point up, and refused there exactly as a kernel
refuses a symbol it does not have: the same errno and the same ``error_log``
line. Nothing is ever refused silently.

Rules:
  * The probe point (``[MOD:]KSYM[+offs][%return]`` or ``KADDR``) is refused
    where ``validate_probe_symbol`` refuses an unknown symbol: ``trace_kprobe:
    error: Invalid probed address or symbol`` under the probe point, EINVAL.
    The checks before that point keep their own messages: maxactive
    (``r5:``), the ``%`` suffix, the offset. Nothing after it (event name,
    fetch arguments) is looked at, as in the kernel for an unknown symbol.
  * Lines that are not ours go on to the next provider (``-ECANCELED``):
    anything not starting with ``p``/``r``, a bare ``p``, and uprobe-style
    ``PATH:OFFSET`` targets. This kernel has no uprobe events, so in
    ``dynamic_events`` those end as a plain EINVAL, and so do they in
    ``kprobe_events`` (``create_or_delete_trace_kprobe``).
  * Error positions follow ``__trace_probe_log_err``: the command is the
    arguments joined by single spaces, the caret is at the start of the
    argument being parsed plus an offset inside it.

Caveats (deliberate deviations), seen on the oracle (6.12.117 with
CONFIG_KPROBE_EVENTS, no modules):
  * ``MOD:KSYM`` and ``KADDR`` are refused like an unknown symbol. That kernel
    accepts both as pending probes ("might be able to register after target
    module is loaded") that never fire, even for an address such as 0x1234,
    and then reports EEXIST ("There is already the exact same probe event")
    for later address probes of the same name.

Kernel: kernel/trace/trace_kprobe.c (``__trace_kprobe_create``,
``validate_probe_symbol``, ``create_or_delete_trace_kprobe``), trace_probe.c
(``traceprobe_split_symbol_offset``, ``__trace_probe_log_err``), 6.12.
"""

from __future__ import annotations

import errno

from ._dynamic_events import DynamicEvents, parse_run_command
from ._error_log import ErrorLog
from ._errors import TracefsError
from ._field import KERNEL_DIGITS
from ._kstrto import kstrtou32, kstrtoull
from ._task import Task
from ._tree import File, text_file
from ._user_command import argv_split

#: The kernel's ``trace_probe_log.subsystem`` for kprobes.
KPROBE_LOC = "trace_kprobe"
#: MAX_EVENT_NAME_LEN: the maxactive digits must be shorter.
MAX_EVENT_NAME_LEN = 64
#: KRETPROBE_MAXACTIVE_MAX.
KRETPROBE_MAXACTIVE_MAX = 4096

# The TP_ERR_* texts we can produce.
ERR_BAD_MAXACT_TYPE = "Maxactive is only for function exit"
ERR_BAD_MAXACT = "Invalid maxactive number"
ERR_MAXACT_TOO_BIG = "Maxactive is too big"
ERR_BAD_PROBE_ADDR = "Invalid probed address or symbol"
ERR_BAD_ADDR_SUFFIX = "Invalid probed address suffix"

def _is_number(text: str) -> bool:
    """Does ``kstrtoul(text, 0)`` take it (a probe at an address)?"""
    try:
        kstrtoull(text, 0)
    except TracefsError:
        return False
    return True


class _ProbeLog:
    """``trace_probe_log``: the argument being parsed, for caret positions."""

    def __init__(self, log: ErrorLog, argv: list[str]) -> None:
        self.log = log
        self.argv = argv
        self.index = 0

    def err(self, offset: int, message: str, code: int = errno.EINVAL) -> TracefsError:
        """``__trace_probe_log_err``: log and return the error."""
        pos = sum(len(arg) + 1 for arg in self.argv[:self.index])
        if self.index >= len(self.argv):
            # "the error position is next to the last arg + space"
            pos = sum(len(arg) + 1 for arg in self.argv)
            offset = 0
        self.log.log(KPROBE_LOC, " ".join(self.argv), message, pos + offset)
        return TracefsError(code, message)


class KprobeEvents:
    """The kprobe provider of ``dynamic_events`` and the ``kprobe_events`` file.

    Args:
        error_log: where refusals are logged.
    """

    def __init__(self, error_log: ErrorLog) -> None:
        self.error_log = error_log
        #: The kprobe events: none can ever be created (``kprobe_events`` is
        #: empty and ``-:`` there finds nothing).
        self.kprobes = DynamicEvents()

    def create(self, command: str, task: Task) -> bool:
        """``trace_kprobe_create``: parse a ``p``/``r`` line and refuse it.

        Returns False for lines that are not kprobe definitions (-ECANCELED),
        True for an empty line (nothing to do).

        Raises:
            TracefsError: EINVAL (logged) for every kprobe definition.
        """
        argv = argv_split(command)
        if not argv:
            return True
        head = argv[0]
        if head[0] not in ("p", "r") or len(argv) < 2:
            return False
        is_return = head[0] == "r"
        plog = _ProbeLog(self.error_log, argv)
        colon = head.find(":", 1)
        if head[1:2] in KERNEL_DIGITS:
            if not is_return:
                raise plog.err(1, ERR_BAD_MAXACT_TYPE)
            maxactive = head[1:colon] if colon >= 0 else head[1:]
            if len(maxactive) > MAX_EVENT_NAME_LEN - 1:
                raise plog.err(1, ERR_BAD_MAXACT)
            try:
                value = kstrtou32(maxactive, 0)
            except TracefsError:
                value = 0
            if not value:
                raise plog.err(1, ERR_BAD_MAXACT)
            if value > KRETPROBE_MAXACTIVE_MAX:
                raise plog.err(1, ERR_MAXACT_TOO_BIG)
        target = argv[1]
        plog.index = 1
        if not _is_number(target):
            if "/" in target and ":" in target:
                return False  # a uprobe: not ours
            suffix = target.find("%")
            if suffix >= 0 and target[suffix:] != "%return":
                raise plog.err(suffix, ERR_BAD_ADDR_SUFFIX)
        # A bad "+offs" (traceprobe_split_symbol_offset) is logged exactly
        # like the unknown symbol that validate_probe_symbol() finds next.
        raise plog.err(0, ERR_BAD_PROBE_ADDR)

    def run_command(self, command: str, task: Task) -> None:
        """``create_or_delete_trace_kprobe``: a ``kprobe_events`` line.

        Raises:
            TracefsError: EINVAL for anything but a deletion that finds
                nothing (ENOENT), as :meth:`create` explains.
        """
        if command[:1] == "-":
            self.kprobes.release(command, task)
            return
        if not self.create(command, task):
            raise TracefsError(errno.EINVAL, f"not a kprobe definition: {command!r}")

    def write(self, data: bytes, task: Task) -> int:
        return parse_run_command(data, lambda line: self.run_command(line, task))

    def node(self) -> File:
        """``kprobe_events`` (mode 0640); O_TRUNC deletes every kprobe: none."""
        return text_file("kprobe_events", self.kprobes.render, self.write,
                         on_truncate=self.kprobes.release_all)
