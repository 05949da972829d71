"""What every layer above the engine shares: the C library, loaded once.

Owns: ``_libc`` (the process's libc through ctypes, errno kept; the checked
call and the raw ``syscall``).
May import: nothing of ours (the standard library only).
"""

from ._libc import check as check
from ._libc import libc as libc
from ._libc import syscall as syscall

__all__ = ["check", "libc", "syscall"]
