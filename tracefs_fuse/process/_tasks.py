"""Who wrote: a thread id's CPU, comm and thread group, for every event record.

The kernel stamps a user_events record with ``current``'s facts: the ring
buffer of the CPU it runs on, ``common_pid`` (the thread id) and, for trace
output, its ``comm``. FUSE hands us only the thread id
(``fuse_in_header.pid``), so they come from ``/proc/<tid>/stat``:
``processor`` (field 39) is ``task_cpu()``, the CPU the task last ran on; for a
task asleep in our FUSE write that is the CPU it wrote from.

Design (measured on the 2-CPU test VM under other tests' load, Python 3.11,
best of 7 runs of 2*10^4 lookups of a sleeping task): per lookup,
  * open + read + close ``/proc/<tid>/stat`` each time: 7.5-9.2 us, plus
    12 us more for ``status`` to learn the tgid;
  * an fd kept open per thread, ``os.pread`` of ``stat``: 3.6-4.6 us; the whole
    :meth:`TaskTable.facts` hit (read, parse, LRU touch) 5.1 us; a miss
    (three opens, two reads) 24 us. Chosen: one syscall per event write.
    Nothing cheaper exposes ``task_cpu()`` of another task: ``status``,
    ``sched`` and ``schedstat`` lack it.

Rules:
  * A ``/proc/<tid>`` file is bound to the task's ``struct pid``, not to the
    number: once the task is gone, reading the kept fd fails with ESRCH, even
    if the number has been given to someone else. So a cache hit is validated
    by the very read that fetches the CPU, and a stale entry (the tid was
    reused) is detected, dropped and looked up afresh. A thread that execs
    from a non-leader thread trades pids with the leader (``de_thread``), so
    its old fd fails too; its new id is the tgid.
  * ``stat`` and ``status`` are opened relative to one ``/proc/<tid>``
    directory fd, so the tgid and the CPU are the same task's.
  * The cache is bounded (LRU, one fd per entry) and small: a daemon whose
    fds all went to threads it once saw refuses every ``open()`` (issue 19
    item 1: 1,100 short-lived threads under ``ulimit -n 1024``). A thread
    pushed out is simply opened again (a miss, 24 us) when it writes next.
  * A vanished task never raises: :meth:`TaskTable.facts` returns the last
    facts known for that tid, or placeholders (``cpu`` 0, ``comm`` ``<...>``,
    the kernel's own placeholder for an unknown comm).
  * ``comm`` is the raw bytes between the first ``(`` and the *last* ``)``:
    it may contain spaces and parentheses. Decoded as ``os.fsdecode`` does
    (UTF-8, surrogateescape: ``os.fsencode`` gives the bytes back).

Caveats:
  * ``processor`` is only the writer's CPU while the writer is blocked in the
    FUSE request: read it before replying.
  * ``/proc`` must be the procfs of the daemon's pid namespace, the one the
    FUSE connection reports thread ids in.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import msgspec

from ..engine._memory import Tgid
from ._stat import field, split_stat

#: Threads kept open by default: more writers than this at once cost a miss each.
CAPACITY = 64
#: ``get_task_comm`` placeholder the kernel prints for an unknown task.
UNKNOWN_COMM = "<...>"
#: /proc/<tid>/stat field 39: ``task_cpu()``, the CPU the thread last ran on.
_PROCESSOR = 39
#: A stat line is ~300 bytes; reading 512 rather than 4096 saves ~0.5 us of
#: allocation, and a full buffer (possibly cut short) is simply read again.
_STAT_SIZE = 512
_STAT_SIZE_MAX = 4096


class TaskFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a record needs to know about the thread that wrote it."""

    tid: int
    tgid: Tgid
    #: ``task_cpu()``: the CPU the thread last ran on.
    cpu: int
    comm: str


class TaskStatistics(msgspec.Struct, frozen=True, kw_only=True):
    cached: int
    hits: int
    misses: int
    #: Cached fds found dead (task exited; its tid may have been reused).
    stale: int
    vanished: int


class _Entry:
    __slots__ = ("fd", "tgid", "last")

    def __init__(self, fd: int, tgid: Tgid, last: TaskFacts) -> None:
        self.fd = fd
        self.tgid = tgid
        self.last = last


def _read_stat(fd: int) -> bytes:
    data = os.pread(fd, _STAT_SIZE, 0)
    return data if len(data) < _STAT_SIZE else os.pread(fd, _STAT_SIZE_MAX, 0)


def _parse_stat(tid: int, tgid: Tgid, data: bytes) -> TaskFacts:
    _, comm, fields = split_stat(data, _PROCESSOR)
    return TaskFacts(tid=tid, tgid=tgid, cpu=int(fields[field(_PROCESSOR)]),
                     comm=comm.decode("utf-8", "surrogateescape"))


def _status_tgid(status: bytes) -> Tgid:
    start = status.index(b"\nTgid:") + len(b"\nTgid:")
    return Tgid(int(status[start:status.index(b"\n", start)]))


class TaskTable:
    """Thread id -> :class:`TaskFacts`, with one open ``/proc/<tid>/stat`` per cached thread.

    Args:
        capacity: most threads kept open at once (each costs one fd).
        proc: the procfs mount to read.
    """

    def __init__(self, capacity: int = CAPACITY, *, proc: str = "/proc") -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._proc = proc
        self._cache: OrderedDict[int, _Entry] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._stale = 0
        self._vanished = 0

    def facts(self, tid: int) -> TaskFacts:
        """CPU, comm and tgid of ``tid`` now; never raises for a vanished task."""
        facts, last = self._lookup(tid)
        if facts is not None:
            return facts
        self._vanished += 1
        return last or TaskFacts(tid=tid, tgid=Tgid(tid), cpu=0, comm=UNKNOWN_COMM)

    def tgid(self, tid: int) -> Tgid | None:
        """The thread group of ``tid``, or None if there is no such task."""
        facts, _ = self._lookup(tid)
        return None if facts is None else facts.tgid

    def forget(self, tid: int) -> None:
        """Drop ``tid`` from the cache (e.g. on its exit event), closing its fd."""
        entry = self._cache.pop(tid, None)
        if entry is not None:
            os.close(entry.fd)

    def close(self) -> None:
        for entry in self._cache.values():
            os.close(entry.fd)
        self._cache.clear()

    def statistics(self) -> TaskStatistics:
        return TaskStatistics(cached=len(self._cache), hits=self._hits, misses=self._misses,
                              stale=self._stale, vanished=self._vanished)

    # -- internals ------------------------------------------------------------------

    def _lookup(self, tid: int) -> tuple[TaskFacts | None, TaskFacts | None]:
        """(current facts or None if vanished, last facts known of a dead entry)."""
        last = None
        entry = self._cache.get(tid)
        if entry is not None:
            try:
                data = _read_stat(entry.fd)
            except ProcessLookupError:
                # That task is gone; the number may now name another one.
                self._stale += 1
                last = entry.last
                self.forget(tid)
            else:
                self._hits += 1
                self._cache.move_to_end(tid)
                entry.last = _parse_stat(tid, entry.tgid, data)
                return entry.last, None
        self._misses += 1
        entry = self._open(tid)
        if entry is None:
            return None, last
        self._cache[tid] = entry
        if len(self._cache) > self._capacity:
            _, oldest = self._cache.popitem(last=False)
            os.close(oldest.fd)
        return entry.last, None

    def _open(self, tid: int) -> _Entry | None:
        try:
            dirfd = os.open(f"{self._proc}/{tid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            statfd = os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dirfd)
            try:
                statusfd = os.open("status", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dirfd)
                try:
                    tgid = _status_tgid(os.read(statusfd, 4096))
                finally:
                    os.close(statusfd)
                last = _parse_stat(tid, tgid, _read_stat(statfd))
            except BaseException:
                os.close(statfd)
                raise
        except (FileNotFoundError, ProcessLookupError):
            # Exited between the directory lookup and these reads.
            return None
        finally:
            os.close(dirfd)
        return _Entry(statfd, tgid, last)
