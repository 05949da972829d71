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

Start-up (issue 21):
  * The command starts as soon as our mount exists, before the daemon is
    loaded: we mount with mount(2) ourselves (``host/_fuse_mount.py``), start
    the command, and load the serving side (trio, pyfuse3, the daemon: most
    of a run's start-up) on a thread meanwhile (:class:`_Loading`). The
    kernel holds whatever the command asks of the mount until the daemon
    reads it, so the command sees the same tracefs as if it had waited.
  * A command that ends before the daemon is loaded never asked the mount
    anything (it would still be waiting): its leftovers are ended, the
    connection closed unanswered, and no daemon runs at all, unless ``--record`` was given
    (the recording is the daemon's to write: it is loaded and runs as usual).

Caveats:
  * If ``run`` itself is SIGKILLed, the command dies with it (pdeathsig) but
    its leftovers are reparented outside: the dead mount still covers the
    host's tracefs, but root of the namespace could unmount it.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import threading
from typing import BinaryIO, Callable

from ..host import _environment, _namespace
from ..host._fuse_mount import mount_fuse
from ..host._host_events import tracing_dirs_beneath
from ..host._mountinfo import FSNAME, FSTYPE
from ..lib import check, libc
from ..perf._interception import Interception
from ._command import Command, Forwarder, Interrupts, end_leftovers
from ._config import MountConfig
from ._mount_options import kernel_mount

#: ``_run_serving.serve_and_run``, once loaded.
ServeAndRun = Callable[[MountConfig, int, Command, "tuple[BinaryIO, str] | None",
                        "tuple[str, ...]"], int]

log = logging.getLogger(__name__)

#: include/uapi/linux/prctl.h: orphaned descendants are reparented to us.
PR_SET_CHILD_SUBREAPER = 36


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
    # it blocked too: it is only ever read from the signalfd (Interrupts).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return _run_in_namespace(config, argv, record, named_events)
    finally:
        # A SIGINT that came after Interrupts stopped reading (the command had
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
    beneath = tracing_dirs_beneath()
    try:
        device = mount_fuse(FSNAME, mountpoint, FSTYPE, *kernel_mount(config))
    except OSError as exc:
        _close_all(beneath)
        print(f"tracefs-fuse run: cannot mount our tracefs at {mountpoint}: "
              f"{_environment.one_line(exc)}", file=sys.stderr)
        return 1
    try:
        _namespace.bind_debug_tracing(mountpoint)
        _namespace.writable_ftrace_enabled()
        _namespace.list_tracefs()
        check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    except OSError as exc:
        print(f"tracefs-fuse run: {_environment.one_line(exc)}", file=sys.stderr)
        return _unserved(device, 1, beneath)
    with Forwarder() as forwarder, Interrupts(forwarder) as interrupts:
        command = _start(argv, forwarder, interrupts)
        if isinstance(command, int):
            return _unserved(device, command, beneath)
        loading = _Loading(beneath)
        loading.start()
        if command.ends_before(loading.fd) and record is None:
            status = command.reap()
            command.close()
            end_leftovers(loading.tid)
            for text in named_events:  # nothing was registered: no pattern matched
                print(f"tracefs-fuse: --events {text!r} matched no user event", file=sys.stderr)
            return _unserved(device, status)
        try:
            serve_and_run = loading.result()
        except Exception as exc:
            command.kill()
            print(f"tracefs-fuse run: {_environment.one_line(exc)}", file=sys.stderr)
            return _unserved(device, 1)
        return serve_and_run(config, device, command, record, named_events)


def _replace_mountpoint(config: MountConfig, mountpoint: str) -> MountConfig:
    import msgspec

    return msgspec.structs.replace(config, mountpoint=mountpoint)


def _start(argv: list[str], forwarder: Forwarder, interrupts: Interrupts) -> Command | int:
    """The command, started; or the exit status that says why it was not
    (said on stderr: 127 not found, 126 not executable)."""
    interrupts.pass_on()  # one from the terminal before the command was ours to tell
    perf = Interception()  # perf_event_open for our events (docs/perf.md)
    try:
        # Descriptors we inherited pass on to the command (our own are
        # close-on-exec, Python's default); ignored signals stay ignored,
        # SIGINT is the command's as usual, it dies with us
        # (PR_SET_PDEATHSIG), its RLIMIT_NOFILE is the one we were given
        # (the daemon raises its own later), perf_event_open is filtered: all
        # in C between vfork and exec (perf/_supervisor.c), no Python in the
        # child. Started here, in the main thread: PR_SET_PDEATHSIG fires when
        # the *thread* that forked the child ends, and
        # trio.lowlevel.open_process forks in a worker thread that trio
        # retires after 10 s idle, which killed every command running longer
        # than that.
        pid = perf.spawn(argv, _soft_fd_limit())
    except OSError as exc:
        print(f"tracefs-fuse run: {argv[0]}: {exc.strerror}", file=sys.stderr)
        perf.close()
        return 127 if exc.errno == errno.ENOENT else 126
    forwarder.started(pid)
    return Command(pid, perf, perf.listener(), forwarder, interrupts)


def _soft_fd_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _unserved(device: int, status: int, beneath: tuple[int, ...] = ()) -> int:
    """End the connection nobody served; ``status``. Its dead mount goes with
    the namespace, as we exit (never before: it covers what lies beneath)."""
    _close_all((device, *beneath))
    return status


def _close_all(fds: tuple[int, ...]) -> None:
    for fd in fds:
        os.close(fd)


class _Loading:
    """The serving side (``_run_serving``: trio, pyfuse3, the daemon), imported
    on a thread while the command starts, and the host's event ids read there
    through the directories our mount covers (``beneath``; their
    descriptors are closed once read)."""

    def __init__(self, beneath: tuple[int, ...]) -> None:
        self._beneath = beneath
        #: Readable once loading is done.
        self.fd = os.eventfd(0, os.EFD_CLOEXEC)
        self._serve_and_run: ServeAndRun | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._load, name="tracefs-fuse load",
                                        daemon=True)

    def start(self) -> None:
        if f"{__package__}._run_serving" in sys.modules:
            self._load()  # a run server's fork: loaded already, a thread would only cost
        else:
            self._thread.start()

    @property
    def tid(self) -> int | None:
        """The loading thread's id while it runs (None: loaded without one)."""
        return self._thread.native_id

    def _load(self) -> None:
        try:
            from . import _run_serving

            _run_serving.load(tuple(f"/proc/self/fd/{fd}" for fd in self._beneath))
            self._serve_and_run = _run_serving.serve_and_run
        except Exception as exc:
            self._error = exc
        finally:
            _close_all(self._beneath)
            os.eventfd_write(self.fd, 1)

    def result(self) -> ServeAndRun:
        """The serving side's entry, once loaded.

        Raises:
            Exception: what loading it raised.
        """
        if self._thread.ident is not None:
            self._thread.join()
        os.close(self.fd)
        if self._error is not None:
            raise self._error
        assert self._serve_and_run is not None
        return self._serve_and_run
