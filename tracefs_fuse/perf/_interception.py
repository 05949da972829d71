"""``run``'s side: the filter installed in CMD's child, its listener brought home.

Rules:
  * The child installs the filter after fork, before exec, and sends the
    listener to us over a socket pair (SCM_RIGHTS); it never keeps it.
  * Where the filter cannot be installed (a kernel without seccomp user
    notification, a seccomp profile that refuses it, no privilege in any user
    namespace), CMD runs anyway and one line says perf_event_open goes to the
    kernel untouched.
  * The supervisor is stopped from a worker thread: it may be waiting for the
    trio thread to answer a question.
"""

from __future__ import annotations

import logging
import os
import socket
import sys

import trio

from ..engine._perf_event_attr import SIDE_BAND
from ._service import PerfService
from ._supervisor import Supervisor, install_filter

log = logging.getLogger(__name__)


class Interception:
    def __init__(self) -> None:
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._supervisor: Supervisor | None = None

    def in_child(self) -> None:
        """In CMD's child, before exec."""
        try:
            fd = install_filter()
        except OSError as exc:
            self._child.send(str(exc.errno).encode())
            return
        socket.send_fds(self._child, [b"0"], [fd])
        os.close(fd)

    def start(self, service: PerfService) -> None:
        """After the child exec'd: answer its filter."""
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
            return
        self._supervisor = Supervisor(fds[0], service.prefix, service.on_open, service.on_ioctl,
                                      SIDE_BAND, service.on_redirect)
        self._supervisor.start()

    async def stop(self) -> None:
        if self._supervisor is not None:
            await trio.to_thread.run_sync(self._supervisor.stop)
            self._supervisor = None


__all__ = ["Interception"]
