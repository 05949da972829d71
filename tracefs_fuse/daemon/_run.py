"""``tracefs-fuse run -- CMD``: the daemon and one command, in a private namespace.

Rules:
  * The command is our child, in our process group, with default signal
    dispositions. Ctrl-C reaches it from the terminal; we ignore SIGINT
    ourselves and wait for it to decide. SIGTERM and SIGHUP sent to us are
    passed on to it.
  * However the command ends, we unmount and exit with its status (128+N if a
    signal N killed it). If the daemon fails while the command runs, the
    command is killed (its tracefs is gone) and we exit 1 with the reason.
  * The command gets ``PR_SET_PDEATHSIG`` = SIGKILL: if we are killed, it does
    not run on against a dead mount.
  * After the command, the summary on stderr (after ``--record``'s line) names
    what the user must know without ``--log-level info``: every registration
    refused (:class:`_Refusals`; at ``info`` the log names each already) and every ``--events`` pattern that matched
    no user event (:class:`_Matches`).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
from typing import BinaryIO

import trio

from ..fuse._session import terminate
from ..host import _environment, _namespace
from ..engine import EnablePattern, Tracefs
from ..engine._events import TraceEvent
from ..engine._uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from ..lib import libc
from ..record._recording import finish_recording, start_recording
from ._config import MountConfig
from ._daemon import Daemon

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def _child_setup() -> None:
    # Ignored signals stay ignored across exec: give the command the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def exit_status(returncode: int) -> int:
    """A shell's ``$?`` for a child's return code (negative: killed by a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def run_in_namespace(config: MountConfig, argv: list[str],
                     record: tuple[BinaryIO, str] | None = None,
                     named_events: tuple[str, ...] = ()) -> int:
    """Enter the namespaces, serve, run ``argv``; its exit status, or 1.

    Environment problems (no ``/dev/fuse``, namespaces refused, …) are said in
    one line on stderr before anything is mounted. ``record``: a file (opened
    before the namespaces are entered) and its name. ``named_events``: the
    ``--events`` patterns the user gave (not a default), which the summary
    names if they matched nothing.
    """
    try:
        _environment.check_fuse_device()
        _namespace.enter()
        mountpoint = _namespace.prepare_tracing_dir()
    except _environment.EnvironmentProblem as exc:
        print(f"tracefs-fuse run: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tracefs-fuse run: cannot set up a private mount namespace: {exc}",
              file=sys.stderr)
        return 1
    config = _replace_mountpoint(config, mountpoint)
    try:
        return trio.run(_run, config, argv, record, named_events)
    except Exception as exc:
        log.debug("run failed", exc_info=True)
        print(f"tracefs-fuse run: {_environment.one_line(exc)}", file=sys.stderr)
        return 1


def _replace_mountpoint(config: MountConfig, mountpoint: str) -> MountConfig:
    import msgspec

    return msgspec.structs.replace(config, mountpoint=mountpoint)


async def _run(config: MountConfig, argv: list[str], record: tuple[BinaryIO, str] | None,
               named_events: tuple[str, ...]) -> int:
    with _Refusals() as refusals:
        return await _serve_and_run(config, argv, record, named_events, refusals)


async def _serve_and_run(config: MountConfig, argv: list[str],
                         record: tuple[BinaryIO, str] | None, named_events: tuple[str, ...],
                         refusals: _Refusals) -> int:
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run, False)
        matches = _Matches(daemon.tracefs, named_events)
        recording = await start_recording(nursery, daemon, record)
        _namespace.bind_debug_tracing(config.mountpoint)
        _namespace.writable_ftrace_enabled()
        with _Forwarder() as forwarder:
            try:
                # close_fds=False: descriptors we inherited pass on to the command
                # (our own are close-on-exec, Python's default). Forked here, in
                # the main thread: PR_SET_PDEATHSIG fires when the *thread* that
                # forked the child ends, and trio.lowlevel.open_process forks in
                # a worker thread that trio retires after 10 s idle, which
                # killed every command running longer than that.
                process = subprocess.Popen(argv, preexec_fn=_child_setup, close_fds=False)
            except OSError as exc:
                print(f"tracefs-fuse run: {argv[0]}: {exc.strerror}", file=sys.stderr)
                await finish_recording(recording)
                terminate()
                return 127 if exc.errno == errno.ENOENT else 126
            forwarder.started(process.pid)
            status = exit_status(await _wait(process))
        await finish_recording(recording)
        for line in [*refusals.summary(), *matches.summary()]:
            print(f"tracefs-fuse: {line}", file=sys.stderr)
        terminate()  # unmount; the daemon's tasks then end by themselves
    return status


async def _wait(process: subprocess.Popen[bytes]) -> int:
    """The command's return code, awaited on a pidfd (no thread, no SIGCHLD)."""
    pidfd = os.pidfd_open(process.pid)
    try:
        await trio.lowlevel.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    return process.wait()


class _Forwarder:
    """Signal dispositions of the runner while the command runs.

    SIGINT is ignored (the terminal delivers Ctrl-C to the command as well;
    the command decides). SIGTERM and SIGHUP are passed on, also when they
    arrive while the command is being started. Plain handlers, not trio's
    receiver: a signal that lands as the command exits must not be redelivered
    to us afterwards.
    """

    FORWARDED = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._pid: int | None = None
        self._pending: list[int] = []
        self._saved: dict[int, object] = {}

    def __enter__(self) -> _Forwarder:
        self._saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in self.FORWARDED:
            self._saved[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if self._pid is None:
            self._pending.append(signum)
        else:
            os.kill(self._pid, signum)

    def started(self, pid: int) -> None:
        self._pid = pid
        for signum in self._pending:
            os.kill(pid, signum)

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


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
