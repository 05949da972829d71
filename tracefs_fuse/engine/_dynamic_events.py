"""``dynamic_events``: one command file for every kind of dynamic event.

Rules:
  * Providers (user events ``u:``, synthetic events ``s:``, probes ``p:``/``r:``)
    are asked in turn; a provider that does not recognise a line answers
    ``None`` (the kernel's ``-ECANCELED``) and the next one is asked. A line
    nobody claims is EINVAL; an empty line is accepted and does nothing.
  * ``-:[sys/]name [fields]`` and ``!anything:[sys/]name [fields]`` delete every
    dynamic event that matches; the listing is in creation order across all
    kinds, as the kernel's single ``dyn_event_list``.
  * Writes are split into lines the way ``trace_parse_run_command`` does it
    (4 KiB chunks, ``#`` comments, NUL ends the text); an error stops the
    write, with the lines before it already applied.

Kernel: kernel/trace/trace_dynevent.c, kernel/trace/trace.c
(``trace_parse_run_command``).
"""

from __future__ import annotations

import errno
from typing import Callable, Protocol

from ._errors import TracefsError
from ._field import KERNEL_SPACE
from ._task import Task
from ._user_command import argv_split

#: WRITE_BUFSIZE of trace_parse_run_command: a line holds at most 4094 bytes.
WRITE_BUFSIZE = 4096


class DynEvent(Protocol):
    """What ``struct dyn_event_operations`` asks of one dynamic event."""

    def show(self) -> str:
        """Its line in ``dynamic_events`` (newline included)."""
        ...

    def match(self, system: str | None, event: str, argv: list[str]) -> bool:
        """Is it the event a ``-:`` command names?"""
        ...

    def is_busy(self) -> bool:
        ...

    def free(self, task: Task) -> None:
        """Delete it on a user's request.

        Raises:
            TracefsError: EBUSY while in use, EPERM without the privilege.
        """
        ...


class DynEventProvider(Protocol):
    def create(self, command: str, task: Task) -> bool:
        """Run a creation command; False means "not mine" (-ECANCELED).

        Raises:
            TracefsError: the creation's errno.
        """
        ...


def parse_run_command(data: bytes, run: Callable[[str], None]) -> int:
    """``trace_parse_run_command``: call ``run`` per line; return the byte count.

    Raises:
        TracefsError: EINVAL for a line of 4095 bytes or more; whatever ``run``
            raises (lines before the failing one stay applied).
    """
    done, count = 0, len(data)
    while done < count:
        size = min(count - done, WRITE_BUFSIZE - 1)
        chunk = data[done:done + size]
        # The chunk is a C string: a NUL ends it.
        nul = chunk.find(0)
        text = chunk if nul < 0 else chunk[:nul]
        pos = 0
        while done < count:
            newline = text.find(b"\n", pos)
            if newline >= 0:
                line = text[pos:newline]
                size = newline - pos + 1
            else:
                line = text[pos:]
                size = len(line)
                if done + size < count:
                    if pos:
                        break  # re-read the unfinished line as a new chunk
                    raise TracefsError(errno.EINVAL, f"line longer than {WRITE_BUFSIZE - 2} bytes")
            done += size
            line = line.split(b"#", 1)[0]
            run(line.decode("latin-1"))
            pos += size
    return done


class DynamicEvents:
    """Every dynamic event, in creation order, and the commands that make them."""

    def __init__(self, on_release: Callable[[], None] = lambda: None) -> None:
        self.providers: list[DynEventProvider] = []
        self.entries: list[DynEvent] = []
        # tracing_reset_all_online_cpus(): buffers holding records of a removed,
        # once-enabled event are cleared after deletions.
        self._on_release = on_release

    def add(self, entry: DynEvent) -> None:
        self.entries.append(entry)

    def remove(self, entry: DynEvent) -> None:
        self.entries.remove(entry)

    def render(self) -> str:
        return "".join(entry.show() for entry in self.entries)

    def write(self, data: bytes, task: Task) -> int:
        return parse_run_command(data, lambda line: self.command(line, task))

    def command(self, line: str, task: Task) -> None:
        """``create_dyn_event``: dispatch one line."""
        if line[:1] in ("-", "!"):
            self.release(line, task)
            return
        if not line.strip(KERNEL_SPACE):
            return  # the probe parsers accept an empty argv and do nothing
        for provider in self.providers:
            if provider.create(line, task):
                return
        raise TracefsError(errno.EINVAL, f"unknown dynamic event command {line!r}")

    def release(self, line: str, task: Task) -> None:
        """``dyn_event_release``: delete every dynamic event the line matches.

        Raises:
            TracefsError: EINVAL for a malformed command, ENOENT when nothing
                matches, or the first deletion's error.
        """
        # The line starts with '-' or '!': argv_split() always finds a head.
        argv = argv_split(line)
        head = argv[0]
        if head.startswith("-"):
            if head[1:2] != ":":
                raise TracefsError(errno.EINVAL, f"malformed delete command {line!r}")
            target = head[2:]
        else:
            colon = head.find(":")
            if colon < 0:
                raise TracefsError(errno.EINVAL, f"malformed delete command {line!r}")
            target = head[colon + 1:]
        system: str | None = None
        if "/" in target:
            system, target = target.split("/", 1)
        if system is None and not target:
            raise TracefsError(errno.EINVAL, "no event named")
        try:
            # Every match is decided before anything is freed: the kernel's
            # matchers look at one event each, so this is its loop, and an
            # auto mount's user events look at their namesakes (UserEvent.match).
            matched = [entry for entry in self.entries if entry.match(system, target, argv[1:])]
            if not matched:
                raise TracefsError(errno.ENOENT, f"no dynamic event {target!r}")
            for entry in matched:
                entry.free(task)
        finally:
            self._on_release()

    def release_all(self, task: Task, kind: type | None = None) -> None:
        """``dyn_events_release_all``: what opening with O_TRUNC does.

        Args:
            task: who deletes.
            kind: only events of this class (the kernel's ``type``, its
                ``dyn_event_operations``); None for every kind.

        Raises:
            TracefsError: EBUSY (nothing deleted) if any of them is busy; the
                first failing deletion's error (those before it are gone).
        """
        chosen = [entry for entry in self.entries if kind is None or isinstance(entry, kind)]
        try:
            if any(entry.is_busy() for entry in chosen):
                raise TracefsError(errno.EBUSY, "a dynamic event is in use")
            for entry in chosen:
                entry.free(task)
        finally:
            self._on_release()
