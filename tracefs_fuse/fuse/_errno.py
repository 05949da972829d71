"""The one place engine errors become FUSE errors, and refusals become log lines.

Rules:
  * ``TracefsError`` becomes ``FUSEError(errno)``: an expected outcome, logged
    as one line at INFO (``--log-level info``) saying who was refused what:
    ``ioctl DIAG_IOCSREG from pid 123 (myapp): EADDRINUSE: my_event exists with
    other fields``. Routine refusals (nothing to read yet, an interrupted wait,
    an ioctl the file does not have, as every ``isatty()`` sends; a name that
    is not there) are logged at DEBUG only.
  * Any other exception is a bug: logged with its traceback at ERROR and
    answered with EIO, so one client's request can never take the daemon down.
  * ``BaseException`` (trio's ``Cancelled``, ``KeyboardInterrupt``) passes.
"""

from __future__ import annotations

import errno
import functools
import logging
from typing import Any, Callable, Coroutine, ParamSpec, TypeVar

from ..engine._buffer_files import TRACE_MMAP_IOCTL_GET_READER
from ..engine._errors import TracefsError
from ..engine._uapi import DIAG_IOCSDEL, DIAG_IOCSREG, DIAG_IOCSUNREG
from ._session import pyfuse3

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

_ROUTINE_ERRNOS = frozenset({errno.EAGAIN, errno.EINTR, errno.ENOTTY})
_ROUTINE_REQUESTS = frozenset({"lookup"})
IOCTL_NAMES = {
    DIAG_IOCSREG: "DIAG_IOCSREG",
    DIAG_IOCSDEL: "DIAG_IOCSDEL",
    DIAG_IOCSUNREG: "DIAG_IOCSUNREG",
    TRACE_MMAP_IOCTL_GET_READER: "TRACE_MMAP_IOCTL_GET_READER",
}
#: Its ioctls name it already.
_USER_EVENTS_DATA = ("user_events_data",)


def request_name(op: str, path: tuple[str, ...] | None, cmd: int | None = None) -> str:
    """``ioctl DIAG_IOCSREG``, ``write dynamic_events``, ``ioctl 0x5401 on trace``."""
    where = "/".join(path) if path is not None else "?"
    if cmd is None:
        return f"{op} {where}"
    name = IOCTL_NAMES.get(cmd)
    if name is None:
        return f"{op} {cmd:#x} on {where}"
    return f"{op} {name}" if path == _USER_EVENTS_DATA else f"{op} {name} on {where}"


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n").decode("utf-8", "replace")
    except OSError:
        return "gone"


def errno_of(exc: Exception, what: str, pid: int = 0) -> int:
    """The errno to answer for ``exc`` raised while doing ``what`` for ``pid``."""
    if isinstance(exc, TracefsError):
        routine = exc.errno in _ROUTINE_ERRNOS or what in _ROUTINE_REQUESTS
        level = logging.DEBUG if routine else logging.INFO
        if log.isEnabledFor(level):
            caller = f" from pid {pid} ({_comm(pid)})" if pid else ""
            log.log(level, "%s%s: %s", what, caller, exc)
        return exc.errno
    if isinstance(exc, pyfuse3.FUSEError):
        return exc.errno
    log.error("%s failed with a bug", what, exc_info=exc)
    return errno.EIO


def translate_errors(
        handler: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Wrap a pyfuse3 handler so that only ``FUSEError`` escapes it."""

    @functools.wraps(handler)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await handler(*args, **kwargs)
        except Exception as exc:
            ctx = next((a for a in args if isinstance(a, pyfuse3.RequestContext)), None)
            raise pyfuse3.FUSEError(
                errno_of(exc, handler.__name__, ctx.pid if ctx else 0)) from None

    return wrapper
