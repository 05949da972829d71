"""The C library, loaded once for the whole package.

Rules:
  * One ``ctypes.CDLL(None, use_errno=True)``: every caller sees the errno of
    its own last call (ctypes keeps a private copy per thread), and no module
    loads its own.
  * A failed call becomes ``OSError`` with that errno and the call's name, as
    Python's own ``os`` functions raise it.
"""

from __future__ import annotations

import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
# long syscall(long number, ...): the result is a long, not ctypes' default int.
libc.syscall.restype = ctypes.c_long


def check(result: int, what: str) -> int:
    """``result`` of a libc call that returns -1 and sets errno on failure."""
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def syscall(number: int, *args: object) -> int:
    """``syscall(number, args...)``, raising OSError on failure."""
    result = int(libc.syscall(number, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result
