"""``tracefs-fuse run``'s serving side: the daemon for a command started already.

``_run`` mounts, starts the command and imports this module on a thread
meanwhile (all it imports is what serving needs, and most of a run's
start-up); :func:`serve_and_run` then serves the mount until the command
ends (``_run``'s docstring has the rules).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, BinaryIO

import trio

from ..engine import EnablePattern, Tracefs
from ..engine._events import TraceEvent
from ..engine._uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from ..fuse._session import serving, terminate
from ..host import _environment
from ..host._host_events import host_highest_event_id
from ..perf._service import PerfService
from ._config import MountConfig
from ._daemon import Daemon
from ._logging import bug_line, is_bug
from ._command import Command, end_leftovers

if TYPE_CHECKING:
    from ..record._recording import Recording

log = logging.getLogger(__name__)


def load(beneath: tuple[str, ...]) -> None:
    """What serving reads of the host, read now (on ``_run``'s loading thread):
    its event ids, through ``beneath``, the tracefs directories our mount covers."""
    host_highest_event_id(beneath)


def serve_and_run(config: MountConfig, device: int, command: Command,
                  record: tuple[BinaryIO, str] | None, named_events: tuple[str, ...]) -> int:
    """Serve the mount of ``device`` until ``command`` ends; its exit status, or 1."""
    try:
        with _Refusals() as refusals:
            return trio.run(_serve_and_run, config, device, command, record, named_events,
                            refusals)
    except Exception as exc:
        if is_bug(exc):
            print(f"tracefs-fuse run: {bug_line(exc)}", file=sys.stderr)
        else:
            log.debug("run failed", exc_info=True)
            print(f"tracefs-fuse run: {_environment.one_line(exc)}", file=sys.stderr)
        command.kill()
        return 1


async def _serve_and_run(config: MountConfig, device: int, command: Command,
                         record: tuple[BinaryIO, str] | None, named_events: tuple[str, ...],
                         refusals: _Refusals) -> int:
    daemon = Daemon(config, device)
    async with trio.open_nursery() as nursery:
        # Before the first request is served: every event the command emits.
        matches = _Matches(daemon.tracefs, named_events)
        recording = await _start_recording(nursery, daemon, record)
        await nursery.start(daemon.run, False)
        if command.listener is not None:
            command.perf.start(command.listener, PerfService(
                daemon.engine, config.mountpoint, daemon.control_task, daemon.engine_changed))
            command.listener = None  # the supervisor's now
        interrupts = trio.CancelScope()
        nursery.start_soon(_pass_on_interrupts, command, interrupts)
        await trio.lowlevel.wait_readable(command.pidfd)
        status = command.reap()  # before any other task runs: one may be about to pass one on
        command.close()
        interrupts.cancel()
        # On a worker thread: a leftover killed inside one of our requests
        # waits for our answer before it dies.
        await trio.to_thread.run_sync(end_leftovers)
        # After the leftovers: none of them is left waiting on it.
        await trio.to_thread.run_sync(command.perf.stop)
        await _finish_recording(recording)
        for line in [*refusals.summary(), *matches.summary()]:
            print(f"tracefs-fuse: {line}", file=sys.stderr)
        if not serving():
            print("tracefs-fuse run: the mount ended before the command did (its FUSE "
                  "connection was aborted, /sys/fs/fuse/connections/N/abort); the command "
                  "saw ENOTCONN from then on", file=sys.stderr)
        terminate()  # unmount; the daemon's tasks then end by themselves
    return status


async def _pass_on_interrupts(command: Command, scope: trio.CancelScope) -> None:
    """SIGINT passed on (``_command.Interrupts``) until the scope is cancelled
    (the command ended)."""
    with scope:
        while True:
            await trio.lowlevel.wait_readable(command.interrupts.fd)
            command.interrupts.pass_on()


def load_recorder() -> None:
    """Import what ``--record`` needs now (a run server, before it forks)."""
    from ..record import _recording  # noqa: F401


async def _start_recording(nursery: trio.Nursery, daemon: Daemon,
                           record: tuple[BinaryIO, str] | None) -> Recording | None:
    """``--record``'s recording, started; None without it. The recorder (and the
    decoder it brings: decode/, eventheader/) is imported for ``--record`` alone:
    15-30 ms of a plain run's start-up (issue 21)."""
    if record is None:
        return None
    from ..record._recording import start_recording

    return await start_recording(nursery, daemon, record)


async def _finish_recording(recording: Recording | None) -> None:
    if recording is not None:
        from ..record._recording import finish_recording

        await finish_recording(recording)


class _Refusals(logging.Filter):
    """Registrations refused while the command runs, for the summary.

    ``fuse/_errno.py`` logs one INFO line per refused request, with the
    request's name as its first argument. While this is entered, its logger
    makes those lines whatever ``--log-level`` says, and this filter keeps the
    registrations' and passes on only what the level asked for.
    """

    #: The requests that register events.
    REGISTRATIONS = ("ioctl DIAG_IOCSREG", "write dynamic_events")
    #: Distinct refusals named, at most.
    SHOWN = 10

    def __init__(self) -> None:
        super().__init__()
        self._logger = logging.getLogger("tracefs_fuse.fuse._errno")
        self._level = logging.NOTSET
        self._saved = logging.NOTSET
        self.seen: dict[str, int] = {}

    def __enter__(self) -> _Refusals:
        self._level = self._logger.getEffectiveLevel()
        self._saved = self._logger.level
        self._logger.setLevel(min(self._level, logging.INFO))
        self._logger.addFilter(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeFilter(self)
        self._logger.setLevel(self._saved)

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno == logging.INFO and isinstance(record.args, tuple) and record.args
                and record.args[0] in self.REGISTRATIONS):
            line = record.getMessage()
            self.seen[line] = self.seen.get(line, 0) + 1
        return record.levelno >= self._level

    def summary(self) -> list[str]:
        """One line per distinct refusal, unless the log had each already."""
        if self._level <= logging.INFO:
            return []
        lines = [f"refused {line}" + (f" ({count} times)" if count > 1 else "")
                 for line, count in list(self.seen.items())[:self.SHOWN]]
        if len(self.seen) > self.SHOWN:
            lines.append(f"and {len(self.seen) - self.SHOWN} more refusals "
                         "(--log-level info logs each)")
        return lines


class _Matches:
    """Which ``--events`` patterns matched a user event of the command's."""

    USER_SYSTEMS = (USER_EVENTS_SYSTEM, USER_EVENTS_MULTI_SYSTEM)

    def __init__(self, tracefs: Tracefs, patterns: tuple[str, ...]) -> None:
        self._tracefs = tracefs
        self._patterns = [(text, EnablePattern.parse(text)) for text in patterns]
        self._seen: list[tuple[str, str]] = []
        tracefs.events.retiring_listeners.append(self._retiring)

    def _retiring(self, event: TraceEvent) -> None:
        self._seen.append((event.system, event.name))

    def summary(self) -> list[str]:
        self._tracefs.events.retiring_listeners.remove(self._retiring)
        events = [*self._seen, *((e.system, e.name) for e in self._tracefs.events)]
        users = [(system, name) for system, name in events if system in self.USER_SYSTEMS]
        return [f"--events {text!r} matched no user event"
                for text, pattern in self._patterns
                if not any(pattern.matches(system, name) for system, name in users)]
