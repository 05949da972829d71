"""Inode numbers for engine paths, with the kernel's lookup counts.

Rules:
  * An inode names a *path*; the engine's nodes are recomputed on every lookup
    and have no identity of their own. A path keeps its inode while the kernel
    holds a lookup reference to it, so a deleted-and-recreated event directory
    may come back with the same number (its contents are always live).
  * The root is pyfuse3's ``ROOT_INODE`` and is never forgotten.
"""

from __future__ import annotations

from typing import Iterator

Path = tuple[str, ...]
ROOT_INODE = 1


class InodeTable:
    def __init__(self) -> None:
        self._ino_of: dict[Path, int] = {(): ROOT_INODE}
        self._path_of: dict[int, Path] = {ROOT_INODE: ()}
        self._lookups: dict[int, int] = {}
        self._next = ROOT_INODE + 1

    def __len__(self) -> int:
        return len(self._path_of)

    def inode(self, path: Path) -> int:
        """The inode of ``path``, assigning one if it has none."""
        ino = self._ino_of.get(path)
        if ino is None:
            ino = self._next
            self._next += 1
            self._ino_of[path] = ino
            self._path_of[ino] = path
        return ino

    def known(self, path: Path) -> int | None:
        """The inode of ``path`` if the kernel may know it, else None."""
        return self._ino_of.get(path)

    def path(self, ino: int) -> Path | None:
        return self._path_of.get(ino)

    def looked_up(self, ino: int) -> None:
        """The kernel took a reference (a successful lookup reply)."""
        self._lookups[ino] = self._lookups.get(ino, 0) + 1

    def forget(self, ino: int, nlookup: int) -> None:
        """The kernel dropped ``nlookup`` references; unreferenced paths go."""
        left = self._lookups.get(ino, 0) - nlookup
        if left > 0:
            self._lookups[ino] = left
            return
        self._lookups.pop(ino, None)
        if ino != ROOT_INODE:
            path = self._path_of.pop(ino, None)
            if path is not None:
                del self._ino_of[path]

    def __iter__(self) -> Iterator[tuple[int, Path]]:
        return iter(list(self._path_of.items()))
