"""Test what a program emits: run it under a recording tracefs, look at the events.

Everything here goes through ``tracefs-fuse run --record FILE -- CMD`` (the
same command users run by hand), so a test gets what the command line gives:
a private tracefs at ``/sys/kernel/tracing`` for the program alone, user
events enabled the moment the program registers them, and wherever ``run``
works (as root, or as an ordinary user in a user namespace of its own) this does too.

* :func:`run` runs a command (or a Python callable, in a child process) to
  completion and returns a :class:`Run` with its :class:`EventList`.
* :func:`start` runs one in the background: :meth:`Running.wait_for` waits
  for an event (following the recording as it is written), :meth:`Running.stop`
  ends it.
* :class:`EventList` filters by name and fields and asserts with a failure
  message that lists the events that did arrive.

The pytest plugin (:mod:`tracefs_fuse.testing.pytest_plugin`) hands these to tests as
the ``user_events`` fixture.

Caveats:
  * A callable is run by reference (pickled, imported again in the child):
    it must be a module-level function, or a ``functools.partial`` of one
    with picklable arguments; lambdas and closures are refused.
  * Waiting follows the recording file with inotify: the runner writes
    batches :data:`tracefs_fuse.record.BATCH_S` apart, so an event shows up
    within about that time of being written.
"""

from __future__ import annotations

import ctypes
import fnmatch
import os
import pickle
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, Union

from ..decode import Event, Lost, read_lines, render_record
from ..lib import libc
from ._forks import RunServer, ServedProcess

#: What a recording enables when a test does not say.
DEFAULT_EVENTS = ("user_events:*",)
#: Events shown in a failure message, at most.
_SHOWN = 40
#: The runner's line about the recording; what else its summary says (refused
#: registrations, --events patterns that matched nothing) stays in ``stderr``.
_SUMMARY = re.compile(r"^tracefs-fuse: recorded \d+ events? to .*\n?", re.M)

Command = Union[Sequence[Union[str, "os.PathLike[str]"]], Callable[[], Any]]


# -- events ----------------------------------------------------------------------------

def name_matches(event: Event, pattern: str) -> bool:
    """Does ``pattern`` (a glob) name ``event``?

    It is tried on the tracepoint name and ``system:name``, and for an
    EventHeader event on its own name and ``Provider:EventName`` too, so
    ``hello``, ``user_events:hello``, ``Greeting`` and ``MyProvider:Greeting``
    all work.
    """
    names = [event.name, event.full_name]
    info = event.eventheader
    if info is not None and info.event is not None:
        names += [info.event, f"{info.provider}:{info.event}"]
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def _field_matches(expected: Any, actual: Any) -> bool:
    return bool(expected(actual)) if callable(expected) else actual == expected


def _mismatches(event: Event, fields: dict[str, Any]) -> list[str]:
    out = []
    for name, expected in fields.items():
        if name not in event.fields:
            out.append(f"no field {name}")
        elif not _field_matches(expected, event.fields[name]):
            shown = getattr(expected, "__name__", None) if callable(expected) else None
            out.append(f"{name}={event.fields[name]!r}, not "
                       f"{shown + '(...)' if shown else repr(expected)}")
    return out


def _what(pattern: str | None, fields: dict[str, Any]) -> str:
    parts = [pattern or "any event"]
    if fields:
        parts.append("with " + ", ".join(
            f"{k}={getattr(v, '__name__', '?') + '(...)' if callable(v) else repr(v)}"
            for k, v in fields.items()))
    return " ".join(parts)


class EventList(list[Event]):
    """Decoded events, oldest first, with helpers a test reads naturally.

    ``events.named("hello").where(times=2)``, ``events.one("hello")``,
    ``events.assert_event("hello", who="world")``. Field values are compared
    with ``==``; a callable is a predicate (``count=lambda n: n > 3``).
    """

    #: Events the ring buffer lost during the recording (None: uncounted).
    lost: list[Lost]

    def __init__(self, events: Iterable[Event] = (), lost: Iterable[Lost] = ()) -> None:
        super().__init__(events)
        self.lost = list(lost)

    def named(self, pattern: str) -> EventList:
        """The events ``pattern`` names (see :func:`name_matches`)."""
        return EventList((e for e in self if name_matches(e, pattern)), self.lost)

    def where(self, **fields: Any) -> EventList:
        """The events whose fields have these values."""
        return EventList((e for e in self if not _mismatches(e, fields)), self.lost)

    def matching(self, pattern: str | None = None, **fields: Any) -> EventList:
        """``named(pattern).where(**fields)``; any name when ``pattern`` is None."""
        events = self if pattern is None else self.named(pattern)
        return events.where(**fields)

    def describe(self, pattern: str | None = None, fields: dict[str, Any] | None = None) -> str:
        """The events, one line each, as ``tracefs-fuse show`` prints them; with
        a pattern, each event it names also says which fields differ."""
        if not self:
            text = "no events were recorded"
        else:
            shown = list(self) if len(self) <= _SHOWN else list(self[:_SHOWN // 2]) + [
                None] + list(self[-_SHOWN // 2:])
            lines = []
            for event in shown:
                if event is None:
                    lines.append(f"  ... {len(self) - _SHOWN} more ...")
                    continue
                line = "  " + render_record(event)
                if fields and (pattern is None or name_matches(event, pattern)):
                    line += "\n    -> " + ("; ".join(_mismatches(event, fields)) or "matches")
                lines.append(line)
            text = f"{len(self)} event{'s' * (len(self) != 1)} recorded:\n" + "\n".join(lines)
        lost = sum(record.count or 0 for record in self.lost)
        if self.lost:
            text += f"\n({lost or 'some'} more were lost: the ring buffer overflowed)"
        return text

    def one(self, pattern: str | None = None, **fields: Any) -> Event:
        """The only event matching; AssertionError if there are none or several."""
        __tracebackhide__ = True
        found = self.matching(pattern, **fields)
        if len(found) != 1:
            raise AssertionError(f"expected exactly one event {_what(pattern, fields)}, "
                                 f"found {len(found)}\n{self.describe(pattern, fields)}")
        return found[0]

    def assert_event(self, pattern: str | None = None, **fields: Any) -> Event:
        """The first event matching; AssertionError listing the events if none."""
        __tracebackhide__ = True
        found = self.matching(pattern, **fields)
        if not found:
            raise AssertionError(f"no event {_what(pattern, fields)}\n"
                                 f"{self.describe(pattern, fields)}")
        return found[0]

    def assert_no_event(self, pattern: str | None = None, **fields: Any) -> None:
        """AssertionError, listing them, if any event matches."""
        __tracebackhide__ = True
        found = self.matching(pattern, **fields)
        if found:
            raise AssertionError(f"{len(found)} unexpected event(s) {_what(pattern, fields)}\n"
                                 f"{found.describe()}")


# -- a finished run --------------------------------------------------------------------

class RunFailed(AssertionError):
    """The command (or the runner) exited non-zero, or the callable raised."""


class Run:
    """A command that ran under a recording tracefs.

    Attributes:
        command: what ran (for a callable, the child's command line).
        returncode: its exit status (128+N if signal N killed it).
        stdout, stderr: what it printed (the runner's summary line removed).
        events: everything it emitted that the recording enabled.
        result: a callable's return value (None for commands).
    """

    def __init__(self, command: list[str], returncode: int, stdout: str, stderr: str,
                 events: EventList, result: Any = None) -> None:
        self.command = command
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.events = events
        self.result = result

    def __repr__(self) -> str:
        return (f"<Run {self.command!r} returncode={self.returncode} "
                f"events={len(self.events)}>")

    def check(self) -> Run:
        """Raise :class:`RunFailed` unless the command exited with 0."""
        __tracebackhide__ = True
        if self.returncode != 0:
            raise RunFailed(f"{self.command!r} exited with {self.returncode}\n"
                            f"--- stderr ---\n{self.stderr}--- {self.events.describe()}")
        return self


class TracefsFuseUnavailable(RunFailed):
    """tracefs-fuse itself could not start (no FUSE, no namespaces, ...), so
    the command never ran. The pytest plugin can skip instead of failing
    (``--user-events-skip-unavailable``, or ``user_events_skip_unavailable =
    true`` in the ini file).

    Attributes:
        reason: what ``tracefs-fuse run`` said was wrong, in one line.
    """

    def __init__(self, command: list[str], reason: str, stderr: str) -> None:
        self.command = command
        self.reason = reason
        super().__init__(
            f"tracefs-fuse could not start: {reason}\n"
            f"(so {command!r} did not run; to skip such tests instead, give pytest "
            f"--user-events-skip-unavailable or set user_events_skip_unavailable = true in "
            f"its ini file)\n--- stderr ---\n{stderr}")


#: How ``tracefs-fuse run`` says that it failed itself (and exits 1).
_RUNNER_SAYS = "tracefs-fuse run: "


def runner_failure(returncode: int, stderr: str) -> str | None:
    """Why ``tracefs-fuse run`` failed itself, if that is why it exited."""
    if returncode != 1:
        return None
    return next((line.removeprefix(_RUNNER_SAYS) for line in stderr.splitlines()
                 if line.startswith(_RUNNER_SAYS)), None)


# -- following a recording as it is written ---------------------------------------------

_IN_MODIFY = 0x2
_IN_CLOSE_WRITE = 0x8


class _Recording:
    """The record file of a running command, read as lines are completed.

    Its inotify instance is made only for :meth:`Running.wait_for`: closing
    one waits for an SRCU grace period (some 10 ms), which a test that only
    waits for the command's end need not pay.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_bytes(b"")
        self._offset = 0
        self._partial = b""
        self.events = EventList()
        self._inotify: int | None = None

    @property
    def inotify(self) -> int:
        """An fd readable when the file was written to (since the last :meth:`read`)."""
        if self._inotify is None:
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            if libc.inotify_add_watch(fd, os.fsencode(self.path),
                                      _IN_MODIFY | _IN_CLOSE_WRITE) < 0:
                os.close(fd)
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {self.path}")
            self._inotify = fd
        return self._inotify

    def read(self) -> EventList:
        """Take in what was written since the last call; every event so far."""
        if self._inotify is not None:
            try:
                while os.read(self._inotify, 4096):
                    pass
            except BlockingIOError:
                pass
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        data = self._partial + data
        complete, _, self._partial = data.rpartition(b"\n")
        for record in read_lines(complete):
            if isinstance(record, Lost):
                self.events.lost.append(record)
            else:
                self.events.append(record)
        return self.events

    def close(self) -> None:
        if self._inotify is not None:
            os.close(self._inotify)


# -- running ---------------------------------------------------------------------------

def _callable_command(function: Callable[[], Any], workdir: Path) -> tuple[list[str], Path]:
    """The command that runs ``function`` in a child, and where its result goes."""
    try:
        pickled = pickle.dumps(function)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(f"{function!r} cannot run in a child: it must be importable "
                        f"(a module-level function, or a functools.partial of one): "
                        f"{exc}") from None
    fd, name = tempfile.mkstemp(prefix="call-", suffix=".pickle", dir=workdir)
    with os.fdopen(fd, "wb") as f:
        f.write(pickled)
    call = Path(name)
    result = call.with_suffix(".result")
    return [sys.executable, "-P", "-m", "tracefs_fuse.testing._call", str(call),
            str(result)], result


#: How a callable's child learns this interpreter's import path: not through
#: PYTHONPATH, which would reach the runner too (and a checkout's unbuilt
#: source tree could then shadow the installed package there).
CALL_PATH = "TRACEFS_FUSE_CALL_PATH"


def _child_env(env: dict[str, str] | None) -> dict[str, str]:
    """The environment of a callable's child: this interpreter's import path."""
    env = dict(os.environ if env is None else env)
    env[CALL_PATH] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    return env


def _without_summary(stderr: str) -> str:
    found = list(_SUMMARY.finditer(stderr))
    if not found:
        return stderr
    return stderr[:found[-1].start()] + stderr[found[-1].end():]


class Running:
    """A command running under a recording tracefs (see :func:`start`)."""

    def __init__(self, command: Command, *, events: Sequence[str], options: Sequence[str],
                 env: dict[str, str] | None, cwd: str | os.PathLike[str] | None,
                 workdir: Path, owned: bool, server: RunServer | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        #: A temporary directory of our own, removed when the command ends.
        self._owned = workdir if owned else None
        self._result: Path | None = None
        if callable(command):
            argv, self._result = _callable_command(command, workdir)
            env = _child_env(env)
        else:
            argv = [os.fspath(arg) for arg in command]
        self.command = argv
        fd, name = tempfile.mkstemp(prefix="record-", suffix=".jsonl", dir=workdir)
        os.close(fd)
        self._recording = _Recording(Path(name))
        self._stdout = tempfile.TemporaryFile()
        self._stderr = tempfile.TemporaryFile()
        # -P: the installed package, whatever the directory (a checkout's source
        # tree has no native bridge).
        runner = [sys.executable, "-P", "-m", "tracefs_fuse", "run", "--record", name,
                  # The default unsaid: run's summary names the patterns one gave
                  # that matched nothing, and a test that says none gave none.
                  *(arg for pattern in (() if tuple(events) == DEFAULT_EVENTS else events)
                    for arg in ("--events", pattern)),
                  *options, "--", *argv]
        self.process: subprocess.Popen[bytes] | ServedProcess
        if server is None:
            self.process = subprocess.Popen(runner, stdin=subprocess.DEVNULL,
                                            stdout=self._stdout, stderr=self._stderr,
                                            env=env, cwd=cwd)
            self._pidfd = os.pidfd_open(self.process.pid)
        else:
            with open(os.devnull, "rb") as stdin:
                self.process = server.spawn(runner[4:], env=env, cwd=cwd,
                                            stdin=stdin.fileno(),
                                            stdout=self._stdout.fileno(),
                                            stderr=self._stderr.fileno())
            self._pidfd = self.process.pidfd
        self._run: Run | None = None

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._run is None:
            self.stop()

    @property
    def events(self) -> EventList:
        """The events recorded so far."""
        return self._recording.read()

    def wait_for(self, pattern: str | None = None, *, timeout: float = 10.0,
                 **fields: Any) -> Event:
        """The first event (so far, or yet to come) that matches.

        Raises:
            AssertionError: none came within ``timeout`` seconds, or the command
                ended without one; the message lists the events that did.
        """
        __tracebackhide__ = True
        deadline = time.monotonic() + timeout
        watch = self._recording.inotify  # before the first read: no write goes unseen
        while True:
            exited = self.process.poll() is not None
            found = self._recording.read().matching(pattern, **fields)
            if found:
                return found[0]
            events = self._recording.events
            if exited:
                self.wait(None, check=False)  # TracefsFuseUnavailable if it never ran
                raise AssertionError(
                    f"{self.command!r} exited ({self.process.returncode}) without an event "
                    f"{_what(pattern, fields)}\n{events.describe(pattern, fields)}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"no event {_what(pattern, fields)} within {timeout} s\n"
                    f"{events.describe(pattern, fields)}")
            select.select([watch, self._pidfd], [], [], remaining)

    def wait(self, timeout: float | None = 60.0, *, check: bool = True) -> Run:
        """Wait for the command to end; its :class:`Run`.

        Raises:
            TracefsFuseUnavailable: tracefs-fuse could not start (with or
                without ``check``: the command never ran).
            RunFailed: with ``check``, if it exited non-zero.
            subprocess.TimeoutExpired: it is still running after ``timeout`` s
                (it keeps running; :meth:`stop` ends it).
        """
        __tracebackhide__ = True
        if self._run is None:
            self.process.wait(timeout)
            self._run = self._finish()
        reason = runner_failure(self._run.returncode, self._run.stderr)
        if reason is not None:
            raise TracefsFuseUnavailable(self.command, reason, self._run.stderr)
        return self._run.check() if check else self._run

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> Run:
        """Send ``sig`` (the runner passes it on to the command), wait, and
        return the :class:`Run` without checking its status."""
        if self._run is None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.wait(None, check=False)

    def _finish(self) -> Run:
        events = self._recording.read()
        self._recording.close()
        if isinstance(self.process, ServedProcess):
            self.process.close()
        else:
            os.close(self._pidfd)
        outputs = []
        for stream in (self._stdout, self._stderr):
            stream.seek(0)
            outputs.append(stream.read().decode("utf-8", "backslashreplace"))
            stream.close()
        result = None
        if self._result is not None and self._result.exists():
            result = pickle.loads(self._result.read_bytes())
        if self._owned is not None:
            shutil.rmtree(self._owned, ignore_errors=True)
        returncode = self.process.returncode
        assert returncode is not None  # waited for
        return Run(self.command, returncode, outputs[0],
                   _without_summary(outputs[1]), events, result)


def start(command: Command, *, events: Sequence[str] = DEFAULT_EVENTS,
          options: Sequence[str] = (), env: dict[str, str] | None = None,
          cwd: str | os.PathLike[str] | None = None,
          workdir: str | os.PathLike[str] | None = None,
          server: RunServer | None = None) -> Running:
    """Start ``command`` under a recording tracefs, in the background.

    Args:
        command: argv (the program and its arguments), or a callable to run
            in a child Python process.
        events: what to enable as it is registered (``run --events``).
        options: more ``tracefs-fuse run`` options (``--buffer-size-kb``, ...).
        env, cwd: the command's environment and directory.
        workdir: where the recording and a callable's files go (default: a
            new temporary directory).
        server: the :class:`RunServer` that forks the runner (the pytest
            fixture's, one per session); by default a ``tracefs-fuse run``
            process is started.
    """
    owned = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="tracefs-fuse-") if workdir is None else workdir)
    return Running(command, events=events, options=options, env=env, cwd=cwd,
                   workdir=directory, owned=owned, server=server)


def run(command: Command, *, events: Sequence[str] = DEFAULT_EVENTS,
        options: Sequence[str] = (), env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, timeout: float = 60.0,
        check: bool = True, workdir: str | os.PathLike[str] | None = None,
        server: RunServer | None = None) -> Run:
    """Run ``command`` to its end under a recording tracefs; its :class:`Run`.

    Arguments are :func:`start`'s, and:

    Args:
        timeout: seconds before the command is stopped (SIGTERM) and
            ``subprocess.TimeoutExpired`` raised.
        check: raise :class:`RunFailed` if it exits non-zero (a callable
            that raised exits 1, its traceback in the message).
    """
    __tracebackhide__ = True
    running = start(command, events=events, options=options, env=env, cwd=cwd,
                    workdir=workdir, server=server)
    try:
        return running.wait(timeout, check=check)
    except subprocess.TimeoutExpired:
        running.stop()
        raise
