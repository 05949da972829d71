"""Which image a process runs: what ``enable_on_exec`` waits to change.

A FUSE daemon does not see execs. Every exec writes 16 fresh random bytes
for the new image and puts their address in its auxiliary vector as
``AT_RANDOM`` (``create_elf_tables``, ASLR or not); a fork copies both, so a
process's (address, bytes) change exactly when it execs.

Kernel: fs/binfmt_elf.c (``create_elf_tables``), include/uapi/linux/auxvec.h.
"""

from __future__ import annotations

import os
import struct

#: include/uapi/linux/auxvec.h: "#define AT_RANDOM 25 /* address of 16 random bytes */".
AT_RANDOM = 25
AT_RANDOM_SIZE = 16
#: Elf64_auxv_t { uint64_t a_type; union { uint64_t a_val; } a_un; }.
_AUXV_ENTRY = struct.Struct("=QQ")


def image_token(tgid: int, proc: str = "/proc") -> bytes | None:
    """``tgid``'s AT_RANDOM address and bytes, or None when they cannot be read
    (gone, no ptrace access, not an ELF image)."""
    try:
        with open(f"{proc}/{tgid}/auxv", "rb") as f:
            auxv = f.read()
        for a_type, a_val in _AUXV_ENTRY.iter_unpack(auxv[:len(auxv) // 16 * 16]):
            if a_type == AT_RANDOM:
                fd = os.open(f"{proc}/{tgid}/mem", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    token = os.pread(fd, AT_RANDOM_SIZE, a_val)
                finally:
                    os.close(fd)
                if len(token) != AT_RANDOM_SIZE:
                    return None
                return struct.pack("=Q", a_val) + token
    except OSError:
        return None
    return None
