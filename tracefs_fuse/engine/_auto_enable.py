"""Auto-enable: user events switched on the moment they are created.

An option the kernel does not have, and the one every test of an
instrumented program needs: a user event does not exist until the program
registers it, so ``set_event``, ``trace-cmd record -e`` and friends cannot
name it beforehand. With patterns configured, every new user event that
matches one is enabled in the top trace array as if ``1`` had been written to
its ``enable`` file, before the registration that created it returns, so the
program's enable bit is already set when ``DIAG_IOCSREG`` comes back.

Rules:
  * A pattern is a ``set_event`` word: ``[!]system:event`` (an empty or
    ``*`` side matches anything) or ``[!]name`` (a system or an event of that
    name). Unlike ``set_event``, each side is a shell glob, so
    ``user_events:MyProvider_*`` catches an EventHeader provider at every
    level and keyword.
  * Patterns apply in order, like successive ``set_event`` writes: the last
    one that matches decides, and a ``!`` pattern leaves the event off.
  * Only creation is watched (DIAG_IOCSREG, ``dynamic_events``); what is
    enabled can be disabled again through the usual files.

Kernel: none; the matching is kernel/trace/trace_events.c's
(``ftrace_set_clr_event``), with globs.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

import msgspec

from ._field import KERNEL_SPACE

if TYPE_CHECKING:  # the command line checks patterns without loading the engine proper
    from ._events import TraceEvent
    from ._trace_array import TraceArray

#: EVENT_BUF_SIZE: set_event's longest word.
_EVENT_BUF_SIZE = 127


class EnablePattern(msgspec.Struct, frozen=True):
    """One auto-enable pattern, split the way ``set_event`` splits a word."""

    enable: bool
    #: A bare word (matching a system or an event name), or None.
    match: str | None
    #: The system and event globs of a ``system:event`` word (None: any).
    system: str | None
    name: str | None

    @classmethod
    def parse(cls, text: str) -> EnablePattern:
        """Split one pattern.

        Raises:
            ValueError: empty, longer than ``set_event`` takes, or with white space.
        """
        word = text.removeprefix("!")
        if not word or len(text) > _EVENT_BUF_SIZE or any(c in KERNEL_SPACE for c in text):
            raise ValueError(f"not an event pattern: {text!r} "
                             "(expected [!]system:event or [!]name, globs allowed)")
        enable = not text.startswith("!")
        if ":" not in word:
            return cls(enable, word, None, None)
        system, name = word.split(":", 1)
        return cls(enable, None, None if system in ("", "*") else system,
                   None if name in ("", "*") else name)

    def matches(self, system: str, name: str) -> bool:
        if self.match is not None:
            return fnmatchcase(name, self.match) or fnmatchcase(system, self.match)
        return ((self.system is None or fnmatchcase(system, self.system))
                and (self.name is None or fnmatchcase(name, self.name)))


class AutoEnable:
    """Enables new events in a trace array when a pattern selects them."""

    def __init__(self, tr: TraceArray, patterns: tuple[str, ...]) -> None:
        self.tr = tr
        self.patterns = tuple(EnablePattern.parse(p) for p in patterns)

    def wanted(self, event: TraceEvent) -> bool:
        """Does the last pattern matching ``event`` enable it?"""
        wanted = False
        for pattern in self.patterns:
            if pattern.matches(event.system, event.name):
                wanted = pattern.enable
        return wanted

    def created(self, event: TraceEvent) -> None:
        """A new event exists: enable it if the patterns want it."""
        if self.patterns and event.enableable and self.wanted(event):
            self.tr.set_enabled(event, True)
