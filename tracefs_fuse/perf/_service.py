"""The supervisor's questions, answered in the trio thread.

Rules:
  * The supervisor thread asks, the trio thread decides (``trio.from_thread``):
    the engine is only ever touched from the trio thread. The supervisor then
    opens the file we name, which the trio thread serves meanwhile.
  * A call we do not emulate (not ours, or an attr the kernel itself refuses
    before looking at the event) continues to the kernel untouched: its answer
    is the kernel's.
  * Nothing a client passes may raise out of here: an unexpected error is
    logged and the caller gets EIO.
  * The side-band bits of the real events a process opens (continued to the
    kernel) are remembered, per process (the last ``SIDE_BAND_PROCS``): when
    it redirects one of them into ours (``SET_OUTPUT``, as ``perf record -a``
    does with its tracking dummy), we write those records for it.
  * Each process an event follows is awaited by a pidfd (at most
    ``WATCHED_MAX`` at once; past that, its exit goes unreported); its exit
    is the engine's ``exited`` (EXIT records, POLLHUP).
"""

from __future__ import annotations

import errno
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import trio

from ..engine._errors import TracefsError
from ..engine._memory import Tgid
from ..engine._perf_event_attr import (PERF_FLAG_FD_OUTPUT, PERF_TYPE_TRACEPOINT, SIDE_BAND,
                                       Kind, Limits, check_open, copy_attr, emulated)
from ..engine._perf_events import PERF_DIR, PerfEvent
from ..engine._task import Task
from ..engine._perf_side_band import Lineage
from ..engine._perf_stand_in import stands_in
from ..engine._tracefs import Tracefs
from ..engine._user_events import UserEvent
from . import _family
from ._exec import image_token

log = logging.getLogger(__name__)

_PERF_INODE = "anon_inode:[perf_event]"
_Answer = TypeVar("_Answer")
#: Processes whose real events' side-band bits are remembered.
SIDE_BAND_PROCS = 256
#: Processes awaited at once.
WATCHED_MAX = 4096


def perf_event_paranoid() -> int:
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 2


class PerfService:
    """Answers for one mount.

    Args:
        task: the facts of a thread (tgid, CPU, perfmon) by tid.
        changed: publish engine changes (enable bits, pages, pollers); the event
            the answer must wait for (its page stores), if any.
    """

    def __init__(self, engine: Tracefs, mountpoint: str, task: Callable[[int], Task],
                 changed: Callable[[], trio.Event | None]) -> None:
        self.engine = engine
        self.prefix = f"{mountpoint.rstrip('/')}/{PERF_DIR}/"
        self._task = task
        self._changed = changed
        self._token = trio.lowlevel.current_trio_token()
        engine.perf.image_of = image_token
        engine.perf.family = _family.family
        engine.perf.ancestry = _family.ancestry
        engine.perf.follow = self._follow
        self._side_band: OrderedDict[Tgid, int] = OrderedDict()
        self._watched: set[Tgid] = set()

    # -- called on the supervisor thread ------------------------------------------------

    def on_open(self, tid: int, attr: bytes, pid: int, cpu: int, group_fd: int,
                flags: int) -> None | int | str:
        try:
            return trio.from_thread.run(self._settled, self._open, tid, attr, pid, cpu,
                                        group_fd, flags, trio_token=self._token)
        except Exception:
            log.exception("perf_event_open of %d", tid)
            return -errno.EIO

    def on_redirect(self, tid: int, name: str) -> int:
        try:
            return trio.from_thread.run_sync(self._redirect, tid, name, trio_token=self._token)
        except Exception:
            log.exception("SET_OUTPUT into %s by %d", name, tid)
            return -errno.EIO

    def on_ioctl(self, tid: int, name: str, cmd: int, arg: int) -> tuple[int, bytes | None]:
        try:
            return trio.from_thread.run(self._settled, self._ioctl, tid, name, cmd, arg,
                                        trio_token=self._token)
        except Exception:
            log.exception("perf ioctl %#x of %d", cmd, tid)
            return -errno.EIO, None

    # -- in the trio thread -------------------------------------------------------------

    async def _settled(self, answer: Callable[..., _Answer], *args: object) -> _Answer:
        """``answer(*args)``, returned once what it changed is visible: the enable
        bits and the pages of mapped files (a status page) stored, as the
        kernel's perf_event_open has updated them before it returns."""
        result = answer(*args)
        stored = self._changed()
        if stored is not None:
            await stored.wait()
        return result

    def _open(self, tid: int, raw: bytes, pid: int, cpu: int, group_fd: int,
              flags: int) -> None | int | str:
        try:
            attr = copy_attr(raw)
        except TracefsError:
            return None  # the kernel refuses it the same way
        kind = emulated(attr, self._is_ours)
        caller = self._task(tid)
        limits = Limits(paranoid=perf_event_paranoid(), perfmon=caller.perfmon,
                        nr_cpus=self.engine.nr_cpus)
        if kind is None and stands_in(attr, pid, cpu, flags, limits,
                                      initial_userns=initial_userns(tid)):
            kind = Kind.DUMMY
        if kind is None:
            if attr.flags & SIDE_BAND:
                self._remember_side_band(caller.tgid, attr.flags & SIDE_BAND)
            return None
        try:
            check_open(attr, pid, cpu, flags, limits)
            output = self._group(tid, group_fd)
            target = None if pid == -1 else caller if pid == 0 else self._target(pid)
        except TracefsError as exc:
            return -exc.errno
        event = self.engine.events.by_id(attr.config) if attr.type == PERF_TYPE_TRACEPOINT else None
        try:
            perf = self.engine.perf.open(attr, kind, event, target, cpu, caller.tgid,
                                         _uid(tid))
        except TracefsError as exc:
            return -exc.errno
        if output is not None and flags & PERF_FLAG_FD_OUTPUT:
            perf.set_output(output)
        log.debug("perf event %d: %s %s pid %d cpu %d", perf.id, kind.value, attr.config, pid, cpu)
        return self.prefix + str(perf.id)

    def _remember_side_band(self, tgid: Tgid, flags: int) -> None:
        self._side_band[tgid] = self._side_band.pop(tgid, 0) | flags
        while len(self._side_band) > SIDE_BAND_PROCS:
            self._side_band.popitem(last=False)

    def _redirect(self, tid: int, name: str) -> int:
        """SET_OUTPUT(a real event of ``tid``'s -> ours)."""
        perf = self.engine.perf.by_path(name)
        if perf is None:
            return -errno.EBADF
        self.engine.perf.redirected(perf, self._side_band.get(self._task(tid).tgid, 0))
        self._changed()
        return 0

    def _follow(self, tgid: Tgid) -> None:
        if tgid in self._watched or len(self._watched) >= WATCHED_MAX:
            return
        try:
            pidfd = os.pidfd_open(tgid)
        except OSError:
            return  # already gone: its exit is for the next look (none)
        self._watched.add(tgid)
        ppid = _family.parent(tgid) or 0
        trio.lowlevel.spawn_system_task(self._await_exit, tgid, ppid, pidfd)

    async def _await_exit(self, tgid: Tgid, ppid: int, pidfd: int) -> None:
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
            self._watched.discard(tgid)
        try:
            self.engine.perf.exited(Lineage(pid=tgid, tid=tgid, ppid=ppid, ptid=ppid))
            self._changed()
        except Exception:
            log.exception("exit of %d", tgid)

    def _is_ours(self, event_id: int) -> bool:
        return isinstance(self.engine.events.by_id(event_id), UserEvent)

    def _target(self, pid: int) -> Task:
        try:
            return self._task(pid)
        except (OSError, ValueError) as exc:
            raise TracefsError(errno.ESRCH, f"no task {pid}") from exc

    def _group(self, tid: int, group_fd: int) -> PerfEvent | None:
        if group_fd == -1:
            return None
        found = self._fd_event(tid, group_fd)
        if isinstance(found, int):
            raise TracefsError(found, "group leader")
        return found

    def _fd_event(self, tid: int, fd: int) -> PerfEvent | int:
        """Our event behind ``tid``'s ``fd``, or the kernel's errno for it."""
        try:
            target = os.readlink(f"/proc/{tid}/fd/{fd}")
        except OSError:
            return errno.EBADF
        if target.startswith(self.prefix):
            perf = self.engine.perf.by_path(target[len(self.prefix):])
            return perf if perf is not None else errno.EBADF
        # A real kernel event cannot be joined with ours (its ring cannot be
        # written from user space); anything else is not a perf event.
        return errno.EINVAL if target == _PERF_INODE else errno.EBADF

    def _ioctl(self, tid: int, name: str, cmd: int, arg: int) -> tuple[int, bytes | None]:
        perf = self.engine.perf.by_path(name)
        if perf is None:
            return -errno.EBADF, None
        output: PerfEvent | None | int = None
        if cmd == 0x2405 and arg != 0xFFFFFFFF and arg != (1 << 64) - 1:
            output = self._fd_event(tid, arg & 0xFFFFFFFF)
        try:
            return perf.ioctl(cmd, arg, output)
        except TracefsError as exc:
            return -exc.errno, None


def _uid(tid: int) -> int:
    """The caller's user, as ``/proc`` shows it (its euid)."""
    try:
        return os.stat(f"/proc/{tid}").st_uid
    except OSError:
        return -1


#: /proc/<pid>/uid_map of the initial user namespace: every uid, to itself.
_IDENTITY_MAP = [b"0", b"0", b"4294967295"]


def initial_userns(tid: int) -> bool:
    """Whether ``tid`` is in the initial user namespace (where the host
    kernel counts its capabilities)."""
    try:
        with open(f"/proc/{tid}/uid_map", "rb") as f:
            return f.read().split() == _IDENTITY_MAP
    except OSError:
        return False
