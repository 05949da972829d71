"""The pyfuse3 floor: a bare pyfuse3 filesystem whose write handler does nothing.

One file, ``/user_events_data`` (0666), opened direct_io and nonseekable (all
pyfuse3's ``FileInfo`` offers); ``write`` returns the length it was given and
``read`` up to one 4 KiB page of zeros (the floor of a ``trace_pipe_raw`` read). What
remains is the cost of pyfuse3 and trio per request, with none of tracefs-fuse
(no bridge, no engine). Mount options are tracefs-fuse's.

Usage: ``python floor_pyfuse3.py MOUNTPOINT`` (foreground, until unmounted).
"""

from __future__ import annotations

import errno
import stat
import sys

import pyfuse3
import trio

FILE_INODE = pyfuse3.ROOT_INODE + 1
FILE_NAME = b"user_events_data"
PAGE = bytes(4096)


class FloorOperations(pyfuse3.Operations):
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext | None = None,
                      ) -> pyfuse3.EntryAttributes:
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = inode
        if inode == pyfuse3.ROOT_INODE:
            attr.st_mode, attr.st_nlink = stat.S_IFDIR | 0o755, 2
        elif inode == FILE_INODE:
            attr.st_mode, attr.st_nlink = stat.S_IFREG | 0o666, 1
        else:
            raise pyfuse3.FUSEError(errno.ENOENT)
        attr.entry_timeout = attr.attr_timeout = 1.0
        return attr

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext | None = None) -> pyfuse3.EntryAttributes:
        if parent_inode != pyfuse3.ROOT_INODE or name != FILE_NAME:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.getattr(FILE_INODE)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext,
                   ) -> pyfuse3.FileInfo:
        if inode != FILE_INODE:
            raise pyfuse3.FUSEError(errno.EISDIR)
        return pyfuse3.FileInfo(fh=inode, direct_io=True, nonseekable=True)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return PAGE[:size]

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return len(buf)


def main() -> None:
    options = {"fsname=floor", "subtype=floor", "allow_other", "default_permissions"}
    pyfuse3.init(FloorOperations(), sys.argv[1], options)
    try:
        trio.run(pyfuse3.main)
    except BaseException:
        pyfuse3.close(unmount=False)
        raise
    pyfuse3.close()


if __name__ == "__main__":
    main()
