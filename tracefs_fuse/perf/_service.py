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
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from typing import TypeVar

import trio

from ..engine._errors import TracefsError
from ..engine._perf_event_attr import (PERF_FLAG_FD_OUTPUT, PERF_TYPE_TRACEPOINT, Limits,
                                       check_open, copy_attr, emulated)
from ..engine._perf_events import PERF_DIR, PerfEvent
from ..engine._task import Task
from ..engine._tracefs import Tracefs
from ..engine._user_events import UserEvent
from ._exec import image_token

log = logging.getLogger(__name__)

_PERF_INODE = "anon_inode:[perf_event]"
_Answer = TypeVar("_Answer")


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

    # -- called on the supervisor thread ------------------------------------------------

    def on_open(self, tid: int, attr: bytes, pid: int, cpu: int, group_fd: int,
                flags: int) -> None | int | str:
        try:
            return trio.from_thread.run(self._settled, self._open, tid, attr, pid, cpu,
                                        group_fd, flags, trio_token=self._token)
        except Exception:
            log.exception("perf_event_open of %d", tid)
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
        if kind is None:
            return None
        caller = self._task(tid)
        limits = Limits(paranoid=perf_event_paranoid(), perfmon=caller.perfmon,
                        nr_cpus=self.engine.nr_cpus)
        try:
            check_open(attr, pid, cpu, flags, limits)
            output = self._group(tid, group_fd)
            target = None if pid == -1 else caller if pid == 0 else self._target(pid)
        except TracefsError as exc:
            return -exc.errno
        event = self.engine.events.by_id(attr.config) if attr.type == PERF_TYPE_TRACEPOINT else None
        try:
            perf = self.engine.perf.open(attr, kind, event, target, cpu, caller.tgid)
        except TracefsError as exc:
            return -exc.errno
        if output is not None and flags & PERF_FLAG_FD_OUTPUT:
            perf.output = output
        log.debug("perf event %d: %s %s pid %d cpu %d", perf.id, kind.value, attr.config, pid, cpu)
        return self.prefix + str(perf.id)

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

