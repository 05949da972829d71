"""The one error family the engine raises.

Rules:
  * Every failure the kernel reports with an errno is a :class:`TracefsError`
    carrying that errno; nothing else escapes the engine (a different exception
    is a bug).
  * The errno is decided here, in the engine, never at the FUSE boundary: the
    adapter maps ``TracefsError.errno`` to ``FUSEError`` in exactly one place.
"""

from __future__ import annotations

import errno as _errno


class TracefsError(Exception):
    """A refusal the kernel would express as ``-errno``.

    Args:
        errno: the positive errno value the kernel returns.
        message: a human explanation; text files with an error log (e.g.
            ``error_log``) may show it, syscalls only ever see the errno.
    """

    def __init__(self, errno: int, message: str = "") -> None:
        super().__init__(errno, message or _errno.errorcode.get(errno, str(errno)))
        self.errno = errno
        self.message = message

    def __str__(self) -> str:
        name = _errno.errorcode.get(self.errno, str(self.errno))
        return f"{name}: {self.message}" if self.message else name


class WouldBlock(TracefsError):
    """Raised by ``*_nowait`` calls that would have to wait for data.

    The adapter waits and retries for blocking opens, and returns EAGAIN for
    ``O_NONBLOCK`` ones.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(_errno.EAGAIN, message)
