"""The kernel's user-memory accessors, over the injected :class:`~._memory.ProcessMemory`.

Rules:
  * Each accessor fails exactly where its kernel namesake fails: EFAULT for
    memory that ends early, EINVAL/E2BIG for what the kernel rejects by value,
    so the callers' errnos come from the same step as the kernel's.

Kernel: include/linux/uaccess.h (``copy_from_user``, ``copy_struct_from_user``),
mm/util.c (``strndup_user``).
"""

from __future__ import annotations

from collections.abc import Callable

import errno

from ._errors import TracefsError
from ._memory import ProcessMemory
from ._task import Task


def copy_from_user(memory: ProcessMemory, task: Task, addr: int, size: int) -> bytes:
    """``copy_from_user``: all ``size`` bytes or EFAULT."""
    data = memory.read(task.tgid, addr, size)
    if len(data) != size:
        raise TracefsError(errno.EFAULT, f"cannot read {size} bytes at {addr:#x}")
    return data


def strndup_user(memory: ProcessMemory, task: Task, addr: int, limit: int) -> str:
    """``strndup_user``: a NUL-terminated string of at most ``limit`` bytes with NUL.

    Raises:
        TracefsError: EFAULT if memory ends before the NUL, EINVAL if there is
            no NUL within ``limit`` bytes.
    """
    data = memory.read(task.tgid, addr, limit)
    nul = data.find(0)
    if nul >= 0:
        return data[:nul].decode("latin-1")
    if len(data) < limit:
        raise TracefsError(errno.EFAULT, f"string at {addr:#x} runs into unmapped memory")
    raise TracefsError(errno.EINVAL, f"string at {addr:#x} is longer than {limit - 1} bytes")


def copy_struct_from_user(memory: ProcessMemory, task: Task, addr: int, size: int,
                          ksize: int) -> bytes:
    """``copy_struct_from_user``: ``ksize`` bytes; a longer user struct must be zero-padded.

    Raises:
        TracefsError: EFAULT if unreadable, E2BIG if bytes past ``ksize`` are set.
    """
    if size > ksize:
        tail = copy_from_user(memory, task, addr + ksize, size - ksize)
        if any(tail):
            raise TracefsError(errno.E2BIG, "unknown trailing fields are not zero")
    data = copy_from_user(memory, task, addr, min(size, ksize))
    return data + bytes(ksize - len(data))


def copy_struct_reads(addr: int, size: int, ksize: int,
                      read: Callable[[int, int], bytes]) -> bytes | None:
    """What :func:`copy_struct_from_user` reads, in its order, through
    ``read(addr, size)``: the struct as it would return it, or None where it
    would refuse (EFAULT, E2BIG)."""
    if size > ksize:
        tail = read(addr + ksize, size - ksize)
        if len(tail) < size - ksize or any(tail):
            return None
    data = read(addr, min(size, ksize))
    if len(data) < min(size, ksize):
        return None
    return data + bytes(ksize - len(data))
