"""The machine's own tracefs, for tests that compare against the live kernel.

Tests mount it privately, through the ``real_tracefs_root`` fixture or
``real_tracefs()``; the global buffer is never touched (each test works in
its own ``instances/`` directory or only reads). Like FUSE, the fixture is
gated in ``tests/conftest.py``: skipped on a developer machine that cannot
mount tracefs, run (and failing) under ``CI``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "mounting the machine's tracefs needs root"
    with open("/proc/filesystems") as f:
        if not any(line.split()[-1] == "tracefs" for line in f):
            return "this kernel has no tracefs"
    return None


@contextlib.contextmanager
def real_tracefs() -> Iterator[Path]:
    """The machine's tracefs, mounted privately for the caller."""
    with tempfile.TemporaryDirectory(prefix="real-tracefs-") as tmp:
        subprocess.run(["mount", "-t", "tracefs", "nodev", tmp], check=True)
        try:
            yield Path(tmp)
        finally:
            subprocess.run(["umount", tmp], check=True)
