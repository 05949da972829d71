"""Client mappings of our files, found the only way a FUSE daemon can.

``mmap()`` and ``munmap()`` never reach a FUSE daemon; page faults do (as
reads with lock owner 0), and every mapping is listed in its process's
``/proc/<pid>/maps`` with our device and the file's inode number. So:

* a page fault, and an ioctl that needs a mapping (``GET_READER``), first
  look at the caller's maps and report new mappings to the engine
  (``Mappable.mapped``, where the kernel's refusals apply), and vanished ones
  of that process (``Mappable.unmapped``);
* before anything that mapping forbids (resizing the buffer), every process
  known to map something is looked at again.

Caveats:
  * A refused mapping (writable, private, …) cannot make ``mmap()`` fail: its
    first page fault fails instead (SIGBUS in the client).
  * A mapping is noticed at its first fault or ioctl, its end at the next
    look; one that is never touched is never counted.
"""

from __future__ import annotations

import errno
import logging
from typing import Callable

from ..engine._errors import TracefsError
from ..engine._memory import Tgid
from ..engine._tracefs import Tracefs
from ..engine._tree import Vma
from . import _mountinfo
from ._inodes import InodeTable, Path

log = logging.getLogger(__name__)

_PAGE_SIZE = 4096


def mount_device(mountpoint: str) -> str:
    """Our mount's device as ``/proc/<pid>/maps`` writes it (``%02x:%02x``).

    Read from mountinfo: a ``stat()`` of our own mountpoint would wait for
    the very daemon that calls it.
    """
    for mount in reversed(_mountinfo.mounted_at(mountpoint)):
        if mount.fstype.startswith("fuse"):
            return "%02x:%02x" % mount.device
    raise RuntimeError(f"{mountpoint} is not a FUSE mount")


def parse_maps(text: str, device: str) -> dict[int, tuple[int, Vma]]:
    """Mappings of files on ``device``: vma start -> (inode, vma)."""
    found: dict[int, tuple[int, Vma]] = {}
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 5 or fields[3] != device:
            continue
        start, end = (int(n, 16) for n in fields[0].split("-"))
        perms = fields[1]
        found[start] = (int(fields[4]), Vma(
            pgoff=int(fields[2], 16) // _PAGE_SIZE, nr_pages=(end - start) // _PAGE_SIZE,
            write=perms[1] == "w", execute=perms[2] == "x", shared=perms[3] == "s"))
    return found


class MappingTracker:
    """Which client mappings the engine has been told about."""

    def __init__(self, engine: Tracefs, inodes: InodeTable, device: str,
                 tgid_of: Callable[[int], Tgid]) -> None:
        self.engine = engine
        self.inodes = inodes
        self.device = device
        self.tgid_of = tgid_of
        #: (tgid, vma start, vma) -> path, for mappings the engine accepted.
        #: A start address is reused after munmap(): the vma is part of the key.
        self._known: dict[tuple[int, int, Vma], Path] = {}
        #: Keys of mappings the engine refused.
        self._refused: set[tuple[int, int, Vma]] = set()

    def _maps(self, tgid: int) -> dict[int, tuple[int, Vma]]:
        try:
            with open(f"/proc/{tgid}/maps") as f:
                return parse_maps(f.read(), self.device)
        except OSError:
            return {}  # gone: all its mappings with it

    def look(self, pid: int) -> None:
        """Tell the engine what changed in one process's mappings of our files."""
        tgid = self.tgid_of(pid)
        current = {(tgid, start, vma): ino for start, (ino, vma) in self._maps(tgid).items()}
        for key in [k for k in self._known if k[0] == tgid and k not in current]:
            self._unmapped(key)
        self._refused = {k for k in self._refused if k[0] != tgid or k in current}
        for key, ino in current.items():
            vma = key[2]
            if key in self._known or key in self._refused:
                continue
            path = self.inodes.path(ino)
            mappable = self.engine.mappable(path) if path is not None else None
            if mappable is None:
                continue
            try:
                mappable.mapped(vma)
            except TracefsError as exc:
                log.debug("mapping of %s by %d refused: %s", "/".join(path or ()), tgid, exc)
                self._refused.add(key)
            else:
                self._known[key] = path  # type: ignore[assignment]

    def sweep(self) -> None:
        """Look again at every process known to map something."""
        for tgid in {k[0] for k in self._known}:
            self.look(tgid)

    def maps(self, pid: int, inode: int) -> bool:
        """Does ``pid``'s process map the file (accepted or refused)?"""
        return any(ino == inode for ino, _ in self._maps(self.tgid_of(pid)).values())

    def fault(self, pid: int, path: Path, offset: int, size: int) -> bytes:
        """Serve a page fault of ``pid`` in its mapping of ``path``.

        Always ``size`` bytes: the fault's read-around may reach past the
        ring, and FUSE takes a short page-cache fill for end of file and
        shrinks i_size to it (``fuse_short_read``), after which faults past
        it are SIGBUS and splice() sees EOF.

        Raises:
            TracefsError: EIO if the mapping was refused (the client gets
                SIGBUS: the closest we can come to mmap() failing).
        """
        self.look(pid)
        tgid = self.tgid_of(pid)
        if not any(k[0] == tgid and p == path for k, p in self._known.items()):
            raise TracefsError(errno.EIO, "fault in a refused mapping")
        mappable = self.engine.mappable(path)
        assert mappable is not None
        return mappable.map_read(offset, size).ljust(size, b"\0")

    def _unmapped(self, key: tuple[int, int, Vma]) -> None:
        path = self._known.pop(key)
        mappable = self.engine.mappable(path)
        if mappable is not None:
            mappable.unmapped()
