"""kprobe events (``kprobe_events``, ``p:``/``r:`` lines): parsed, then refused.

There is no kernel to probe, so no kprobe event can ever exist. Every command
is parsed by ``__trace_kprobe_create``'s steps up to the point where the
kernel would look the probe point up, and refused there exactly as a kernel
refuses a symbol it does not have: the same errno and the same ``error_log``
line. Nothing is ever refused silently.

Rules:
  * A symbol (``[MOD:]KSYM[+offs]``, optionally ``%return``) fails in
    ``validate_probe_symbol``: ``trace_kprobe: error: Invalid probed address
    or symbol`` under the symbol, EINVAL. Earlier checks (maxactive, address
    suffix, offset) keep their own messages.
  * An address (``KADDR``) is accepted by the parser; its event name is
    checked (``traceprobe_parse_event_name``, then EEXIST if the group/event
    exists), and registration then fails as for an address outside kernel
    text: ``Failed to register probe event`` under the address, EINVAL.
  * Lines that are not ours go on to the next provider (``-ECANCELED``):
    anything not starting with ``p``/``r``, a bare ``p``, and uprobe-style
    ``PATH:OFFSET`` targets. This kernel has no uprobe events, so in
    ``dynamic_events`` those end as a plain EINVAL, and so do they in
    ``kprobe_events`` (``create_or_delete_trace_kprobe``).
  * Error positions follow ``__trace_probe_log_err``: the command is the
    arguments joined by single spaces, the caret is at the start of the
    argument being parsed plus an offset inside it.

Caveats (deliberate deviations):
  * ``MOD:KSYM`` for a module that is not loaded is refused like any unknown
    symbol; the kernel accepts it and waits for the module.
  * Fetch arguments of an address probe are not parsed: a malformed one is
    reported as the registration failure, not as its own error.

Kernel: kernel/trace/trace_kprobe.c (``__trace_kprobe_create``,
``validate_probe_symbol``, ``register_trace_kprobe``), trace_probe.c
(``traceprobe_parse_event_name``, ``__trace_probe_log_err``), 6.12.
"""

from __future__ import annotations

import errno

from ._dynamic_events import DynamicEvents, parse_run_command
from ._error_log import ErrorLog
from ._errors import TracefsError
from ._events import EventTable
from ._synth import is_good_name
from ._task import Task
from ._tree import File, text_file
from ._user_command import argv_split

#: The kernel's ``trace_probe_log.subsystem`` for kprobes.
KPROBE_LOC = "trace_kprobe"
#: KPROBE_EVENT_SYSTEM: the default group.
KPROBE_EVENT_SYSTEM = "kprobes"
#: MAX_EVENT_NAME_LEN: group and event names are shorter.
MAX_EVENT_NAME_LEN = 64
#: KRETPROBE_MAXACTIVE_MAX.
KRETPROBE_MAXACTIVE_MAX = 4096
#: MAX_TRACE_ARGS: fetch arguments per probe.
MAX_TRACE_ARGS = 128

# The TP_ERR_* texts we can produce.
ERR_BAD_MAXACT_TYPE = "Maxactive is only for function exit"
ERR_BAD_MAXACT = "Invalid maxactive number"
ERR_MAXACT_TOO_BIG = "Maxactive is too big"
ERR_BAD_PROBE_ADDR = "Invalid probed address or symbol"
ERR_BAD_ADDR_SUFFIX = "Invalid probed address suffix"
ERR_NO_GROUP_NAME = "Group name is not specified"
ERR_GROUP_TOO_LONG = "Group name is too long"
ERR_BAD_GROUP_NAME = "Group name must follow the same rules as C identifiers"
ERR_NO_EVENT_NAME = "Event name is not specified"
ERR_EVENT_TOO_LONG = "Event name is too long"
ERR_BAD_EVENT_NAME = "Event name must follow the same rules as C identifiers"
ERR_EVENT_EXIST = "Given group/event name is already used by another event"
ERR_FAIL_REG_PROBE = "Failed to register probe event"

_ULONG_MAX = (1 << 64) - 1
_UINT_MAX = (1 << 32) - 1


def _kstrtoull(text: str) -> int | None:
    """``kstrtoul(text, 0)``: the value, or None for anything but a number."""
    s = text[1:] if text.startswith("+") else text
    base = 10
    if s[:1] == "0":
        base = 16 if s[1:2] in ("x", "X") and s[2:3] and s[2:3] in _XDIGITS else 8
    if base == 16:
        s = s[2:]
    digits = "0123456789abcdef"[:base]
    if not s or any(c.lower() not in digits for c in s):
        return None
    value = int(s, base)
    return value if value <= _ULONG_MAX else None


def _kstrtol(text: str) -> int | None:
    """``kstrtol(text, 0)``: the value, or None."""
    if text.startswith("-"):
        magnitude = _kstrtoull(text[1:])
        return None if magnitude is None or magnitude > 1 << 63 else -magnitude
    value = _kstrtoull(text)
    return None if value is None or value >> 63 else value


_XDIGITS = frozenset("0123456789abcdefABCDEF")


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


def _parse_event_name(event: str, offset: int, plog: _ProbeLog) -> tuple[str | None, str]:
    """``traceprobe_parse_event_name``: (group or None for the default, event).

    An empty event after a group means "make up a name" (returned as "").
    """
    slash = event.find("/")
    if slash < 0:
        slash = event.find(".")
    group = None
    if slash >= 0:
        if slash == 0:
            raise plog.err(offset, ERR_NO_GROUP_NAME)
        if slash + 1 > MAX_EVENT_NAME_LEN:
            raise plog.err(offset, ERR_GROUP_TOO_LONG)
        group = event[:slash]
        if not is_good_name(group, hash_ok=True):
            raise plog.err(offset, ERR_BAD_GROUP_NAME)
        offset += slash + 1
        event = event[slash + 1:]
    if not event:
        if slash >= 0:
            return group, ""
        raise plog.err(offset, ERR_NO_EVENT_NAME)
    if len(event) >= MAX_EVENT_NAME_LEN:
        raise plog.err(offset, ERR_EVENT_TOO_LONG)
    if not is_good_name(event):
        raise plog.err(offset, ERR_BAD_EVENT_NAME)
    return group, event


class KprobeEvents:
    """The kprobe provider of ``dynamic_events`` and the ``kprobe_events`` file.

    Args:
        events: every event (an explicit group/event name must be free).
        error_log: where refusals are logged.
    """

    def __init__(self, events: EventTable, error_log: ErrorLog) -> None:
        self.events = events
        self.error_log = error_log
        #: The kprobe events: none can ever be created (``kprobe_events`` is
        #: empty and ``-:`` there finds nothing).
        self.kprobes = DynamicEvents()

    def create(self, command: str, task: Task) -> bool:
        """``trace_kprobe_create``: parse a ``p``/``r`` line and refuse it.

        Returns False for lines that are not kprobe definitions (-ECANCELED),
        True for an empty line (nothing to do).

        Raises:
            TracefsError: EINVAL (logged) for every kprobe definition; EEXIST
                (logged) for an address probe named like an existing event;
                E2BIG for more than 128 fetch arguments.
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
        if head[1:2] and head[1:2] in "0123456789":
            if not is_return:
                raise plog.err(1, ERR_BAD_MAXACT_TYPE)
            maxactive = head[1:colon] if colon >= 0 else head[1:]
            if len(maxactive) > MAX_EVENT_NAME_LEN - 1:
                raise plog.err(1, ERR_BAD_MAXACT)
            value = _kstrtoull(maxactive)
            if value is None or value > _UINT_MAX or not value:
                raise plog.err(1, ERR_BAD_MAXACT)
            if value > KRETPROBE_MAXACTIVE_MAX:
                raise plog.err(1, ERR_MAXACT_TOO_BIG)
        target = argv[1]
        if _kstrtoull(target) is None:
            plog.index = 1
            if "/" in target and ":" in target:
                return False  # a uprobe: not ours
            self._refuse_symbol(target, plog)
        plog.index = 0
        group: str | None = None
        event = ""
        if colon >= 0:
            group, event = _parse_event_name(head[colon + 1:], colon + 1, plog)
        if len(argv) - 2 > MAX_TRACE_ARGS:
            raise TracefsError(errno.E2BIG, "too many fetch arguments")
        if event and self.events.find(group or KPROBE_EVENT_SYSTEM, event) is not None:
            raise plog.err(0, ERR_EVENT_EXIST, errno.EEXIST)
        # register_kprobe(): the address is not kernel text we could probe.
        plog.index = 1
        raise plog.err(0, ERR_FAIL_REG_PROBE)

    @staticmethod
    def _refuse_symbol(target: str, plog: _ProbeLog) -> None:
        """The symbol path, up to ``validate_probe_symbol``'s -ENOENT."""
        symbol = target
        suffix = symbol.find("%")
        if suffix >= 0:
            if symbol[suffix:] != "%return":
                raise plog.err(suffix, ERR_BAD_ADDR_SUFFIX)
            symbol = symbol[:suffix]
        # traceprobe_split_symbol_offset(): "+offs" or "-offs" after the name.
        cut = min((i for i in (symbol.find("+"), symbol.find("-")) if i >= 0), default=-1)
        if cut >= 0:
            offset = _kstrtol(symbol[cut:])
            if offset is None or offset < 0 or offset > _UINT_MAX:
                raise plog.err(0, ERR_BAD_PROBE_ADDR)
        # number_of_same_symbols() == 0: there is no kernel symbol to probe.
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
