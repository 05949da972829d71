"""The one place engine errors become FUSE errors.

Rules:
  * ``TracefsError`` becomes ``FUSEError(errno)``: an expected outcome, logged
    at DEBUG.
  * Any other exception is a bug: logged with its traceback at ERROR and
    answered with EIO, so one client's request can never take the daemon down.
  * ``BaseException`` (trio's ``Cancelled``, ``KeyboardInterrupt``) passes.
"""

from __future__ import annotations

import errno
import functools
import logging
from typing import Any, Awaitable, Callable, TypeVar

from ..engine._errors import TracefsError
from ._session import pyfuse3

log = logging.getLogger(__name__)

T = TypeVar("T")


def errno_of(exc: Exception, what: str) -> int:
    """The errno to answer for ``exc`` raised while doing ``what``."""
    if isinstance(exc, TracefsError):
        log.debug("%s: %s", what, exc)
        return exc.errno
    if isinstance(exc, pyfuse3.FUSEError):
        return exc.errno
    log.error("%s failed with a bug", what, exc_info=exc)
    return errno.EIO


def translate_errors(handler: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Wrap a pyfuse3 handler so that only ``FUSEError`` escapes it."""

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return await handler(*args, **kwargs)
        except Exception as exc:
            raise pyfuse3.FUSEError(errno_of(exc, handler.__name__)) from None

    return wrapper
