"""``tracefs-fuse run -- CMD``: the daemon and one command, in a private namespace.

Rules:
  * The command is our child, in our process group, with default signal
    dispositions. Ctrl-C reaches it from the terminal, and we wait for it to
    decide; a SIGINT sent to us alone (``kill -INT``) is passed on to it, as
    ``timeout`` does, and so are SIGTERM and SIGHUP.
  * However the command ends, we unmount and exit with its status (128+N if a
    signal N killed it). If the daemon fails while the command runs, the
    command is killed (its tracefs is gone) and we exit 1 with the reason.
  * The command gets ``PR_SET_PDEATHSIG`` = SIGKILL: if we are killed, it does
    not run on against a dead mount.
  * After the command, the summary on stderr (after ``--record``'s line) names
    what the user must know without ``--log-level info``: every registration
    refused (:class:`_Refusals`; at ``info`` the log names each already) and
    every ``--events`` pattern that matched no user event (:class:`_Matches`).
  * Nothing of the command outlives us (issue 19 item 7): beneath our mount
    lies the host's real tracefs (``_namespace``), which a process left
    behind would see once we unmount. We are a child subreaper, so whatever
    the command leaves running (a double fork, ``setsid``, ``nohup``) becomes
    our child when its parent exits; once the command has exited, every such
    process is killed (SIGKILL, until none is left) and reaped, before we
    unmount.

Caveats:
  * If ``run`` itself is SIGKILLed, the command dies with it (pdeathsig) but
    its leftovers are reparented outside: the dead mount still covers the
    host's tracefs, but root of the namespace could unmount it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import signal
import struct
import sys
from typing import TYPE_CHECKING, BinaryIO

import trio

from ..fuse._session import serving, terminate
from ..host import _environment, _namespace
from ..engine import EnablePattern, Tracefs
from ..engine._events import TraceEvent
from ..engine._uapi import USER_EVENTS_MULTI_SYSTEM, USER_EVENTS_SYSTEM
from ..lib import check, libc
from ..perf._interception import Interception
from ..perf._service import PerfService
from ..process._memory import read_stat
from ._config import MountConfig
from ._daemon import Daemon
from ._logging import bug_line, is_bug

if TYPE_CHECKING:
    from ..record._recording import Recording

log = logging.getLogger(__name__)

#: include/uapi/linux/prctl.h: orphaned descendants are reparented to us.
PR_SET_CHILD_SUBREAPER = 36


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
    # Blocked while we are the only thread, so every thread started later has
    # it blocked too: it is only ever read from the signalfd (_Interrupts).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return _run_in_namespace(config, argv, record, named_events)
    finally:
        # A SIGINT that came after _Interrupts stopped reading (the command had
        # ended; a Ctrl-C reaches the whole group) was the command's too: taken
        # here, never raised as KeyboardInterrupt once unblocked.
        while signal.sigtimedwait({signal.SIGINT}, 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _run_in_namespace(config: MountConfig, argv: list[str], record: tuple[BinaryIO, str] | None,
                      named_events: tuple[str, ...]) -> int:
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
        if is_bug(exc):
            print(f"tracefs-fuse run: {bug_line(exc)}", file=sys.stderr)
        else:
            log.debug("run failed", exc_info=True)
            print(f"tracefs-fuse run: {_environment.one_line(exc)}", file=sys.stderr)
        return 1


def _replace_mountpoint(config: MountConfig, mountpoint: str) -> MountConfig:
    import msgspec

    return msgspec.structs.replace(config, mountpoint=mountpoint)


async def _run(config: MountConfig, argv: list[str], record: tuple[BinaryIO, str] | None,
               named_events: tuple[str, ...]) -> int:
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    with _Refusals() as refusals:
        return await _serve_and_run(config, argv, record, named_events, refusals)


async def _serve_and_run(config: MountConfig, argv: list[str],
                         record: tuple[BinaryIO, str] | None, named_events: tuple[str, ...],
                         refusals: _Refusals) -> int:
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run, False)
        matches = _Matches(daemon.tracefs, named_events)
        recording = await _start_recording(nursery, daemon, record)
        _namespace.bind_debug_tracing(config.mountpoint)
        _namespace.writable_ftrace_enabled()
        _namespace.list_tracefs()
        perf = Interception()  # perf_event_open for our events (docs/perf.md)
        with _Forwarder() as forwarder:
            interrupts = trio.CancelScope()  # entered by the task, cancelled at the end
            nursery.start_soon(_Interrupts(forwarder, interrupts).run)
            try:
                # Descriptors we inherited pass on to the command (our own are
                # close-on-exec, Python's default); ignored signals stay ignored,
                # SIGINT is the command's as usual, it dies with us
                # (PR_SET_PDEATHSIG), its RLIMIT_NOFILE is the one we were given
                # (the daemon raised its own), perf_event_open is filtered: all
                # in C between vfork and exec (perf/_supervisor.c), no Python in
                # the child. Started here, in the main thread: PR_SET_PDEATHSIG
                # fires when the *thread* that forked the child ends, and
                # trio.lowlevel.open_process forks in a worker thread that trio
                # retires after 10 s idle, which killed every command running
                # longer than that.
                pid = perf.spawn(argv, daemon.fd_limit)
            except OSError as exc:
                print(f"tracefs-fuse run: {argv[0]}: {exc.strerror}", file=sys.stderr)
                interrupts.cancel()
                await _finish_recording(recording)
                terminate()
                return 127 if exc.errno == errno.ENOENT else 126
            forwarder.started(pid)
            perf.start(PerfService(daemon.engine, config.mountpoint, daemon.control_task,
                                   daemon.engine_changed))
            status = exit_status(await _wait(pid))
            forwarder.ended()  # before any other task runs: one may be about to pass one on
            interrupts.cancel()
        left = await _end_leftovers()
        if left:
            log.info("ended %d process(es) the command left running", left)
        await perf.stop()  # after the leftovers: none of them is left waiting on it
        await _finish_recording(recording)
        for line in [*refusals.summary(), *matches.summary()]:
            print(f"tracefs-fuse: {line}", file=sys.stderr)
        if not serving():
            print("tracefs-fuse run: the mount ended before the command did (its FUSE "
                  "connection was aborted, /sys/fs/fuse/connections/N/abort); the command "
                  "saw ENOTCONN from then on", file=sys.stderr)
        terminate()  # unmount; the daemon's tasks then end by themselves
    return status


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


def _children() -> list[int]:
    """Our children now (the command's leftovers, reparented to us).

    Each thread's ``children`` file (CONFIG_PROC_CHILDREN) lists what that
    thread forked or was handed as a reaper: a few reads, where a scan of
    ``/proc`` reads every process's ``stat``. The file can miss a child that
    comes or goes while it is read: the caller repeats until a pass finds none.
    """
    try:
        threads = os.listdir("/proc/self/task")
        found = []
        for tid in threads:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                found += [int(pid) for pid in f.read().split()]
        return found
    except FileNotFoundError:
        return _children_by_scan()


def _children_by_scan() -> list[int]:
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            facts = read_stat(int(name))
            if facts is not None and facts.ppid == me:
                found.append(int(name))
    return found


async def _end_leftovers() -> int:
    """Kill and reap every process the command left behind; how many.

    Repeated until none is left: a leftover's own children become ours as it dies.
    """
    ended = 0
    while pids := _children():
        for pid in pids:
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                await trio.lowlevel.wait_readable(pidfd)
            finally:
                os.close(pidfd)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            ended += 1
    return ended


async def _wait(pid: int) -> int:
    """The command's return code (negative: killed by that signal), awaited on
    a pidfd (no thread, no SIGCHLD)."""
    pidfd = os.pidfd_open(pid)
    try:
        await trio.lowlevel.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


class _Forwarder:
    """Signals for the command, passed on while it runs.

    SIGTERM and SIGHUP are passed on, also when they arrive while the command
    is being started. Plain handlers, not trio's receiver: a signal that lands
    as the command exits must not be redelivered to us afterwards. SIGINT
    comes through :class:`_Interrupts`.
    """

    FORWARDED = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._pid: int | None = None
        self._ended = False
        self._pending: list[int] = []
        self._saved: dict[int, object] = {}

    def __enter__(self) -> _Forwarder:
        for signum in self.FORWARDED:
            self._saved[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        self.forward(signum)

    @property
    def running(self) -> bool:
        return self._pid is not None

    def forward(self, signum: int) -> None:
        if self._pid is None:
            self._pending.append(signum)
        elif not self._ended:
            os.kill(self._pid, signum)

    def ended(self) -> None:
        """The command was reaped: its pid is not its own any more."""
        self._ended = True

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


class _Interrupts:
    """SIGINT, read from a signalfd, passed on unless the terminal sent it.

    Ctrl-C makes the terminal signal its whole foreground process group, the
    command included, with ``si_code`` SI_KERNEL (``n_tty``'s ``isig()``
    sends it privileged): the command has it already and decides. Any other
    SIGINT was sent to us (``kill -INT``; SI_USER) and is passed on, as
    ``timeout`` does; so is one from the terminal before the command ran.
    """

    #: <uapi/asm-generic/siginfo.h>
    SI_KERNEL = 0x80
    #: struct signalfd_siginfo { __u32 ssi_signo; __s32 ssi_errno; __s32 ssi_code; ...
    #: 128 bytes in all.
    SIGINFO = struct.Struct("<Iii")
    SIGINFO_SIZE = 128
    SFD_NONBLOCK = os.O_NONBLOCK
    SFD_CLOEXEC = os.O_CLOEXEC

    def __init__(self, forwarder: _Forwarder, scope: trio.CancelScope) -> None:
        self._forwarder = forwarder
        self._scope = scope

    @classmethod
    def _open(cls) -> int:
        mask = (ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong))))()
        mask[0] = 1 << (signal.SIGINT - 1)  # sigaddset()
        return check(libc.signalfd(-1, ctypes.byref(mask), cls.SFD_NONBLOCK | cls.SFD_CLOEXEC),
                     "signalfd")

    async def run(self) -> None:
        """Pass SIGINT on until the scope is cancelled (the command ended)."""
        fd = self._open()
        try:
            with self._scope:
                await self._pass_on(fd)
        finally:
            os.close(fd)

    async def _pass_on(self, fd: int) -> None:
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                info = os.read(fd, self.SIGINFO_SIZE)
            except BlockingIOError:
                continue
            _, _, code = self.SIGINFO.unpack_from(info)
            if code != self.SI_KERNEL or not self._forwarder.running:
                self._forwarder.forward(signal.SIGINT)
