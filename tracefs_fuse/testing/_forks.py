"""A server of ``tracefs-fuse run`` processes: one per test session, a fork per command.

Starting ``tracefs-fuse run`` costs a Python interpreter that imports trio,
pyfuse3 and the engine (most of a ``run -- true``). The pytest fixture pays
that once per session (per xdist worker): it starts :class:`RunServer`, a
process that has imported everything ``run`` needs and then only forks. Each
fork *is* a ``tracefs-fuse run`` (``cli/_run_server.py`` calls the same
``main``), with its own namespaces, daemon, mount and recording, so what one
test registers, enables, maps or changes never reaches the next: isolation is
the kernel's, between two mount namespaces with a daemon each, not ours to
get right.

The protocol, over a ``SOCK_SEQPACKET`` pair (one message per datagram):
  * to the server: a :class:`Request`, with ``SCM_RIGHTS`` of the command's
    stdin, stdout and stderr and one end of a new socket pair, the *reply*
    socket, which belongs to that run alone;
  * on the reply socket: :class:`Started` with a pidfd of the run (what
    signals it: the pid is the server's child, not ours), then
    :class:`Exited` with its return code, from the run itself as its last
    act (its command and everything the command left are reaped, its mount
    is gone, its output and recording are written; only its process's own
    end, some 3 ms of freeing its memory and namespaces, is to come), or
    from the server once it reaped a run that died without saying (killed).
    The first :class:`Exited` counts; the server then closes its end.
When the session's end of the control socket closes, the server sends
SIGTERM to the runs still going (``run`` passes it on to their commands),
reaps them and exits; if the server is killed, they are killed too
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import array
import os
import select
import signal
import socket
import subprocess
import sys
from typing import Sequence, Union

import msgspec


class Request(msgspec.Struct, tag=True):
    """Run ``tracefs-fuse ARGV`` in ``cwd`` with ``env`` (fds: stdin, stdout, stderr, reply)."""
    argv: list[str]
    env: dict[str, str]
    cwd: str


class Started(msgspec.Struct, tag=True):
    """The run's pid (fds: its pidfd)."""
    pid: int


class Exited(msgspec.Struct, tag=True):
    """The run's return code, as ``Popen.returncode`` has it (negative: a signal)."""
    returncode: int


Message = Union[Request, Started, Exited]
_DECODER = msgspec.json.Decoder(Message)
#: A message and its fds fit one datagram of this size.
MAX_MESSAGE = 1 << 20
MAX_FDS = 4


def send(sock: socket.socket, message: Message, fds: Sequence[int] = ()) -> None:
    data = msgspec.json.encode(message)
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def receive(sock: socket.socket) -> tuple[Message, list[int]] | None:
    """The next message and the fds it carried (ours to close); None at EOF."""
    data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise OSError(f"run server: a message was cut short (flags {flags:#x})")
    return _DECODER.decode(data), list(fds)


def _readable(fd: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000))))


class ServedProcess:
    """A run forked by the server, with what tests use of ``subprocess.Popen``."""

    def __init__(self, args: list[str], reply: socket.socket, pid: int, pidfd: int) -> None:
        self.args = args
        self.pid = pid
        #: Readable once the run has exited (a pidfd of a process not ours to reap).
        self.pidfd = pidfd
        self.returncode: int | None = None
        self._reply: socket.socket | None = reply

    def poll(self) -> int | None:
        if self.returncode is None and self._reply is not None and _readable(
                self._reply.fileno(), 0):
            self._take_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            assert self._reply is not None
            if not _readable(self._reply.fileno(), timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._take_exit()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self.pidfd, sig)
            except ProcessLookupError:
                pass  # exited; the server is about to say how

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _take_exit(self) -> None:
        assert self._reply is not None
        got = receive(self._reply)
        self._reply.close()
        self._reply = None
        if got is None:
            # The server died before saying (it was killed; so was the run).
            self.returncode = -signal.SIGKILL
            return
        message, fds = got
        for fd in fds:
            os.close(fd)
        if not isinstance(message, Exited):
            raise OSError(f"run server: expected Exited, got {message!r}")
        self.returncode = message.returncode

    def close(self) -> None:
        """Release the pidfd and the reply socket (after :meth:`wait`)."""
        if self._reply is not None:
            self._reply.close()
            self._reply = None
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


class RunServer:
    """The session's server of runs (see the module)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        # -P: the installed package, whatever the directory (as for run itself).
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "tracefs_fuse.cli._run_server", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
        theirs.close()

    def spawn(self, argv: list[str], *, env: dict[str, str] | None,
              cwd: str | os.PathLike[str] | None,
              stdin: int, stdout: int, stderr: int) -> ServedProcess:
        """``tracefs-fuse ARGV``, forked by the server; the test's view of it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            request = Request(argv=argv, env=dict(os.environ if env is None else env),
                              cwd=os.fspath(cwd) if cwd is not None else os.getcwd())
            try:
                send(self._control, request, [stdin, stdout, stderr, theirs.fileno()])
            except (BrokenPipeError, ConnectionResetError):
                raise OSError(f"the run server exited ({self.process.poll()})") from None
        finally:
            theirs.close()
        got = receive(ours)
        if got is None:
            ours.close()
            raise OSError(f"the run server did not start {argv!r} "
                          f"(server status {self.process.poll()})")
        message, fds = got
        if not isinstance(message, Started) or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            ours.close()
            raise OSError(f"run server: expected Started and a pidfd, got {message!r}")
        return ServedProcess([sys.executable, "-m", "tracefs_fuse", *argv], ours,
                             message.pid, fds[0])

    def close(self, timeout: float = 30.0) -> None:
        """End the server (its runs get SIGTERM) and wait for it."""
        self._control.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
