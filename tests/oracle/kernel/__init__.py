"""The kernel oracle: a real Linux with user_events, booted in QEMU.

This machine's kernel, like most, is built without ``CONFIG_USER_EVENTS``,
so the reference for user_events is a small kernel built from Debian's own
``linux-source-6.12`` or ``linux-source-6.1`` package with it switched on,
booted in QEMU with a busybox initramfs, running one static program against
its real ``/sys/kernel/tracing``.

    python -m tests.oracle.kernel build 6.12          # once, about 8 minutes
    python -m tests.oracle.kernel run 6.12 FILE... -- COMMAND

The cache (``$TRACEFS_FUSE_ORACLE_CACHE``, default
``~/.cache/tracefs-fuse-oracle``) holds the fetched ``.deb`` files and, per
kernel, its tree, ``bzImage``, uapi headers and the kernel's own user_events
selftests, linked statically. docs/oracle.md has the details and timings.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._log import OracleError

KERNELS = ("6.12", "6.1")

__all__ = ["KERNELS", "OracleError", "cache_root"]


def cache_root() -> Path:
    """Where builds live: ``$TRACEFS_FUSE_ORACLE_CACHE`` or ``~/.cache/tracefs-fuse-oracle``."""
    return Path(os.environ.get("TRACEFS_FUSE_ORACLE_CACHE",
                               Path.home() / ".cache" / "tracefs-fuse-oracle")).expanduser()
