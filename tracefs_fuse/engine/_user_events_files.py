"""The top-level user_events files: ``user_events_data`` and ``user_events_status``.

Rules:
  * ``user_events_data`` has per-open-file state (the write-index table), kept
    for as long as the open file description lives, shared across dup/fork,
    released at final close like the kernel's ``release``.
  * ``user_events_status`` is text in every era; the status-page eras also map
    their page from it (see :mod:`._status_page`).

Kernel: kernel/trace/trace_events_user.c (``user_data_fops``, ``user_status_fops``).
"""

from __future__ import annotations

from collections.abc import Callable

from ._errors import TracefsError
from ._task import Task
from ._tree import TRACE_MODE_WRITE, File, FileKind, OpenFile
from ._user_events import UserEventsFile
from ._user_events_data import UserEventsData


class UserEventsDataFile(OpenFile):
    """An open ``user_events_data``: ioctls and writes, no read (EINVAL)."""

    kind = FileKind.STREAM

    def __init__(self, data: UserEventsData) -> None:
        self.data = data
        self.file = UserEventsFile()

    def write(self, data: bytes, offset: int, task: Task) -> int:
        return self.data.write(self.file, data, offset, task)

    def write_whole(self, data: bytes, count: int, faulted: Callable[[], bool],
                    task: Task) -> int:
        """A write of ``count`` bytes that FUSE split or cut short (see
        ``UserEventsData.write``)."""
        return self.data.write(self.file, data, 0, task, count=count, faulted=faulted)

    def ioctl(self, cmd: int, arg: int, task: Task) -> int:
        return self.data.ioctl(self.file, cmd, arg, task)

    def enable_write_failed(self, cmd: int, task: Task, addr: int, bit: int) -> TracefsError:
        """See ``UserEventsData.enable_write_failed``."""
        return self.data.enable_write_failed(cmd, task, addr, bit)

    def release(self) -> None:
        self.file.release()


def user_events_data_node(data: UserEventsData) -> File:
    return File("user_events_data", TRACE_MODE_WRITE,
                lambda flags, task: UserEventsDataFile(data), FileKind.STREAM)
