"""``/proc/self/mountinfo``, read as the kernel writes it.

Rules:
  * A line is fields separated by single spaces. White space and backslashes
    inside a field are written as three-digit octal escapes (a space is
    ``\\040``, a backslash ``\\134``), so splitting on spaces is safe and every
    path and name field must then be unescaped: ``/mnt/a b`` is written
    ``/mnt/a\\040b``.
  * Paths are bytes; they are decoded as ``os.fsdecode`` does, so any name
    round-trips through ``os.fsencode``.
  * Mounts stacked on one mount point appear bottom first (each is a child of
    the one beneath it, and the kernel lists parents before children).

Kernel: fs/proc_namespace.c ``show_mountinfo`` (``seq_path_root`` and
``mangle`` escape ``" \\t\\n\\\\"``); Documentation/filesystems/proc.rst 3.5.
"""

from __future__ import annotations

import os
import re

import msgspec

FSNAME = "tracefs"
SUBTYPE = "tracefs"
#: What /proc/mounts calls our mounts.
FSTYPE = f"fuse.{SUBTYPE}"

_ESCAPE = re.compile(rb"\\([0-7]{3})")


class Mount(msgspec.Struct, frozen=True, kw_only=True):
    """One line of mountinfo (the fields this package needs).

    Attributes:
        device: the superblock's ``major:minor``, as ``/proc/<pid>/maps`` names it.
        mount_point: where it is mounted, relative to our root.
        fstype: ``tracefs``, ``fuse.tracefs``, …
        source: the mount source (``tracefs``, ``nodev``, ``none``, …).
    """

    device: tuple[int, int]
    mount_point: str
    fstype: str
    source: str


def unescape(field: bytes) -> str:
    """A mountinfo field as the name it stands for (``a\\040b`` -> ``a b``)."""
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse(text: bytes) -> list[Mount]:
    """Every mount in a mountinfo text, in the kernel's order."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(b" ")
        # Optional fields (shared:N, master:N, …) end at a lone "-".
        sep = fields.index(b"-", 6)
        major, minor = fields[2].split(b":")
        mounts.append(Mount(device=(int(major), int(minor)), mount_point=unescape(fields[4]),
                            fstype=unescape(fields[sep + 1]), source=unescape(fields[sep + 2])))
    return mounts


def read(pid: int | str = "self") -> list[Mount]:
    """The mounts a process sees (by default, this one)."""
    with open(f"/proc/{pid}/mountinfo", "rb") as f:
        return parse(f.read())


def mounted_at(path: str, mounts: list[Mount] | None = None) -> list[Mount]:
    """The mounts stacked exactly at ``path``, bottom first; the last one is
    what a lookup of ``path`` reaches."""
    return [m for m in (read() if mounts is None else mounts) if m.mount_point == path]


def mount_device(mountpoint: str) -> str:
    """Our mount's device as ``/proc/<pid>/maps`` writes it (``%02x:%02x``).

    Read from mountinfo: a ``stat()`` of our own mountpoint would wait for
    the very daemon that calls it.
    """
    for mount in reversed(mounted_at(mountpoint)):
        if mount.fstype.startswith("fuse"):
            return "%02x:%02x" % mount.device
    raise RuntimeError(f"{mountpoint} is not a FUSE mount")
