"""Ending a FUSE connection whose daemon hangs, for the fault tests.

A daemon hung in its own fault cannot even be killed: it waits,
uninterruptibly, for the read it should answer. Writing to fusectl's
``<connection>/abort`` fails every request of the connection, which frees
the daemon and every client stuck on it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

FUSECTL = Path("/sys/fs/fuse/connections")


def connection(mountpoint: Path) -> int:
    """The FUSE connection id of a mount (its device minor); take it while mounted."""
    return os.minor(os.stat(mountpoint).st_dev)


def abort(conn: int) -> None:
    _fusectl()
    (FUSECTL / str(conn) / "abort").write_text("1")


def waiting(conn: int) -> int:
    """How many of the connection's requests wait for their answer now."""
    _fusectl()
    return int((FUSECTL / str(conn) / "waiting").read_text())


def _fusectl() -> None:
    if not FUSECTL.is_mount():
        subprocess.run(["mount", "-t", "fusectl", "none", str(FUSECTL)], check=False)
