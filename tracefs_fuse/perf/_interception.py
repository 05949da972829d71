"""``run``'s side: the filter installed in CMD's child, its listener brought home.

Rules:
  * CMD is started by :meth:`Interception.spawn` (``_supervisor.spawn``: a
    vfork whose child runs only C): the child installs the filter before
    exec and sends the listener to us over a socket pair (SCM_RIGHTS); it
    never keeps it.
  * Where the filter cannot be installed (a kernel without seccomp user
    notification, a seccomp profile that refuses it, no privilege in any user
    namespace), CMD runs anyway and one line says perf_event_open goes to the
    kernel untouched.
  * The supervisor is stopped from a worker thread: it may be waiting for the
    trio thread to answer a question.
  * Nothing here needs trio, the daemon or pyfuse3: ``run`` starts CMD
    before it loads them (``daemon/_run.py``).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import TYPE_CHECKING

from ..engine._perf_event_attr import SIDE_BAND
from ._supervisor import Supervisor, spawn

if TYPE_CHECKING:
    from ._service import PerfService

log = logging.getLogger(__name__)


class Interception:
    def __init__(self) -> None:
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._supervisor: Supervisor | None = None

    def spawn(self, argv: list[str], fd_limit: int) -> int:
        """Start ``argv`` under the filter, as ``subprocess.Popen(argv,
        close_fds=False)`` would with run's set-up (``_supervisor.c`` says
        what the child does); its pid.

        Raises:
            OSError: no candidate could be executed (the errno Popen reports).
        """
        program = os.fsencode(argv[0])
        # Popen's search (Lib/subprocess.py, _execute_child): a name with a
        # slash as it is, else in each directory of PATH.
        paths = ([program] if os.path.dirname(program)
                 else [os.path.join(os.fsencode(d), program) for d in os.get_exec_path()])
        return spawn(paths, [os.fsencode(arg) for arg in argv], fd_limit, self._child.fileno())

    def close(self) -> None:
        """No command was started: nothing to answer."""
        self._child.close()
        self._parent.close()

    def listener(self) -> int | None:
        """After the child exec'd: the filter's listener it sent us, or None
        (then one line says why perf_event_open is the kernel's)."""
        self._child.close()
        try:
            message, fds, _, _ = socket.recv_fds(self._parent, 16, 1, socket.MSG_DONTWAIT)
        except BlockingIOError:
            message, fds = b"", []
        self._parent.close()
        if not fds:
            code = int(message) if message.isdigit() else 0
            print("tracefs-fuse run: perf_event_open is not emulated (the seccomp filter "
                  f"could not be installed: {os.strerror(code) if code else 'no answer'}); "
                  "perf sees the host kernel's events only", file=sys.stderr)
            return None
        return fds[0]

    def start(self, listener: int, service: PerfService) -> None:
        """Answer the filter of :meth:`listener` (the supervisor owns it from here)."""
        self._supervisor = Supervisor(listener, service.prefix, service.on_open,
                                      service.on_ioctl, SIDE_BAND, service.on_redirect)
        self._supervisor.start()

    def stop(self) -> None:
        """Stop answering; blocks while the supervisor waits for an answer
        (call it from a worker thread)."""
        if self._supervisor is not None:
            self._supervisor.stop()
            self._supervisor = None


__all__ = ["Interception"]
