"""Which processes hold enablers: forks, execs and exits, as user_events follows them.

The kernel copies a process's enablers into a forked child
(``user_event_mm_dup``, from ``copy_process``) and drops them at exec and
exit (``user_event_mm_remove``); a child sharing the mm (``CLONE_VM``) shares
them. FUSE sees none of it. This module keeps the engine's registry in step,
from one of two fork sources, chosen once at start and stated in the log:

* ``connector``: the netlink process connector, where it can be joined
  (CAP_NET_ADMIN in the initial user, pid and network namespaces). Every
  fork and exec is queued to us as it happens; before anything that depends
  on them we take what is queued (:meth:`ProcessTracker.catch_up`), so a
  fork that returned before that moment has been followed.
* ``procfs``: everywhere else (containers, user namespaces, ordinary users).
  Before anything that depends on forks, processes new in ``/proc`` since
  the last look are examined (``_proc_scan``); one that is a fork copy of a
  tracked image (same memory layout and AT_RANDOM bytes, still
  ``PF_FORKNOEXEC``: ``_memory``) gets a copy of its origin's enablers. Its
  origin is the nearest tracked ancestor of the same image, or, for an
  orphan whose parent is gone, a tracked image of that layout (an exiting one
  first). Execs are noticed when a pinned image is found gone: at these same
  moments for the caller, and by a look at every image every
  ``LIVENESS_PERIOD_S``.

Exits come from pidfds in both (``_proc_events.ExitWatcher``).

Why following at those moments is exact: a forked child's enablers are its
origin's at the fork, and its memory a copy of the origin's at the fork.
Both change only by what we do: the origin's enablers by its own ioctls,
its memory's bits by our writes. Every one of those is preceded by a catch
up, so a child found at one of them has the origin's current enablers and
current bits, and takes part in the write that follows.

Rules:
  * :meth:`ProcessTracker.catch_up` runs before every user_events_data ioctl,
    control-file write or open, release, and exit handling.
  * An image whose process exec'd or exited is detached from the registry at
    once (never written again) after its copies were adopted; its enablers'
    references are then dropped in bounded steps, other requests served in
    between (:meth:`ProcessTracker.release_detached`).
  * Nothing here raises for a process that vanished, was never ours, or
    cannot be reached: it is simply not followed (logged at debug level).

Caveats (measured and tested in tests/fuse/test_tracking.py; see
docs/emulation.md):
  * procfs: an exec is noticed at the latest ``LIVENESS_MAX_S`` later
    (``LIVENESS_PERIOD_S`` for a process that asked us anything in the
    last tenth of a second; the kernel, too, drops references
    asynchronously), or at once by the process's own next ioctl.
  * procfs: a child whose parent exited before the child was found (a
    double fork done between two of those moments) has lost its lineage: it
    inherits from an exiting holder of its image, else from the only live
    holder of its image; with several live ones (fork copies of one another)
    it inherits nothing.
  * A child that shares the parent's mm (vfork, posix_spawn) gets nothing of
    its own (the kernel shares the list); once it execs, its image is new.
"""

from __future__ import annotations

import errno
import heapq
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec
import trio

from ..engine._errors import TracefsError
from ..engine._memory import Tgid
from ..engine._user_events import UserEventRegistry
from ._budget import BudgetExhausted
from ._memory import PF_EXITING, PF_FORKNOEXEC, ClientMemory, Execing, Image, SharesMm, StatFacts
from ._proc_events import (
    EventsLost,
    ExecEvent,
    ExitWatcher,
    ForkEvent,
    ProcConnector,
    ProcEvent,
)
from ._proc_filter import encode, program
from ._proc_scan import ProcScan

log = logging.getLogger(__name__)

SourceName = Literal["auto", "connector", "procfs"]
#: Without the connector, how soon a newly pinned (or active) image is
#: looked at for an exec, and the longest wait between looks at a quiet one.
LIVENESS_PERIOD_S = 0.1
LIVENESS_MAX_S = 1.6
#: Enabler references dropped per step of a detached image's teardown.
RELEASE_BUDGET = 2048
#: Children we could not pin (exec'd, sharing the mm, gone) whose own
#: children may still be copies of their origin: kept, newest first.
_LOST_MAX = 4096
#: Children sharing one image's mm (CLONE_VM) remembered to take it on.
_SHARERS_MAX = 64
#: Longest parent chain walked to find a forked child's origin.
_CHAIN_MAX = 64


class TrackerStatistics(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    images: int
    adopted: int
    execs: int
    exits: int
    scans: int
    #: Connector events handled (what the kernel's filter let through).
    events: int
    #: Connector filters attached (each a change of the processes followed).
    filters: int


class ProcessTracker:
    """Pinned images, the registry's enablers, and the processes behind them.

    Args:
        registry: the engine's user_events registry.
        memory: the daemon's client memory (pins images).
        source: ``auto`` (the connector if it can be joined, else procfs),
            or one of them forced (``connector`` fails if it cannot be joined).
        changed: called after the registry changed outside a request (pushes
            status pages, wakes readers).
        proc: the procfs of the pid namespace FUSE reports callers in.
    """

    def __init__(self, registry: UserEventRegistry, memory: ClientMemory, *,
                 source: SourceName = "auto", changed: Callable[[], object] = lambda: None,
                 proc: str = "/proc") -> None:
        self.registry = registry
        self.memory = memory
        self.exits = ExitWatcher()
        self._changed = changed
        self._proc = proc
        self._scan = ProcScan(self.memory.stat, proc)
        self._lost: OrderedDict[int, Image] = OrderedDict()
        #: origin -> {pid: starttime} of children found sharing its mm.
        self._sharers: dict[Tgid, dict[int, int]] = {}
        self._connector: ProcConnector | None = None
        self._connector_ready = trio.Event()
        self._release_needed = trio.Event()
        self._holding = trio.Event()
        self._draining = False
        self._adopted = self._execs = self._exits = 0
        self._events = self._filters = 0
        #: The pids the connector's filter passes forks and execs of.
        self._followed: frozenset[int] = frozenset()
        #: Processes followed since the last filter: they ran while it hid
        #: their own forks and execs.
        self._hidden: set[int] = set()
        #: procfs: when each image is looked at next, and the wait after that.
        self._looks: list[tuple[float, Tgid]] = []
        self._due: dict[Tgid, tuple[float, float]] = {}
        self.source, self.reason = self._choose(source)

    # -- the source ---------------------------------------------------------------------

    @staticmethod
    def _choose(source: SourceName) -> tuple[str, str]:
        """The fork source and why; joining the connector once proves it works."""
        if source == "procfs":
            return "procfs", "chosen"
        try:
            ProcConnector().close()
        except OSError as exc:
            if source == "connector":
                raise
            return "procfs", f"the process connector cannot be joined here: {exc.strerror or exc}"
        return "connector", "available"

    def describe(self) -> str:
        """One line saying how processes are followed."""
        if self.source == "connector":
            return ("following forks and execs through the netlink process connector, "
                    "exits through pidfds")
        return (f"following forks through /proc at the moments user_events acts, execs "
                f"through pinned mm images, exits through pidfds ({self.reason})")

    def statistics(self) -> TrackerStatistics:
        return TrackerStatistics(source=self.source, images=len(self.memory.images()),
                                 adopted=self._adopted, execs=self._execs,
                                 exits=self._exits, scans=self._scan.scans,
                                 events=self._events, filters=self._filters)

    # -- the moments user_events acts ---------------------------------------------------

    def enter(self, tgid: Tgid, tid: int, owner: int = 0, *, registering: bool = False) -> None:
        """Before a user_events_data ioctl from thread ``tid`` of uid ``owner``:
        the caller is followed (its forks found before its enablers change,
        its image pinned) and its memory is reached through the request until
        :meth:`leave`.

        Raises:
            TracefsError: ENOMEM, for a registration whose image ``owner``'s
                descriptor budget cannot pin (``user_event_mm_alloc`` failing).
        """
        self.catch_up(pinning=True)
        image = self.memory.image(tgid)
        if image is not None and not image.alive():
            self._gone(tgid)  # it exec'd: the caller runs a new image
            image = None
        if image is not None:
            self._look_soon(tgid)  # it acts: it may exec soon too
        if image is None:
            try:
                image = self._pin_caller(tgid, tid, owner)
            except BudgetExhausted as exc:
                log.debug("cannot follow %d (thread %d): %s", tgid, tid, exc)
                if registering:
                    raise TracefsError(errno.ENOMEM, str(exc)) from None
            except OSError as exc:
                log.debug("cannot follow %d (thread %d): %s", tgid, tid, exc)
            else:
                self.exits.watch(tgid, image.pidfd.fd)
                self._look_soon(tgid)
                self._subscribe()
                # Before its registration: every fork after it reaches us.
                self._refilter()
                self._holding.set()
        self.memory.serve(tgid, tid)

    def _pin_caller(self, tgid: Tgid, tid: int, owner: int) -> Image:
        """Pin the caller; over budget, first let go of images whose exits are
        pending (they hold descriptors no more than the kernel holds mms)."""
        try:
            return self.memory.pin_caller(tgid, tid, owner)
        except BudgetExhausted:
            gone = self.exits.exited_nowait()
            if not gone:
                raise
            self.exited(gone)
            return self.memory.pin_caller(tgid, tid, owner)

    def leave(self, tgid: Tgid) -> None:
        """After the ioctl :meth:`enter` announced."""
        self.memory.serve(None)
        if tgid in self.registry.mms and self.memory.image(tgid) is None:
            # Registered but unpinnable (it vanished): nothing could ever
            # write into it or see it exit; drop it as the kernel would.
            self.registry.exit(tgid)

    def catch_up(self, *, pinning: bool = False) -> None:
        """Follow every fork and exec that happened before now.

        ``pinning``: a new image is about to be pinned; with the procfs
        source, processes that existed before it must be recorded as seen
        even if nothing is tracked yet, so they are never taken for its
        children later.
        """
        if self._connector is not None:
            self._drain()
        elif self.source == "procfs" and (self.registry.mms or pinning):
            self._look()

    # -- procfs ---------------------------------------------------------------------------

    def _look(self) -> None:
        if self._scan.quiet():
            return
        new = self._scan.new_processes()
        layouts = {image.identity.layout for image in self._holders()
                   if image.identity is not None}
        if not layouts:
            return
        stats = {facts.pid: facts for facts in new}
        for facts in new:
            if facts.layout in layouts and facts.pid not in self.registry.mms:
                origin = self._origin_by_chain(facts, stats)
                if origin is not None:
                    self._adopt(facts.pid, origin)

    def _holders(self) -> list[Image]:
        """Pinned images with enablers to hand down."""
        return [image for image in self.memory.images() if image.tgid in self.registry.mms]

    def _origin_by_chain(self, facts: StatFacts, stats: dict[int, StatFacts]) -> Image | None:
        """The image ``facts`` is a fork copy of, if a holder's.

        Up the parent chain, the first ancestor of the same image decides:
        a holder is the origin; one holding nothing means the lineage runs
        through it intact and nothing was inherited (siblings forked by one
        parent share its image, holders or not). Only a chain that leaves
        the image (the parent exited and the child was reparented, or exec'd
        after the fork) leads to the orphan rule: an exiting holder of that
        image, else the one live holder, if there is exactly one.
        """
        ancestor = facts.ppid
        for _ in range(_CHAIN_MAX):
            if ancestor <= 1:
                break
            image = self.memory.image(Tgid(ancestor)) or self._lost.get(ancestor)
            if (image is not None and image.identity is not None
                    and image.identity.layout == facts.layout
                    and image.tgid in self.registry.mms):
                return image
            parent = stats.get(ancestor) or self.memory.stat(ancestor)
            if parent is None:
                break
            if parent.layout == facts.layout:
                return None
            ancestor = parent.ppid
        same = [image for image in self._holders()
                if image.identity is not None and image.identity.layout == facts.layout]
        exiting = [image for image in same if image.pidfd.group_exited()]
        if exiting:
            return exiting[-1]
        return same[0] if len(same) == 1 else None

    # -- the connector ----------------------------------------------------------------------

    def _subscribe(self) -> None:
        """Listen to forks from now on (synchronously: the caller is still in
        its ioctl, so it cannot have forked since)."""
        if self.source == "connector" and self._connector is None:
            try:
                self._connector = ProcConnector()
            except OSError as exc:
                # Joined at start, refused now (a lost capability?): fall back.
                log.warning("process connector lost (%s): following processes through /proc",
                            exc)
                self.source, self.reason = "procfs", f"connector lost: {exc}"
                for image in self.memory.images():
                    self._look_soon(image.tgid)
                return
            self._connector_ready.set()

    def _unsubscribe_if_idle(self) -> None:
        """Every process event on the machine costs us CPU: stop listening when
        no process holds enablers."""
        if self._connector is not None and not self.registry.mms:
            self._connector.close()
            self._connector = None
            self._followed = frozenset()

    def _drain(self) -> None:
        assert self._connector is not None
        if self._draining:
            return
        self._draining = True
        try:
            self.process_events(self._connector.drain())
        finally:
            self._draining = False

    def process_events(self, events: Sequence[ProcEvent]) -> None:
        """Apply process connector events, in order."""
        self._events += len(events)
        for event in events:
            if isinstance(event, ForkEvent):
                if event.is_thread:
                    continue
                origin = (self.memory.image(Tgid(event.parent_tgid))
                          or self._lost.get(event.parent_tgid))
                if origin is not None and origin.tgid in self.registry.mms:
                    self._adopt(event.child_tgid, origin)
            elif isinstance(event, ExecEvent):
                image = self.memory.image(event.tgid)
                if image is not None and not image.alive():
                    self._gone(event.tgid, catch_up=False)
            elif isinstance(event, EventsLost):
                self._look_everywhere()
        self._refilter()

    def _refilter(self) -> None:
        """Let the kernel pass only our followed processes' forks and execs.

        A process followed from an event (a child adopted, or lost) ran
        before the filter named it: its forks and its exec in between were
        dropped. So after the new filter is in place, those are looked for
        directly, and what that finds is followed and filtered for in turn.
        """
        while self._connector is not None:
            # Execs matter of pinned images only, forks of those and of the
            # lost; one search serves both (a lost one's exec passes too).
            followed = frozenset({image.tgid for image in self.memory.images()}
                                 | self._lost.keys())
            if followed != self._followed:
                try:
                    self._connector.set_filter(encode(program(followed)))
                except OSError as exc:
                    log.warning("process connector filter refused (%s): taking every fork", exc)
                    self._connector.set_filter(encode(program(None)))
                self._followed = followed
                self._filters += 1
            hidden, self._hidden = self._hidden, set()
            if not hidden:
                return
            self._find_hidden(hidden)

    def _find_hidden(self, hidden: set[int]) -> None:
        """What processes followed late did while the filter hid them.

        Their children are listed in ``/proc/<pid>/task/<tid>/children``
        (every one was forked after its parent, itself forked after its
        origin registered: each is a candidate copy); then an image that
        exec'd or exited meanwhile is let go, as its EXEC would have. A
        process that exited (or is exiting: ``PF_EXITING``) has had its
        children reparented away, to an ancestor (a subreaper) or init:
        those are looked for there.
        """
        bereaved: set[Tgid] = set()
        for pid in sorted(hidden):
            image = self.memory.image(Tgid(pid))
            origin = image if image is not None else self._lost.get(pid)
            if origin is None or origin.tgid not in self.registry.mms:
                continue
            for child in _children(pid, self._proc):
                if Tgid(child) not in self.registry.mms and child not in self._lost:
                    self._adopt(child, origin)
            facts = self.memory.stat(pid)
            if facts is None or facts.flags & PF_EXITING:
                bereaved.add(origin.tgid)
            if image is not None and not image.alive():
                self._gone(image.tgid, catch_up=False)
        for tgid in sorted(bereaved):
            self._look_for_orphans(tgid)

    def _look_for_orphans(self, origin: Tgid) -> None:
        """Copies of ``origin``'s image among the children of its ancestors
        and of init, whose parent is of another image: reparented orphans.

        Only there: reading a process's ``stat`` waits while it execs
        (``exec_update_lock``), so strangers are not read at all.
        """
        reapers = [*_ancestors(origin, self._proc), 1]
        holders = {image.identity.layout for image in self._holders()
                   if image.identity is not None}
        stats: dict[int, StatFacts] = {}
        for reaper in reapers:
            parent = self.memory.stat(reaper)
            for pid in _children(reaper, self._proc):
                if Tgid(pid) in self.registry.mms or pid in self._lost:
                    continue
                facts = self.memory.stat(pid)
                if (facts is not None and facts.layout in holders
                        and (parent is None or parent.layout != facts.layout)):
                    stats[pid] = facts
        for facts in stats.values():
            found = self._origin_by_chain(facts, stats)
            if found is not None:
                self._adopt(facts.pid, found)

    def _look_everywhere(self) -> None:
        """After lost connector events: every new process, every image."""
        new = self._scan.new_processes()
        stats = {facts.pid: facts for facts in new}
        for facts in new:
            if facts.pid not in self.registry.mms:
                origin = self._origin_by_chain(facts, stats)
                if origin is not None:
                    self._adopt(facts.pid, origin)
        self.check_images(catch_up=False)


    # -- adoption, exec and exit --------------------------------------------------------------

    def _adopt(self, pid: int, origin: Image) -> None:
        """``user_event_mm_dup`` for a child found late, if it is a fork copy of ``origin``."""
        child = Tgid(pid)
        self._hidden.add(pid)
        try:
            image = self.memory.pin_copy(child, origin)
        except SharesMm as exc:
            # It runs on the origin's mm: the origin's enablers are its own
            # (user_events_fork, CLONE_VM) until the origin leaves that mm.
            log.debug("fork %d -> %d shares the mm: %s", origin.tgid, pid, exc)
            self._lost[pid] = origin
            self._remember_sharer(origin.tgid, pid)
            return
        except ProcessLookupError as exc:
            # Not a copy (exec'd, shares the mm, gone): its own children may
            # still be copies of the origin.
            log.debug("fork %d -> %d not followed: %s", origin.tgid, pid, exc)
            if isinstance(exc, Execing):
                # Never read while it execs (its stat waits for the exec, the
                # exec perhaps for us): what it forked before is not looked for.
                self._hidden.discard(pid)
            self._lost[pid] = origin
            self._lost.move_to_end(pid)
            while len(self._lost) > _LOST_MAX:
                self._lost.popitem(last=False)
            return
        except OSError as exc:
            log.debug("fork %d -> %d not followed: %s", origin.tgid, pid, exc)
            return
        if child in self.registry.mms:
            self.registry.exit(child)  # a previous holder of the number, gone unseen
        self.registry.fork(origin.tgid, child)
        self.exits.watch(child, image.pidfd.fd)
        self._look_soon(child)
        self._adopted += 1
        log.debug("fork %d -> %d followed", origin.tgid, pid)

    def check_images(self, *, catch_up: bool = True) -> None:
        """Notice every pinned image that exec'd or exited."""
        gone = [image.tgid for image in self.memory.images() if not image.alive()]
        if gone and catch_up:
            self.catch_up()
        for tgid in gone:
            self._gone(tgid, catch_up=False)

    def _look_soon(self, tgid: Tgid) -> None:
        """procfs: look at ``tgid``'s image for an exec ``LIVENESS_PERIOD_S``
        from now (unless it already waits no longer)."""
        if self.source != "procfs":
            return
        before = self._due.get(tgid)
        if before is not None and before[1] == LIVENESS_PERIOD_S:
            return
        due = (time.monotonic() + LIVENESS_PERIOD_S, LIVENESS_PERIOD_S)
        self._due[tgid] = due
        heapq.heappush(self._looks, (due[0], tgid))

    def check_due_images(self) -> None:
        """Look at the images whose turn it is; those still running wait
        twice as long for the next look (up to ``LIVENESS_MAX_S``)."""
        now = time.monotonic()
        gone: list[Tgid] = []
        while self._looks and self._looks[0][0] <= now:
            at, tgid = heapq.heappop(self._looks)
            due = self._due.get(tgid)
            image = self.memory.image(tgid)
            if due is None or due[0] != at or image is None:
                continue  # unpinned, or rescheduled since
            if not image.alive():
                gone.append(tgid)
                continue
            wait = min(2 * due[1], LIVENESS_MAX_S)
            self._due[tgid] = (now + wait, wait)
            heapq.heappush(self._looks, (now + wait, tgid))
        if gone:
            self.catch_up()
            for tgid in gone:
                self._gone(tgid, catch_up=False)

    def exited(self, tgids: list[Tgid]) -> None:
        """Thread groups whose pidfds said they exited (one catch up for all)."""
        self.catch_up()
        for tgid in tgids:
            self._gone(tgid, catch_up=False)
        self._refilter()

    def _gone(self, tgid: Tgid, *, catch_up: bool = True) -> None:
        """``user_event_mm_remove`` at exec or exit: adopt the image's copies
        first (they keep its enablers), then detach it."""
        if catch_up:
            self.catch_up()
        image = self.memory.image(tgid)
        if image is not None:
            if image.pidfd.group_exited():
                self._exits += 1
            else:
                self._execs += 1
            self._hand_over(image)
        self._sharers.pop(tgid, None)
        self.registry.exit(tgid, deferred=True)
        self._release_needed.set()
        self.memory.unpin(tgid)
        self.exits.unwatch(tgid)
        self._due.pop(tgid, None)
        self._lost.pop(tgid, None)
        self._unsubscribe_if_idle()

    def _remember_sharer(self, origin: Tgid, pid: int) -> None:
        facts = self.memory.stat(pid)
        sharers = self._sharers.setdefault(origin, {})
        if facts is not None and len(sharers) < _SHARERS_MAX:
            sharers[pid] = facts.starttime

    def _hand_over(self, image: Image) -> None:
        """The image's process leaves its mm (exit, exec): children still on
        that mm (CLONE_VM) take its enablers on, as the kernel's shared
        ``user_event_mm`` outlives the registrant until its last task is gone.

        Such a child, with its origin gone from the mm, is pinned as a copy
        of it (same mm, same AT_RANDOM bytes, never exec'd), so it is adopted.
        """
        for pid, starttime in self._sharers.get(image.tgid, {}).items():
            facts = self.memory.stat(pid)
            if (facts is not None and facts.starttime == starttime
                    and facts.flags & PF_FORKNOEXEC and Tgid(pid) not in self.registry.mms):
                self._adopt(pid, image)

    # -- tasks ---------------------------------------------------------------------------------

    async def release_detached(self) -> None:
        """Drop detached images' references in bounded steps, serving between."""
        while True:
            await self._release_needed.wait()
            self._release_needed = trio.Event()
            while not self.registry.release_detached(RELEASE_BUDGET):
                self._changed()
                await trio.sleep(0)
            self._changed()

    async def follow_exits(self) -> None:
        while True:
            self.exited(await self.exits.wait_exited())
            self._changed()

    async def follow_connector(self) -> None:
        while True:
            connector = self._connector
            if connector is None:
                self._connector_ready = trio.Event()
                await self._connector_ready.wait()
                continue
            # Ends when _unsubscribe_if_idle closes it.
            async for event in connector:
                self._draining = True
                try:
                    self.process_events([event, *connector.drain()])
                finally:
                    self._draining = False

    async def watch_images(self) -> None:
        """procfs: an exec is only seen by looking; look at images when due."""
        while True:
            if not self.memory.images():
                self._holding = trio.Event()
                await self._holding.wait()
            await trio.sleep(LIVENESS_PERIOD_S)
            if self.source == "procfs" and self.registry.mms:
                before = len(self.registry.mms)
                self.check_due_images()
                if len(self.registry.mms) != before:
                    self._changed()

    def close(self) -> None:
        if self._connector is not None:
            self._connector.close()
            self._connector = None
        self.exits.close()
        self._scan.close()


def _children(pid: int, proc: str) -> list[int]:
    """The children of every thread of ``pid`` (CONFIG_PROC_CHILDREN; none
    if it is gone, or the kernel does not list them)."""
    children: list[int] = []
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return children
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/children", "rb") as f:
                children += map(int, f.read().split())
        except OSError:
            continue  # a thread that ended
    return children


def _ancestors(pid: int, proc: str) -> list[int]:
    """``pid``'s parent, its parent, ... below init, from ``status`` (which,
    unlike ``stat``, never waits for an exec)."""
    chain: list[int] = []
    for _ in range(_CHAIN_MAX):
        try:
            with open(f"{proc}/{pid}/status", "rb") as f:
                ppid = next(int(line.split()[1]) for line in f if line.startswith(b"PPid:"))
        except (OSError, StopIteration, ValueError):
            break
        if ppid <= 1:
            break
        chain.append(ppid)
        pid = ppid
    return chain
