"""The command ``tracefs-fuse run`` starts, and what comes with it until it ends.

What ``_run`` (before the daemon is loaded) and ``_run_serving`` (once it
serves) both do with the command: wait for it, reap it, pass signals on,
end what it leaves behind. Rules are ``_run``'s docstring.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import struct

from ..lib import check, libc
from ..perf._interception import Interception
from ..process._stat import field, split_stat

log = logging.getLogger(__name__)


def exit_status(returncode: int) -> int:
    """A shell's ``$?`` for a child's return code (negative: killed by a signal)."""
    return 128 - returncode if returncode < 0 else returncode


class Command:
    """The command we started, and what comes with it until it ends."""

    def __init__(self, pid: int, perf: Interception, listener: int | None,
                 forwarder: Forwarder, interrupts: Interrupts) -> None:
        self.pid = pid
        #: Its filter's answerer, and the listener to answer (None: no filter).
        self.perf = perf
        self.listener = listener
        self.forwarder = forwarder
        self.interrupts = interrupts
        self.pidfd = os.pidfd_open(pid)

    def ends_before(self, loaded: int) -> bool:
        """Wait until the command ends (True) or ``loaded`` is readable (False:
        the daemon is loaded, whether or not the command has ended too),
        passing SIGINT on meanwhile."""
        poll = select.poll()
        for fd in (self.pidfd, loaded, self.interrupts.fd):
            poll.register(fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poll.poll()}
            if loaded in ready:
                return False
            if self.pidfd in ready:
                return True
            self.interrupts.pass_on()

    def reap(self) -> int:
        """Its exit status (it has ended, or ends now)."""
        status = exit_status(os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1]))
        self.forwarder.ended()  # its pid is not its own any more
        return status

    def kill(self) -> None:
        """End it, unless it was reaped already (our tracefs is gone), and
        all it left running."""
        if self.pidfd >= 0:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            self.reap()
            self.close()
        end_leftovers()

    def close(self) -> None:
        """Once reaped: what we held for it."""
        os.close(self.pidfd)
        self.pidfd = -1
        if self.listener is not None:
            os.close(self.listener)
            self.listener = None


def children(skip: int | None = None) -> list[int]:
    """Our children now (the command's leftovers, reparented to us), but
    those of thread ``skip`` (loading forks ``ldconfig``: trio asks
    ``ctypes.util.find_library``).

    Each thread's ``children`` file (CONFIG_PROC_CHILDREN) lists what that
    thread forked or was handed as a reaper: a few reads, where a scan of
    ``/proc`` reads every process's ``stat``. The file can miss a child that
    comes or goes while it is read: the caller repeats until a pass finds none.
    """
    try:
        threads = os.listdir("/proc/self/task")
        found = []
        for tid in threads:
            if int(tid) == skip:
                continue
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
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    _, _, fields = split_stat(f.read(), last=4)
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[field(4)]) == me:  # ppid
                found.append(int(name))
    return found


def end_leftovers(skip: int | None = None) -> int:
    """Kill and reap every process the command left behind (``children``),
    waiting for each; how many."""
    ended = 0
    while pids := children(skip):
        for pid in pids:
            # Our child until we reap it: the pid cannot be another's.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            ended += 1
    if ended:
        log.info("ended %d process(es) the command left running", ended)
    return ended


class Forwarder:
    """Signals for the command, passed on while it runs.

    SIGTERM and SIGHUP are passed on, also when they arrive while the command
    is being started. Plain handlers, not trio's receiver: a signal that lands
    as the command exits must not be redelivered to us afterwards. SIGINT
    comes through :class:`Interrupts`.
    """

    FORWARDED = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._pid: int | None = None
        self._ended = False
        self._pending: list[int] = []
        self._saved: dict[int, object] = {}

    def __enter__(self) -> Forwarder:
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


class Interrupts:
    """SIGINT, read from a signalfd, passed on unless the terminal sent it.

    Ctrl-C makes the terminal signal its whole foreground process group, the
    command included, with ``si_code`` SI_KERNEL (``n_tty``'s ``isig()``
    sends it privileged): the command has it already and decides. Any other
    SIGINT was sent to us (``kill -INT``; SI_USER) and is passed on, as
    ``timeout`` does; so is one from the terminal before the command ran.
    Read here until the daemon serves, then by the serving side's task.
    """

    #: <uapi/asm-generic/siginfo.h>
    SI_KERNEL = 0x80
    #: struct signalfd_siginfo { __u32 ssi_signo; __s32 ssi_errno; __s32 ssi_code; ...
    #: 128 bytes in all.
    SIGINFO = struct.Struct("<Iii")
    SIGINFO_SIZE = 128
    SFD_NONBLOCK = os.O_NONBLOCK
    SFD_CLOEXEC = os.O_CLOEXEC

    def __init__(self, forwarder: Forwarder) -> None:
        self._forwarder = forwarder
        self.fd = -1

    def __enter__(self) -> Interrupts:
        mask = (ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong))))()
        mask[0] = 1 << (signal.SIGINT - 1)  # sigaddset()
        self.fd = check(libc.signalfd(-1, ctypes.byref(mask),
                                      self.SFD_NONBLOCK | self.SFD_CLOEXEC), "signalfd")
        return self

    def __exit__(self, *exc_info: object) -> None:
        os.close(self.fd)

    def pass_on(self) -> None:
        """Pass on every SIGINT pending now that the terminal did not send."""
        while True:
            try:
                info = os.read(self.fd, self.SIGINFO_SIZE)
            except BlockingIOError:
                return
            _, _, code = self.SIGINFO.unpack_from(info)
            if code != self.SI_KERNEL or not self._forwarder.running:
                self._forwarder.forward(signal.SIGINT)
