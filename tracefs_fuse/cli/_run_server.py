"""The server of ``tracefs-fuse run`` processes (``testing/_forks.py`` has its protocol).

``python -P -m tracefs_fuse.cli._run_server FD``: FD is the session's end of
a ``SOCK_SEQPACKET`` pair. Everything a run needs is imported once, here; then
each request is taken by a fork made before it came (the *spare*, which has
its fork and its copy-on-write faults behind it: ``_warm_pages.py``), which
calls :func:`~tracefs_fuse.cli._main.main` as ``tracefs-fuse ARGV`` would,
says ``Exited`` and exits with its status. A new spare is forked as soon as
one is taken: its start overlaps the run's.

Rules:
  * The server stays single-threaded and never enters trio: a fork of a
    process with threads or a running event loop would carry their state
    into the run (and a user namespace can only be entered by a process with
    one thread).
  * A run is what a ``tracefs-fuse run`` process is: the request's stdin,
    stdout, stderr, directory and environment; no other descriptor of ours
    (its reply socket is close-on-exec); default signal dispositions (we
    ignore SIGINT: a Ctrl-C of the test session's terminal reaches us too,
    and the runs decide for themselves). A spare does nothing before its
    request that a test could see: it reads no file of the host and enters
    no namespace (the host's mounts are copied when the run starts, not
    before), only closes our descriptors and copies pages.
  * Runs die with the server (``PR_SET_PDEATHSIG``), and the server ends when
    the session's end of its socket closes, after SIGTERM to each run still
    going and reaping it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
import traceback

from ..daemon import _daemon
from ..daemon import _run_serving  # imported before any fork: see module
from ..host._host_events import host_highest_event_id
from ..lib import libc
from ..testing._forks import Exited, Request, Started, receive, send
from . import _main
from ._warm_pages import WarmPages

PR_SET_PDEATHSIG = 1


def _preload() -> WarmPages:
    """What every run would otherwise import or read again: once, here."""
    # Imports: daemon._run_serving, above, brings in what serving needs; a
    # fixture's runs all record.
    _run_serving.load_recorder()
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
    return WarmPages()


def _spare(link: socket.socket, warm: WarmPages) -> None:
    """In a fork made before its request: wait for it on ``link``, become the
    run; never returns."""
    status = 1
    reply: socket.socket | None = None
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # Nothing of ours but the link: not the other runs' sockets and pidfds,
        # nor the control socket (a run holding it would keep the server alive).
        os.closerange(3, link.fileno())
        os.closerange(link.fileno() + 1, os.sysconf("SC_OPEN_MAX"))
        warm.populate()
        got = receive(link)
        if got is None:  # the server ended before it needed us
            os._exit(0)
        link.close()
        request, fds = got
        assert isinstance(request, Request)  # checked by the server
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds[:3]:
            os.close(fd)
        # Ours alone, never the command's (received descriptors are inheritable).
        os.set_inheritable(fds[3], False)
        reply = socket.socket(fileno=fds[3])
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
        # Said before we exit: the command and all it left are reaped, the
        # mount is gone, the output and the recording are written; what is
        # left, the process's own end (its memory, threads and namespaces,
        # 3 ms), is no test's business.
        if reply is not None:
            try:
                send(reply, Exited(returncode=status & 0xFF))
            except OSError:
                pass  # the test gave up on it
            with contextlib.suppress(OSError):
                warm.learn()
        os._exit(status)


class _Spare:
    """A fork of the server made before its request (its fork and first
    page faults are then behind the test that sends it)."""

    def __init__(self, warm: WarmPages) -> None:
        assert threading.active_count() == 1, "the run server must not have threads"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            _spare(theirs, warm)
        theirs.close()
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.link = ours

    def close(self) -> None:
        """End it unused (it exits when its link closes) and reap it."""
        self.link.close()
        os.waitpid(self.pid, 0)
        os.close(self.pidfd)


class _Server:
    def __init__(self, control: socket.socket, warm: WarmPages) -> None:
        self._control = control
        self._warm = warm
        self._poller = select.poll()
        self._poller.register(control, select.POLLIN)
        #: pidfd -> (pid, reply socket) of each run going.
        self._runs: dict[int, tuple[int, socket.socket]] = {}
        self._spare = _Spare(warm)

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
            self._hand_over(request, fds)
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def _hand_over(self, request: Request, fds: list[int]) -> None:
        """The spare becomes the run; another spare is made for the next."""
        spare = self._spare
        reply = socket.socket(fileno=os.dup(fds[3]))
        # Started first: the run's own Exited must not come before it.
        try:
            send(reply, Started(pid=spare.pid), [spare.pidfd])
        except OSError:
            pass  # the session gave up on it; it runs and is reaped all the same
        try:
            send(spare.link, request, fds)
        except OSError:
            pass  # the spare died (killed): the reaping says so
        spare.link.close()
        self._runs[spare.pidfd] = (spare.pid, reply)
        self._poller.register(spare.pidfd, select.POLLIN)
        self._spare = _Spare(self._warm)

    def _reap(self, pidfd: int) -> None:
        pid, reply = self._runs.pop(pidfd)
        self._poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        # The run said so itself unless it died first (killed): the test takes
        # the first Exited.
        try:
            send(reply, Exited(returncode=os.waitstatus_to_exitcode(status)))
        except OSError:
            pass
        reply.close()

    def _end(self) -> None:
        self._poller.unregister(self._control)
        self._spare.close()
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
    _Server(control, _preload()).serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
