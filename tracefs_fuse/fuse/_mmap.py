"""Client mappings of our files, found the only way a FUSE daemon can.

``mmap()`` and ``munmap()`` never reach a FUSE daemon; page faults do (as
reads with lock owner 0), and every mapping is listed in its process's
``/proc/<pid>/maps`` with our device and the file's inode number. So:

* a page fault, and an ioctl that needs a mapping (``GET_READER``), make
  sure the caller's mappings are known: new ones are reported to the engine
  (``Mappable.mapped``, where the kernel's refusals apply), vanished ones
  too (``Mappable.unmapped``: the kernel's ``vm_ops->close``);
* a process that maps something is watched (pidfd): its exit closes its
  mappings at once, as the kernel's exit does;
* before anything a mapping decides (a resize, a GET_READER of a process
  that maps nothing) the known mappings are checked again.

Rules:
  * Reading a whole maps file costs O(mappings): with 60,000 mappings, 44.7
    ms of daemon CPU per GET_READER when every one read them (0.4 ms with 2;
    ``python -m bench.maps_cost``), 0.31–0.35 ms now, the same as with none.
    A process's known mappings are checked one by one with ``PROCMAP_QUERY``
    (Linux 6.11+, O(log n) per mapping) on a maps descriptor kept from the
    look-up that found them, so the answer is about exactly that image
    (after exec or exit the descriptor's mm is gone: ESRCH). Mappings are
    discovered by ``PROCMAP_QUERY`` too, over the file-backed vmas only
    (``_procmaps.query_maps``; issue 19, item 3: a caller with 64,000
    anonymous mappings and none of ours cost 36–54 ms per GET_READER).
    Without ``PROCMAP_QUERY`` (older kernels) every check and every
    discovery is a whole read (``_procmaps.parse_maps``), with the same
    answers.
  * A mapping is the (start, :class:`Vma`) pair: a start address is reused
    after ``munmap()``.

Kernel: kernel/trace/trace.c (``tracing_buffers_mmap``, ``_mmap_close``:
one ``ring_buffer_map``/``ring_buffer_unmap`` per vma, VM_DONTCOPY so a
fork does not inherit it), fs/proc/task_mmu.c (``show_map_vma``,
``do_procmap_query``), include/uapi/linux/fs.h (``struct procmap_query``).

Caveats:
  * A refused mapping (writable, private, …) cannot make ``mmap()`` fail: its
    first page fault fails instead (SIGBUS in the client).
  * A mapping is noticed at its first fault or ioctl; one that is never
    touched is never counted. Its ``munmap()`` (or its process's exec) is
    noticed at the next fault, GET_READER or resize of the file; an exit at
    once.
  * A second mapping of the same file by one process is noticed when the
    first one is gone, or at a fault outside the first one's pages.
"""

from __future__ import annotations

import errno
import logging
import os
import select
from typing import Callable

import msgspec
import trio

from ..engine._errors import TracefsError
from ..engine._memory import Tgid
from ..engine._tracefs import Tracefs
from ..engine._tree import Vma
from ..process._budget import BudgetExhausted, FdBudget
from ..process._proc_events import ExitWatcher
from ._inodes import InodeTable, Path
from ._procmaps import device_numbers, parse_maps, procmap_query, query_maps, read_all, vma_of

log = logging.getLogger(__name__)

_PAGE_SIZE = 4096
#: Descriptors a mapping process costs: its maps and the exit watcher's pidfd.
_MAPPER_FDS = 2
#: Look-ups of one process's maps on worker threads at once (the rest queue
#: in that process's lane, nobody else's).
LOOKUPS_IN_FLIGHT = 2


class MappingStatistics(msgspec.Struct, frozen=True, kw_only=True):
    #: Processes with mappings the engine was told about (or refused).
    processes: int
    #: Mappings the engine accepted and still counts.
    mappings: int
    #: Whole ``/proc/<pid>/maps`` reads and the bytes they read, and
    #: ``PROCMAP_QUERY`` calls (each examines one vma the kernel chose).
    full_reads: int
    maps_bytes: int
    queries: int


class _Mapping(msgspec.Struct, frozen=True):
    ino: int
    vma: Vma
    path: Path


class _Process:
    """One process that maps our files, as of its maps descriptor's image."""

    __slots__ = ("tgid", "maps_fd", "owner", "accepted", "refused")

    def __init__(self, tgid: Tgid, maps_fd: int, owner: int) -> None:
        self.tgid = tgid
        #: The uid whose descriptor budget this process's fds count against.
        self.owner = owner
        #: The /proc/<tgid>/maps descriptor of the read that found the
        #: mappings: it holds that image's mm, queries answer about it.
        self.maps_fd = maps_fd
        self.accepted: dict[int, _Mapping] = {}
        self.refused: dict[int, Vma] = {}

    def of(self, path: Path) -> list[tuple[int, _Mapping]]:
        return [(start, m) for start, m in self.accepted.items() if m.path == path]


class MappingTracker:
    """Which client mappings the engine has been told about."""

    def __init__(self, engine: Tracefs, inodes: InodeTable, device: str,
                 tgid_of: Callable[[int], Tgid], budget: FdBudget | None = None) -> None:
        self.engine = engine
        self.budget = budget or FdBudget()
        self.inodes = inodes
        self.device = device
        self.tgid_of = tgid_of
        self._procs: dict[Tgid, _Process] = {}
        self._exits = ExitWatcher()
        self._query_supported = True
        #: Per process, the look-ups it may have on worker threads at once.
        self._lanes: dict[Tgid, trio.CapacityLimiter] = {}
        self._full_reads = 0
        self._maps_bytes = 0
        self._queries = 0

    def statistics(self) -> MappingStatistics:
        return MappingStatistics(
            processes=len(self._procs),
            mappings=sum(len(p.accepted) for p in self._procs.values()),
            full_reads=self._full_reads, maps_bytes=self._maps_bytes, queries=self._queries)

    # -- what the adapter asks ----------------------------------------------------------

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
        tgid = self.tgid_of(pid)
        page = offset // _PAGE_SIZE
        if not any(m.vma.pgoff <= page < m.vma.pgoff + m.vma.nr_pages
                   for _, m in self._confirmed(tgid, path)):
            self._look(tgid)
            proc = self._procs.get(tgid)
            if proc is None or not proc.of(path):
                raise TracefsError(errno.EIO, "fault in a refused mapping")
        mappable = self.engine.mappable(path)
        assert mappable is not None
        return mappable.map_read(offset, size).ljust(size, b"\0")

    def refresh(self, pid: int, path: Path) -> None:
        """Before an ioctl that needs ``path`` mapped (``GET_READER``).

        The caller's known mappings of ``path`` are checked, and if it has
        none its maps are read (a new mapping need not have faulted: the
        page cache may hold its pages). If it still has none, the answer is
        other processes' mappings: they are checked (the kernel's test is
        the buffer's ``mapped`` count, whoever holds the mappings).
        """
        tgid = self.tgid_of(pid)
        if self._confirmed(tgid, path):
            return
        self._look(tgid)
        proc = self._procs.get(tgid)
        if proc is None or not proc.of(path):
            self._check_all(path)

    def confirmed(self, pid: int, path: Path) -> bool:
        """Does the caller map ``path``, as far as we know and still (no look-up)?"""
        return bool(self._confirmed(self.tgid_of(pid), path))

    async def refresh_in_lane(self, pid: int, path: Path) -> None:
        """:meth:`refresh`, with the caller's maps looked up on a worker
        thread of its own (issue 19 item 3): a process with tens of
        thousands of vmas costs its own ``GET_READER`` the kernel's walk over
        them, never another client's request. At most :data:`LOOKUPS_IN_FLIGHT`
        look-ups of one process run at once; the rest wait their turn there.
        """
        tgid = self.tgid_of(pid)
        if self._confirmed(tgid, path):
            return
        lane = self._lanes.setdefault(tgid, trio.CapacityLimiter(LOOKUPS_IN_FLIGHT))
        try:
            found = await trio.to_thread.run_sync(self._find, tgid, limiter=lane)
        finally:
            if not lane.borrowed_tokens and not lane.statistics().tasks_waiting:
                self._lanes.pop(tgid, None)
        self._look(tgid, found)
        proc = self._procs.get(tgid)
        if proc is None or not proc.of(path):
            self._check_all(path)

    def writable_start(self, tgid: Tgid, path: Path) -> int | None:
        """Where ``tgid``'s known writable mapping of ``path`` starts (a perf
        ring's reader page, where it writes ``data_tail``), or None."""
        proc = self._procs.get(tgid)
        if proc is None:
            return None
        return next((start for start, m in proc.of(path) if m.vma.write), None)

    def maps(self, pid: int, inode: int) -> bool:
        """Does ``pid``'s process map the file (accepted or refused)?"""
        tgid = self.tgid_of(pid)
        proc = self._procs.get(tgid)
        path = self.inodes.path(inode)
        if proc is not None and path is not None and self._confirmed(tgid, path):
            return True
        fd, current = self._find(tgid)
        if fd >= 0:
            os.close(fd)
        return any(ino == inode for ino, _ in current.values())

    def sweep(self) -> None:
        """Check every known mapping again (before a resize: EBUSY only while mapped)."""
        self._check_all(None)

    def _look(self, tgid: Tgid,
              found: tuple[int, dict[int, tuple[int, Vma]]] | None = None) -> None:
        """Look one process's mappings up (or take ``found``, :meth:`_find`'s
        answer from a worker thread): tell the engine what changed in those
        of our files."""
        proc = self._procs.get(tgid)
        if proc is not None and not self._same_image(proc):
            self._forget(proc)  # exec'd (or exited): that image's mappings are closed
            proc = None
        fd, current = self._find(tgid) if found is None else found
        if proc is None:
            proc = self._track(tgid, fd) if current else None
            if proc is None:
                if fd >= 0:
                    os.close(fd)
                return
        else:
            os.close(proc.maps_fd)
            proc.maps_fd = fd
        for start, mapping in list(proc.accepted.items()):
            if current.get(start) != (mapping.ino, mapping.vma):
                self._unmapped(proc, start)
        proc.refused = {start: vma for start, vma in proc.refused.items()
                        if start in current and current[start][1] == vma}
        for start, (ino, vma) in current.items():
            if start not in proc.accepted and start not in proc.refused:
                self._report(proc, start, ino, vma)
        if not proc.accepted and not proc.refused:
            self._forget(proc)

    # -- exits --------------------------------------------------------------------------

    async def follow_exits(self, changed: Callable[[], object]) -> None:
        """Close the mappings of every mapping process that exits (then ``changed()``)."""
        while True:
            for tgid in await self._exits.wait_exited():
                proc = self._procs.get(tgid)
                if proc is not None:
                    self._forget(proc)
            changed()

    def close(self) -> None:
        for proc in list(self._procs.values()):
            os.close(proc.maps_fd)
            self.budget.give(proc.owner, _MAPPER_FDS)
        self._procs.clear()
        self._exits.close()

    # -- the checks ---------------------------------------------------------------------

    def _confirmed(self, tgid: Tgid, path: Path) -> list[tuple[int, _Mapping]]:
        """``tgid``'s known mappings of ``path`` that are still there (the
        others are closed)."""
        proc = self._procs.get(tgid)
        if proc is None:
            return []
        for start, mapping in proc.of(path):
            if not self._still_there(proc, start, mapping):
                self._unmapped(proc, start)
        if not proc.accepted and not proc.refused:
            self._forget(proc)
            return []
        return proc.of(path)

    def _check_all(self, path: Path | None) -> None:
        """Check every known mapping (of ``path``, or of anything)."""
        for proc in list(self._procs.values()):
            for start, mapping in list(proc.accepted.items()):
                if path is None or mapping.path == path:
                    if not self._still_there(proc, start, mapping):
                        self._unmapped(proc, start)
            if not proc.accepted and not proc.refused:
                self._forget(proc)

    def _still_there(self, proc: _Process, start: int, mapping: _Mapping) -> bool:
        return self._at(proc, start) == (mapping.ino, mapping.vma)

    def _at(self, proc: _Process, start: int) -> tuple[int, Vma] | None:
        """The vma of our files that starts at ``start`` in ``proc``'s image,
        as (inode, vma), or None: by ``PROCMAP_QUERY``, or (before 6.11) by
        reading the maps again, through the descriptor of that image."""
        if self._query_supported:
            self._queries += 1
            found = procmap_query(proc.maps_fd, start)
            if isinstance(found, tuple):
                (_, _, _, vma_start, vma_end, flags, _, offset, ino, major, minor,
                 _, _, _, _) = found
                if vma_start != start or (major, minor) != device_numbers(self.device):
                    return None
                return ino, vma_of(vma_start, vma_end, flags, offset)
            if found is not None:
                return None  # ENOENT: no vma there; ESRCH: the image is gone
            self._query_supported = False
        return self._parse(proc.maps_fd).get(start)

    def _same_image(self, proc: _Process) -> bool:
        """Is ``proc``'s maps descriptor still about a live image (no exec, no exit)?"""
        if self._query_supported:
            found = procmap_query(proc.maps_fd, 0)
            if found is not None:
                return found != errno.ESRCH
            self._query_supported = False
        return bool(self._text(proc.maps_fd))

    # -- bookkeeping --------------------------------------------------------------------

    def _find(self, tgid: Tgid) -> tuple[int, dict[int, tuple[int, Vma]]]:
        """A fresh maps descriptor of ``tgid`` and our mappings in it ((-1, {}) if gone)."""
        try:
            fd = os.open(f"/proc/{tgid}/maps", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return -1, {}
        try:
            return fd, self._ours(fd)
        except OSError:
            os.close(fd)
            return -1, {}

    def _ours(self, maps_fd: int) -> dict[int, tuple[int, Vma]]:
        """Our mappings in ``maps_fd``'s image: asked of the kernel for the
        file-backed vmas only, or (before 6.11) a whole read."""
        if self._query_supported:
            answer = query_maps(maps_fd, self.device)
            if answer is not None:
                found, queries = answer
                self._queries += queries
                return found
            self._query_supported = False
        return self._parse(maps_fd)

    def _parse(self, maps_fd: int) -> dict[int, tuple[int, Vma]]:
        return parse_maps(self._text(maps_fd), self.device)

    def _text(self, maps_fd: int) -> bytes:
        self._full_reads += 1
        text = read_all(maps_fd)
        self._maps_bytes += len(text)
        return text

    def _track(self, tgid: Tgid, maps_fd: int) -> _Process | None:
        """Start following a process whose ``maps_fd`` shows mappings of ours
        (None if it is gone, or if its owner keeps its share of descriptors;
        the caller keeps ``maps_fd`` then)."""
        try:
            owner = os.stat(f"/proc/{tgid}").st_uid
            self._take(owner)
        except OSError as exc:  # gone, or BudgetExhausted: that client's faults fail
            log.debug("not following the mappings of %d: %s", tgid, exc)
            return None
        proc = _Process(tgid, maps_fd, owner)
        try:
            pidfd = os.pidfd_open(tgid)
        except OSError:
            self.budget.give(owner, _MAPPER_FDS)
            return None
        try:
            # The maps were read before the pidfd was opened: the number
            # names the same process if the maps' image is still alive.
            if _exited(pidfd) or not self._same_image(proc):
                self.budget.give(owner, _MAPPER_FDS)
                return None
            self._exits.watch(tgid, pidfd)
        finally:
            os.close(pidfd)
        self._procs[tgid] = proc
        return proc

    def _take(self, owner: int) -> None:
        """Budget a new mapper's descriptors; over budget, first forget the
        mappers whose exits are pending."""
        try:
            self.budget.take(owner, _MAPPER_FDS)
        except BudgetExhausted:
            gone = [self._procs[tgid] for tgid in self._exits.exited_nowait()
                    if tgid in self._procs]
            if not gone:
                raise
            for proc in gone:
                self._forget(proc)
            self.budget.take(owner, _MAPPER_FDS)

    def _report(self, proc: _Process, start: int, ino: int, vma: Vma) -> None:
        path = self.inodes.path(ino)
        mappable = self.engine.mappable(path) if path is not None else None
        if path is None or mappable is None:
            return
        try:
            mappable.mapped(vma)
        except TracefsError as exc:
            log.debug("mapping of %s by %d refused: %s", "/".join(path), proc.tgid, exc)
            proc.refused[start] = vma
        else:
            proc.accepted[start] = _Mapping(ino, vma, path)

    def _unmapped(self, proc: _Process, start: int) -> None:
        mapping = proc.accepted.pop(start)
        mappable = self.engine.mappable(mapping.path)
        if mappable is not None:
            mappable.unmapped()

    def _forget(self, proc: _Process) -> None:
        """The process (or its image) is gone, or maps nothing of ours any more."""
        for start in list(proc.accepted):
            self._unmapped(proc, start)
        os.close(proc.maps_fd)
        self._exits.unwatch(proc.tgid)
        del self._procs[proc.tgid]
        self.budget.give(proc.owner, _MAPPER_FDS)



def _exited(pidfd: int) -> bool:
    """A pidfd is readable once its process has exited."""
    poller = select.poll()  # never select(): the number may be 1024 or more
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))
