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
import errno
import functools
import logging
import os
import signal
import subprocess
import sys
from typing import BinaryIO

import trio

from ..fuse._session import terminate
from ..host import _environment, _namespace
from ..lib import check, libc
from ..process._budget import restore_fd_limit
from ..process._memory import read_stat
from ..record._recording import finish_recording, start_recording
from ._config import MountConfig
from ._daemon import Daemon

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
#: include/uapi/linux/prctl.h: orphaned descendants are reparented to us.
PR_SET_CHILD_SUBREAPER = 36


def _child_setup(fd_limit: int) -> None:
    # Ignored signals stay ignored across exec: give the command the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The daemon raised its own; the command gets the limit we were given.
    restore_fd_limit(fd_limit)


def exit_status(returncode: int) -> int:
    """A shell's ``$?`` for a child's return code (negative: killed by a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def run_in_namespace(config: MountConfig, argv: list[str],
                     record: tuple[BinaryIO, str] | None = None) -> int:
    """Enter the namespaces, serve, run ``argv``; its exit status, or 1.

    Environment problems (no ``/dev/fuse``, namespaces refused, …) are said in
    one line on stderr before anything is mounted. ``record``: a file (opened
    before the namespaces are entered) and the patterns of what to record.
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
        return trio.run(_run, config, argv, record)
    except Exception as exc:
        log.debug("run failed", exc_info=True)
        print(f"tracefs-fuse run: {_environment.one_line(exc)}", file=sys.stderr)
        return 1


def _replace_mountpoint(config: MountConfig, mountpoint: str) -> MountConfig:
    import msgspec

    return msgspec.structs.replace(config, mountpoint=mountpoint)


async def _run(config: MountConfig, argv: list[str], record: tuple[BinaryIO, str] | None) -> int:
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run, False)
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
                process = subprocess.Popen(argv, preexec_fn=functools.partial(
                    _child_setup, daemon.fd_limit), close_fds=False)
            except OSError as exc:
                print(f"tracefs-fuse run: {argv[0]}: {exc.strerror}", file=sys.stderr)
                await finish_recording(recording)
                terminate()
                return 127 if exc.errno == errno.ENOENT else 126
            forwarder.started(process.pid)
            status = exit_status(await _wait(process))
        left = await _end_leftovers()
        if left:
            log.info("ended %d process(es) the command left running", left)
        await finish_recording(recording)
        terminate()  # unmount; the daemon's tasks then end by themselves
    return status


def _children() -> list[int]:
    """Our children now (the command's leftovers, reparented to us)."""
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
