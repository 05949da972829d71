"""Whether a process still holds one of our files: its ``/proc/<pid>/fd`` links.

Rules:
  * Links are read (readlink), never followed: following one to a file of our
    own mount would send this daemon a request while it is busy asking.
  * A process that is gone holds nothing; one whose descriptors we may not
    read is taken to hold the file (the answer that ends nothing early).
"""

from __future__ import annotations

import os

from ..engine._memory import Tgid


def holds_file(tgid: Tgid, name: str) -> bool:
    """Whether a descriptor of ``tgid`` names a path that ends with ``name``."""
    fd_dir = f"/proc/{tgid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except PermissionError:
        return True
    except OSError:  # gone
        return False
    for fd in fds:
        try:
            if os.readlink(f"{fd_dir}/{fd}").endswith(name):
                return True
        except OSError:  # closed since the listing
            continue
    return False
