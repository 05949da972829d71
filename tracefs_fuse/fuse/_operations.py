"""pyfuse3 ``Operations``: the namespace, open/release and poll.

Reads, writes and ioctls do not come here: the bridge routes them to
:class:`~._requests.RequestHandler`, which shares this module's open-file table.

Rules:
  * Attributes are tracefs': size 0, nlink 1, root-owned (or the configured
    gid), one timestamp for everything, modes from the engine.
  * Everything under ``events/<system>/`` can vanish at any moment, so its
    entries and attributes are never cached by the kernel (timeout 0); the
    rest of the tree is fixed for the life of the mount and cached for long.
  * Names the engine holds but a directory cannot show (empty, ``.``, ``..``,
    containing ``/`` or NUL; the kernel accepts such user events and then
    fails to list them) are left out of listings and lookups.
  * Errors: engine errors carry their errno; namespace changes get the errno
    the VFS gives for a tracefs directory without that operation.
"""

from __future__ import annotations

import errno
import logging
import stat
import time
from typing import Awaitable, Callable, Iterable, Sequence

from ..engine._errors import TracefsError
from ..engine._task import Task
from ..engine._tree import Dir, File, FileKind, Node, OpenFile
from ..process._fds import holds_file
from ._errno import translate_errors
from ._inodes import InodeTable, Path
from ._session import (FOPEN_NOFLUSH, FOPEN_PARALLEL_DIRECT_WRITES, FOPEN_STREAM, pyfuse3,
                       set_open_flags)

log = logging.getLogger(__name__)

#: How long the kernel may cache entries and attributes of the fixed tree.
STATIC_TIMEOUT_S = 3600.0
_BLOCK_SIZE = 4096
#: tracefs' statfs f_namelen (NAME_MAX).
_NAME_MAX = 255
#: st_size of mappable files. tracefs reports 0 everywhere, but a FUSE page
#: fault past i_size is SIGBUS before the daemon hears of it, so a mappable
#: file must be as large as its mappings: one page for the old ABIs' status
#: page (larger mappings then fault, as the kernel refused them), and for
#: trace_pipe_raw the largest size there is (MAX_LFS_FILESIZE): splice()
#: reads it through the page cache at a position that only grows, and sees
#: end of file there. read() is direct I/O and ignores it.
_MAPPABLE_SIZE = {FileKind.MAPPABLE_TEXT: 4096, FileKind.MAPPABLE_PIPE: (1 << 63) - 1}


#: Text files are seq_files: seekable, each read continuing where the last ended.
_SEEKABLE = (FileKind.TEXT, FileKind.MAPPABLE_TEXT)


async def _nothing() -> None:
    pass


def _representable(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _volatile(path: Path) -> bool:
    # events/<system>/... appears and disappears with the events it holds.
    return len(path) >= 2 and path[0] == "events"


class _DirPass:
    """An open directory: its path, and the listing of the pass under way."""

    __slots__ = ("path", "listing")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listing: list[tuple[str, Path, Node, bool]] | None = None


class OpenFiles:
    """File handles: the engine's open files, by fh number."""

    def __init__(self) -> None:
        self._files: dict[int, tuple[OpenFile, Path]] = {}
        self._next = 1

    def add(self, file: OpenFile, path: Path) -> int:
        fh = self._next
        self._next += 1
        self._files[fh] = (file, path)
        return fh

    def get(self, fh: int) -> OpenFile:
        entry = self._files.get(fh)
        if entry is None:
            raise TracefsError(errno.EBADF, f"no open file {fh}")
        return entry[0]

    def path(self, fh: int) -> Path:
        return self._files[fh][1]

    def pop(self, fh: int) -> OpenFile | None:
        entry = self._files.pop(fh, None)
        return entry[0] if entry else None

    def __iter__(self) -> Iterable[tuple[int, OpenFile, Path]]:
        return iter([(fh, f, p) for fh, (f, p) in self._files.items()])


class TracefsOperations(pyfuse3.Operations):
    """The tree of one engine, served through pyfuse3."""

    def __init__(self, root: Dir, task_of: Callable[[int], Task], *,
                 uid: int = 0, gid: int = 0, root_mode: int | None = None,
                 before_release: Callable[[], None] = lambda: None,
                 after_release: Callable[[], Awaitable[None]] = _nothing) -> None:
        super().__init__()
        self.root = root
        self.task_of = task_of
        #: Runs before a file's last close: it may drop event references,
        #: which forked children not yet followed may hold too.
        self.before_release = before_release
        #: Awaited after a file's release: the enable bits it changed are
        #: written (as the kernel's close(2) of a perf fd has cleared them).
        self.after_release = after_release
        self.uid = uid
        self.gid = gid
        #: tracefs' ``mode=`` mount option: the root directory's permissions.
        self.root_mode = root_mode
        self.inodes = InodeTable()
        self.files = OpenFiles()
        #: Open directories by fh (their own numbers, apart from files').
        self._dirs: dict[int, _DirPass] = {}
        self._next_dir = 1
        self.mount_time_ns = time.time_ns()
        #: chmod/chown results by path (tracefs keeps them on the inode).
        self.owners: dict[Path, tuple[int, int, int]] = {}
        #: Poll handles of blocked pollers, per fh (notified when data arrives).
        self.poll_handles: dict[int, pyfuse3.PollHandle] = {}

    # -- resolution ---------------------------------------------------------------

    def resolve(self, path: Path) -> Node:
        node: Node = self.root
        for name in path:
            if not isinstance(node, Dir) or not _representable(name):
                raise TracefsError(errno.ENOENT, "/".join(path))
            child = node.lookup(name)
            if child is None:
                raise TracefsError(errno.ENOENT, "/".join(path))
            node = child
        return node

    def _path(self, inode: int) -> Path:
        path = self.inodes.path(inode)
        if path is None:
            raise TracefsError(errno.ENOENT, f"unknown inode {inode}")
        return path

    def _attrs(self, inode: int, path: Path, node: Node) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = inode
        mode, attrs.st_uid, attrs.st_gid = self._owner(path, node)
        attrs.st_mode = stat.S_IFMT(node.mode) | mode
        attrs.st_nlink = 1
        attrs.st_size = _MAPPABLE_SIZE.get(node.kind, 0) if isinstance(node, File) else 0
        attrs.st_blksize = _BLOCK_SIZE
        attrs.st_blocks = 0
        attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = self.mount_time_ns
        timeout = 0.0 if _volatile(path) else STATIC_TIMEOUT_S
        attrs.entry_timeout = attrs.attr_timeout = timeout
        return attrs

    # -- namespace ------------------------------------------------------------------

    @translate_errors
    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        child_path = self._path(parent_inode) + (name.decode("latin-1"),)
        node = self.resolve(child_path)
        inode = self.inodes.inode(child_path)
        self.inodes.looked_up(inode)
        return self._attrs(inode, child_path, node)

    @translate_errors
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        path = self._path(inode)
        return self._attrs(inode, path, self.resolve(path))

    @translate_errors
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        # tracefs_setattr: chmod and chown stick (admins open user_events_data
        # to a group this way); sizes (O_TRUNC when not passed to open) and
        # times are ignored. The kernel checked ownership (default_permissions).
        path = self._path(inode)
        node = self.resolve(path)
        if fields.update_mode or fields.update_uid or fields.update_gid:
            old = self._owner(path, node)
            self.owners[path] = (
                stat.S_IMODE(attr.st_mode) if fields.update_mode else old[0],
                attr.st_uid if fields.update_uid else old[1],
                attr.st_gid if fields.update_gid else old[2])
        return self._attrs(inode, path, node)

    def _owner(self, path: Path, node: Node) -> tuple[int, int, int]:
        """Permission bits, uid and gid of a path: changed ones, else the defaults."""
        changed = self.owners.get(path)
        if changed is not None:
            return changed
        mode = stat.S_IMODE(node.mode)
        if not path and self.root_mode is not None:
            mode = self.root_mode
        return mode, self.uid, self.gid

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for inode, nlookup in inode_list:
            self.inodes.forget(inode, nlookup)

    @translate_errors
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        path = self._path(inode)
        if not isinstance(self.resolve(path), Dir):
            raise TracefsError(errno.ENOTDIR, "/".join(path))
        fh = self._next_dir
        self._next_dir += 1
        self._dirs[fh] = _DirPass(path)
        return fh

    @translate_errors
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        dir_pass = self._dirs[fh]
        if start_id == 0 or dir_pass.listing is None:
            # A pass starts (opendir, rewinddir): the listing is built once for
            # all of its readdir calls, as the kernel's getdents walks one
            # list with a cursor (rebuilding it per call was quadratic).
            dir_pass.listing = self._listing(dir_pass.path)
        for index, (name, child_path, child, counted) in enumerate(
                dir_pass.listing[start_id:], start_id + 1):
            inode = self.inodes.inode(child_path)
            if not pyfuse3.readdir_reply(token, name.encode("latin-1"),
                                         self._attrs(inode, child_path, child), index):
                break
            if counted:
                self.inodes.looked_up(inode)  # readdirplus entries are lookups

    def _listing(self, path: Path) -> list[tuple[str, Path, Node, bool]]:
        node = self.resolve(path)
        assert isinstance(node, Dir)
        # "." and ".." first, as tracefs lists them; the kernel does not count
        # them as lookups (fuse_direntplus_link skips both).
        listing: list[tuple[str, Path, Node, bool]] = [
            (".", path, node, False), ("..", path[:-1], self.resolve(path[:-1]), False)]
        listing += [(n.name, path + (n.name,), n, True)
                    for n in node.entries() if _representable(n.name)]
        return listing

    async def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)

    @translate_errors
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = _BLOCK_SIZE
        data.f_namemax = _NAME_MAX
        return data

    # -- files ------------------------------------------------------------------------

    @translate_errors
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        path = self._path(inode)
        node = self.resolve(path)
        if not isinstance(node, File):
            raise TracefsError(errno.EISDIR, "/".join(path))
        file = node.open(flags, self.task_of(ctx.pid))
        fh = self.files.add(file, path)
        kind = node.kind
        # Every tracefs file reports size 0: only direct I/O reads past it.
        # trace_pipe_raw's page cache is dropped at each open: splice() fills
        # it with consumed sub-buffers at the opener's file position, which a
        # later opener would read again from offset 0. Its mappings lose
        # nothing by it (faults are served from the engine's pages).
        info = pyfuse3.FileInfo(fh=fh, direct_io=True,
                                keep_cache=kind is FileKind.MAPPABLE_TEXT,
                                nonseekable=kind not in _SEEKABLE)
        # A file released at its owner's last close needs the close's FUSE_FLUSH.
        extra = FOPEN_NOFLUSH if file.released_at_last_close() is None else 0
        if kind not in _SEEKABLE:
            # Streams see position 0 on every read and write, as the kernel's
            # user_events_data and trace_pipe* do (they ignore the position).
            extra |= FOPEN_STREAM
        if kind is FileKind.STREAM:
            extra |= FOPEN_PARALLEL_DIRECT_WRITES
        set_open_flags(fh, extra)
        return info

    async def release(self, fh: int) -> None:
        file = self.files.pop(fh)
        self.poll_handles.pop(fh, None)
        if file is not None:
            try:
                self.before_release()
                file.release()
            except Exception:  # a bug: the close itself must still succeed
                log.exception("release of fh %d failed", fh)
            await self.after_release()

    async def flush(self, fh: int) -> None:
        # Only files released at their owner's last close ask for FUSE_FLUSH
        # (open): close(2) waits for its reply, never for FUSE_RELEASE's.
        try:
            file = self.files.get(fh)
        except TracefsError:
            return
        owner = file.released_at_last_close()
        if owner is not None and not holds_file(owner, "/" + "/".join(self.files.path(fh))):
            try:
                self.before_release()
                file.release()
            except Exception:  # a bug: the close itself must still succeed
                log.exception("release at the last close of fh %d failed", fh)
            await self.after_release()

    @translate_errors
    async def poll(self, inode: int, fh: int, poll_handle: pyfuse3.PollHandle | None,
                   ctx: pyfuse3.RequestContext) -> int:
        mask = self.files.get(fh).poll()
        if not mask and poll_handle is not None:
            self.poll_handles[fh] = poll_handle
        return mask

    def notify_pollers(self) -> None:
        """Wake every stored poller; each re-polls and re-arms if still idle."""
        handles, self.poll_handles = self.poll_handles, {}
        for handle in handles.values():
            handle.notify()

    # -- what tracefs directories cannot do ------------------------------------------

    async def mkdir(self, parent_inode: int, name: bytes, mode: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise pyfuse3.FUSEError(errno.EPERM)  # vfs_mkdir() without ->mkdir

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise pyfuse3.FUSEError(errno.EPERM)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext) -> tuple[pyfuse3.FileInfo,
                                                           pyfuse3.EntryAttributes]:
        raise pyfuse3.FUSEError(errno.EACCES)  # vfs_create() without ->create

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.EPERM)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.EPERM)

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.EPERM)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise pyfuse3.FUSEError(errno.EPERM)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise pyfuse3.FUSEError(errno.EPERM)
