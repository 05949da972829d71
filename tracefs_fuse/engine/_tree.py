"""The virtual file tree: directories, files, and what an open file can do.

Rules:
  * Nodes are cheap values computed from engine state on every lookup; a
    directory's listing is always current, so deleted events vanish at once.
    The adapter identifies a node by its path, never by object identity.
  * Every file says how the adapter must open it (:class:`FileKind`): all
    tracefs files report size 0, so all are direct I/O; some are streams,
    some block, some can be mapped.
  * :class:`OpenFile` methods raise :class:`TracefsError` with the kernel's
    errno; its defaults are what the VFS answers for a missing file operation.

Kernel: fs/tracefs/inode.c, fs/tracefs/event_inode.c, fs/seq_file.c.
"""

from __future__ import annotations

import enum
import errno
import os  # open-flag constants only
import stat
from typing import Callable, Iterable, Protocol

import msgspec

from ._errors import TracefsError
from ._memory import Tgid
from ._task import Task

#: Modes of tracefs files (kernel/trace/trace.h: TRACE_MODE_WRITE / _READ).
TRACE_MODE_WRITE = 0o640
TRACE_MODE_READ = 0o440
DIR_MODE = 0o755
#: per_cpu, per_cpu/cpuN, instances, options.
PRIVATE_DIR_MODE = 0o750

POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM = 0x1, 0x4, 0x40, 0x100
#: What a file without a poll method reports (``DEFAULT_POLLMASK``).
DEFAULT_POLLMASK = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM


class FileKind(enum.Enum):
    """How the adapter opens a file."""

    #: Text generated on open/read, seekable (seq_file or simple_read).
    TEXT = "text"
    #: Writes are whole messages at position 0, no seeking (user_events_data).
    STREAM = "stream"
    #: Consuming reads that may block; no seeking (trace_pipe*).
    PIPE = "pipe"
    #: A PIPE that can also be mapped (trace_pipe_raw).
    MAPPABLE_PIPE = "mappable_pipe"
    #: Text to read(), a binary page to mmap() (user_events_status of old ABIs).
    MAPPABLE_TEXT = "mappable_text"


class Vma(msgspec.Struct, frozen=True):
    """A client's mapping of a file, as its ``/proc/<pid>/maps`` line shows it."""

    pgoff: int
    nr_pages: int
    write: bool
    execute: bool
    shared: bool


class Mappable(Protocol):
    """A file clients can ``mmap``.

    ``mmap()`` never reaches a FUSE daemon: the adapter discovers mappings
    (from the page faults they cause and from ``/proc/<pid>/maps``) and
    reports each with :meth:`mapped` and its disappearance with
    :meth:`unmapped`. So the kernel's refusals apply when a mapping is first
    seen rather than at ``mmap()`` time. A mapping outlives the descriptor it
    was made from, so this is per file, not per open file.
    """

    def mapped(self, vma: Vma) -> None:
        """A mapping appeared.

        Raises:
            TracefsError: the errno the kernel's ``mmap`` would have returned.
        """
        ...

    def unmapped(self) -> None:
        ...

    def map_read(self, offset: int, size: int) -> bytes:
        """The bytes a page fault at ``offset`` loads."""
        ...


class Node:
    __slots__ = ("name", "mode")

    def __init__(self, name: str, mode: int) -> None:
        self.name = name
        self.mode = mode


class Dir(Node):
    """A directory whose entries are computed when asked for."""

    __slots__ = ("_entries",)

    def __init__(self, name: str, entries: Callable[[], Iterable[Node]],
                 mode: int = DIR_MODE) -> None:
        super().__init__(name, stat.S_IFDIR | mode)
        self._entries = entries

    def entries(self) -> list[Node]:
        """Children in the kernel's getdents order."""
        return list(self._entries())

    def lookup(self, name: str) -> Node | None:
        for node in self._entries():
            if node.name == name:
                return node
        return None


class OpenFile:
    """One open file description. The defaults mirror a missing file operation."""

    kind = FileKind.TEXT

    def read(self, offset: int, size: int) -> bytes:
        raise TracefsError(errno.EINVAL, "file has no read operation")

    def write(self, data: bytes, offset: int, task: Task) -> int:
        raise TracefsError(errno.EINVAL, "file has no write operation")

    def ioctl(self, cmd: int, arg: int, task: Task) -> int:
        raise TracefsError(errno.ENOTTY, f"unknown ioctl {cmd:#x}")

    def poll(self) -> int:
        return DEFAULT_POLLMASK

    def release(self) -> None:
        pass

    def released_at_last_close(self) -> Tgid | None:
        """Whose last close ends this file before close() returns, or None.

        FUSE_RELEASE reaches us after close() has returned. A file whose end
        the closer must see at once (a perf event's clears its enable bits in
        ``perf_release``) names the process that holds it, and the adapter
        releases it at the FUSE_FLUSH of that process's last descriptor.
        Release must then be idempotent: FUSE_RELEASE still follows.
        """
        return None


class File(Node):
    """A regular file; ``opener(flags, task)`` makes its :class:`OpenFile`."""

    __slots__ = ("opener", "kind")

    def __init__(self, name: str, mode: int, opener: Callable[[int, Task], OpenFile],
                 kind: FileKind = FileKind.TEXT) -> None:
        super().__init__(name, stat.S_IFREG | mode)
        self.opener = opener
        self.kind = kind

    def open(self, flags: int, task: Task) -> OpenFile:
        return self.opener(flags, task)


class TextFile(OpenFile):
    """A generated text file with ``seq_file`` read semantics.

    The text is generated by a read at position 0 (or the first read) and kept
    for the reads that continue it, so a reader with a small buffer sees one
    consistent snapshot; reading from 0 again regenerates it.
    """

    def __init__(self, render: Callable[[], str] | None,
                 writer: Callable[[bytes, Task], int] | None = None) -> None:
        self._render = render
        self._writer = writer
        self._snapshot: bytes | None = None

    def read(self, offset: int, size: int) -> bytes:
        if self._render is None:
            return super().read(offset, size)
        if offset == 0 or self._snapshot is None:
            self._snapshot = self._render().encode("latin-1")
        return self._snapshot[offset:offset + size]

    def write(self, data: bytes, offset: int, task: Task) -> int:
        if self._writer is None:
            return super().write(data, offset, task)
        return self._writer(data, task)


def text_file(name: str, render: Callable[[], str] | None,
              writer: Callable[[bytes, Task], int] | None = None, *,
              mode: int | None = None,
              on_truncate: Callable[[Task], None] | None = None) -> File:
    """A file whose reads render text and whose writes call ``writer``.

    ``on_truncate`` runs when the file is opened for writing with O_TRUNC (the
    shell's ``>``), before the open succeeds; raising refuses the open.
    """
    if mode is None:
        mode = TRACE_MODE_WRITE if writer is not None else TRACE_MODE_READ

    def opener(flags: int, task: Task) -> OpenFile:
        if on_truncate is not None and flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
            on_truncate(task)
        return TextFile(render, writer)

    return File(name, mode, opener)
