"""The server of ``tracefs-fuse run`` processes (``testing/_forks.py`` has its protocol).

``python -P -m tracefs_fuse.cli._run_server FD``: FD is the session's end of
a ``SOCK_SEQPACKET`` pair. Everything a run needs is imported once, here; then
each request is a fork that calls :func:`~tracefs_fuse.cli._main.main` as
``tracefs-fuse ARGV`` would, and exits with its status.

Rules:
  * The server stays single-threaded and never enters trio: a fork of a
    process with threads or a running event loop would carry their state
    into the run (and a user namespace can only be entered by a process with
    one thread).
  * A run is what a ``tracefs-fuse run`` process is: the request's stdin,
    stdout, stderr, directory and environment; no other descriptor of ours;
    default signal dispositions (we ignore SIGINT: a Ctrl-C of the test
    session's terminal reaches us too, and the runs decide for themselves).
  * Runs die with the server (``PR_SET_PDEATHSIG``), and the server ends when
    the session's end of its socket closes, after SIGTERM to each run still
    going and reaping it.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
import sys
import threading
import traceback

from ..daemon import _daemon
from ..daemon import _run as _run_module  # imported before any fork: see module
from ..host._host_events import host_highest_event_id
from ..lib import libc
from ..testing._forks import Exited, Request, Started, receive, send
from . import _main

PR_SET_PDEATHSIG = 1


def _preload() -> None:
    """What every run would otherwise import or read again: once, here."""
    # Imports: daemon._run, above, brings in what serving needs; a fixture's
    # runs all record.
    _run_module.load_recorder()
    # A fixture's command line parsed once: argparse compiles its option
    # patterns into the re module's cache on first use.
    _main.build_parser().parse_known_args(
        ["run", "--record", os.devnull, "--events", "x", "--", "true"])
    # Facts of the host, each read once per process.
    _daemon.marker_ip()
    host_highest_event_id()
    # Everything made so far is never collected: a fork's collections then
    # leave these objects (and their pages, shared copy-on-write) alone.
    gc.freeze()


def _child(request: Request, fds: list[int]) -> None:
    """In the fork: become the run; never returns."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        # Nothing of ours beyond the three: the other runs' sockets and pidfds,
        # the control socket (a run holding it would keep the server alive).
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        sys.argv = ["tracefs-fuse", *request.argv]
        status = _main.main(request.argv)
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(status)


class _Server:
    def __init__(self, control: socket.socket) -> None:
        self._control = control
        self._poller = select.poll()
        self._poller.register(control, select.POLLIN)
        #: pidfd -> (pid, reply socket) of each run going.
        self._runs: dict[int, tuple[int, socket.socket]] = {}

    def serve(self) -> None:
        while True:
            for fd, _ in self._poller.poll():
                if fd != self._control.fileno():
                    self._reap(fd)
                elif not self._take_request():
                    self._end()
                    return

    def _take_request(self) -> bool:
        got = receive(self._control)
        if got is None:
            return False
        request, fds = got
        try:
            if not isinstance(request, Request) or len(fds) != 4:
                raise OSError(f"run server: a malformed request {request!r}")
            reply = socket.socket(fileno=fds[3])
            fds[3] = -1
            self._fork(request, fds[:3], reply)
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
        return True

    def _fork(self, request: Request, stdio: list[int], reply: socket.socket) -> None:
        assert threading.active_count() == 1, "the run server must not have threads"
        pid = os.fork()
        if pid == 0:
            _child(request, stdio)
        pidfd = os.pidfd_open(pid)
        try:
            send(reply, Started(pid=pid), [pidfd])
        except OSError:
            pass  # the session gave up on it; it is reaped all the same
        self._runs[pidfd] = (pid, reply)
        self._poller.register(pidfd, select.POLLIN)

    def _reap(self, pidfd: int) -> None:
        pid, reply = self._runs.pop(pidfd)
        self._poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        try:
            send(reply, Exited(returncode=os.waitstatus_to_exitcode(status)))
        except OSError:
            pass
        reply.close()

    def _end(self) -> None:
        self._poller.unregister(self._control)
        for pidfd in list(self._runs):
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
            except ProcessLookupError:
                pass
        while self._runs:
            for fd, _ in self._poller.poll():
                if fd in self._runs:
                    self._reap(fd)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    control = socket.socket(fileno=int(argv[0]))
    _preload()
    _Server(control).serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
