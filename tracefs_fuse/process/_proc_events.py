"""Fork, exec and exit of tasks, as user_events has to follow them.

The kernel copies a process's enablers into its forked children and drops
them at exec and exit (kernel/trace/trace_events_user.c ``user_event_mm_dup``,
``user_event_mm_remove``), hooks FUSE never sees. Two kernel sources stand in:

* The netlink **process connector** (drivers/connector/cn_proc.c): a multicast
  of every fork, exec and exit in the system. It is the only source for fork
  and exec. :class:`ProcConnector` turns it into :data:`ProcEvent` records.
* **pidfds**: one per tracked thread group, readable once the whole group has
  exited. :class:`ExitWatcher` waits on them. This is the source for exit.

Why exit comes from pidfds (measured and read, see the tests):
  * The connector reports *tasks*. Every thread's exit is an EXIT message, and
    a leader that calls ``pthread_exit`` first reports EXIT while its other
    threads run on. Whether an EXIT ends the process cannot be read from the
    message; a pidfd polls readable exactly when the group is empty and its
    leader dead (``pidfd_poll`` -> ``thread_group_exited``).
  * The connector is lossy: a full socket buffer drops messages (ENOBUFS), and
    it only serves listeners in the initial user and pid namespaces
    (``cn_proc_mcast_ctl``). A pidfd cannot miss its one event.
  * Latency is the same: both are signalled synchronously from ``do_exit``
    (pidfd from ``exit_notify``, then ``proc_exit_connector``). Measured over
    200 exits with both armed in one trio loop: median 209 us (pidfd) vs
    212 us (connector) from asking the helper to quit, each first about half
    the time; kernel timestamp to connector delivery, median 48 us.

Rules:
  * Connector EXIT messages are still delivered (:class:`ExitEvent`, per
    task), but nothing should treat one as the end of a process.
  * ``PROC_EVENT_FORK`` for a *thread* reports the parent of the whole process
    as its parent (``copy_process`` gives CLONE_THREAD children the creator's
    ``real_parent``): the parent fields of a thread creation do not name the
    creating process. A new task is a thread iff ``child_pid != child_tgid``.
  * After ENOBUFS the socket is replaced by a freshly subscribed one before
    :class:`EventsLost` is delivered, so a consumer that resynchronises on it
    (re-checks every tracked process) misses nothing after its re-check.
    A fresh socket, not a re-sent LISTEN: on kernels where an undeliverable
    message resets ``proc_event_num_listeners`` to 0, only a socket's *first*
    LISTEN increments it again.

Caveats:
  * Needs CAP_NET_ADMIN (to join the multicast group) and the initial user,
    pid and network namespaces (the connector's kernel socket lives in
    ``init_net``); otherwise the subscription is refused or never acked.
    The user and pid namespaces are read first (their fixed initial inode
    numbers), so the usual case, a rootless ``run``, is refused at once
    rather than after the ack timeout, which stays as the backstop.
  * Events are hints about *numbers*: by the time one is handled, the pid may
    name a process that exec'd again or a successor. Decide with
    :meth:`~tracefs_fuse.process._memory.VmProcessMemory.is_current`, which
    looks at the tracked process itself.
  * ``clone(CLONE_PARENT)`` children report the creator's parent as parent;
    ``clone(CLONE_VM)`` without CLONE_THREAD (vfork, posix_spawn) makes a new
    process sharing its parent's mm, reported like any fork.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import socket
import struct
import time
from collections import deque
from typing import TypeAlias

import msgspec
import trio

from ..engine._memory import Tgid

# include/uapi/linux/netlink.h, connector.h, cn_proc.h
NETLINK_CONNECTOR = 11
CN_IDX_PROC = 0x1
CN_VAL_PROC = 0x1
NLMSG_DONE = 0x3
PROC_CN_MCAST_LISTEN = 1
PROC_EVENT_NONE = 0x00000000
PROC_EVENT_FORK = 0x00000001
PROC_EVENT_EXEC = 0x00000002
PROC_EVENT_EXIT = 0x80000000
#: include/uapi/asm-generic/socket.h; Python's socket module lacks them.
SO_RCVBUFFORCE = 33
SO_ATTACH_FILTER = 26
#: include/linux/socket.h, include/uapi/linux/netlink.h
SOL_NETLINK = 270
NETLINK_BROADCAST_ERROR = 4

#: struct nlmsghdr { __u32 nlmsg_len; __u16 nlmsg_type; __u16 nlmsg_flags;
#:                   __u32 nlmsg_seq; __u32 nlmsg_pid; };
_NLMSGHDR = struct.Struct("=IHHII")
#: struct cb_id { __u32 idx; __u32 val; };
#: struct cn_msg { struct cb_id id; __u32 seq; __u32 ack; __u16 len; __u16 flags; __u8 data[0]; };
_CN_MSG = struct.Struct("=IIIIHH")
#: struct proc_event { enum proc_cn_event what; __u32 cpu;
#:                     __u64 __attribute__((aligned(8))) timestamp_ns;  /* ktime_get_ns() */
#:                     union { ... } event_data; };
#: The union starts at offset 16 of proc_event; proc_event itself follows cn_msg
#: at offset 20 of the payload, so nothing here is aligned: "=" throughout.
_PROC_EVENT = struct.Struct("=IIQ")
#: struct { __u32 err; } ack;
_ACK = struct.Struct("=I")
#: struct fork_proc_event { __kernel_pid_t parent_pid; __kernel_pid_t parent_tgid;
#:                          __kernel_pid_t child_pid; __kernel_pid_t child_tgid; };
_FORK = struct.Struct("=iiii")
#: struct exec_proc_event { __kernel_pid_t process_pid; __kernel_pid_t process_tgid; };
_EXEC = struct.Struct("=ii")
#: struct exit_proc_event { __kernel_pid_t process_pid; __kernel_pid_t process_tgid;
#:                          __u32 exit_code, exit_signal;
#:                          __kernel_pid_t parent_pid; __kernel_pid_t parent_tgid; };
_EXIT = struct.Struct("=iiIIii")
#: enum proc_cn_mcast_op, the 4-byte LISTEN every kernel since 2.6.15 accepts.
#: (6.6+ also takes an 8-byte struct proc_input with an event-kind filter; a
#: socket filter selects by pid as well: see _proc_filter.)
_MCAST_OP = struct.Struct("=I")

_HEADERS = _NLMSGHDR.size + _CN_MSG.size
_EVENT_DATA = _HEADERS + _PROC_EVENT.size
_RECV_SIZE = 4096


class ForkEvent(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A task was created (``proc_fork_connector``, end of ``copy_process``)."""

    parent_pid: int
    parent_tgid: int
    child_pid: int
    child_tgid: int
    timestamp_ns: int

    @property
    def is_thread(self) -> bool:
        """A new thread of an existing process, not a new process.

        ``child_tgid == parent_tgid`` does not work: the kernel reports a
        thread's parent as the parent of its whole process.
        """
        return self.child_pid != self.child_tgid


class ExecEvent(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A process replaced its image (``proc_exec_connector``, after the new mm is in place).

    A non-leader thread that execs takes over the leader's pid first
    (``de_thread``), so ``pid == tgid`` always.
    """

    pid: int
    tgid: Tgid
    timestamp_ns: int


class ExitEvent(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A *task* exited (``proc_exit_connector``, after ``exit_notify``).

    Not the end of its process unless it was the last thread: see
    :class:`ExitWatcher`. ``exit_code`` is the wait status (``code << 8`` or the
    signal number), for a thread of an exiting group the group's.
    """

    pid: int
    tgid: Tgid
    exit_code: int
    timestamp_ns: int


class EventsLost(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The connector dropped messages (ENOBUFS): re-check every tracked process."""


ProcEvent: TypeAlias = ForkEvent | ExecEvent | ExitEvent | EventsLost


class ConnectorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    events: int
    #: ENOBUFS seen, i.e. EventsLost delivered.
    overruns: int


class WatcherStatistics(msgspec.Struct, frozen=True, kw_only=True):
    watched: int
    #: Thread-group exits reported.
    exits: int


#: include/linux/proc_ns.h: the initial namespaces' fixed inode numbers, which
#: ``/proc/self/ns/<kind>`` shows (every other namespace gets a number from
#: proc_alloc_inum, below these).
PROC_USER_INIT_INO = 0xEFFFFFFD
PROC_PID_INIT_INO = 0xEFFFFFFC


def outside_initial_namespaces(user_ns_ino: int, pid_ns_ino: int) -> str | None:
    """Why ``cn_proc_mcast_ctl`` ignores our LISTEN, read from our namespaces.

    The kernel drops a request from a task whose user namespace is not
    ``init_user_ns`` or whose active pid namespace is not ``init_pid_ns``,
    without an ack; so waiting for one only costs the timeout.
    """
    if user_ns_ino != PROC_USER_INIT_INO:
        return "outside the initial user namespace"
    if pid_ns_ino != PROC_PID_INIT_INO:
        return "outside the initial pid namespace"
    return None


def _namespaces_refused() -> str | None:
    try:
        user = os.stat("/proc/self/ns/user").st_ino
        pid = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None  # no procfs or no namespaces: the ack decides
    return outside_initial_namespaces(user, pid)


def _subscribe(rcvbuf: int, ack_timeout_s: float, early: deque[ProcEvent],
               code: bytes | None = None) -> socket.socket:
    """A connector socket that has joined CN_IDX_PROC and been acked.

    Messages that arrive before the ack are real events; they go to ``early``.
    ``code``: a socket filter attached before LISTEN (it must pass acks).

    Raises:
        PermissionError: (EPERM) no CAP_NET_ADMIN, or outside the initial user
            or pid namespace where that can be read (the kernel would never ack).
        TimeoutError: (ETIMEDOUT) no ack: outside the initial namespaces in a
            way not read beforehand, or no process connector in this kernel.
        OSError: the kernel's ack carried an error.
    """
    refused = _namespaces_refused()
    if refused is not None:
        raise PermissionError(errno.EPERM, f"the process connector ignores listeners {refused}")
    sock = socket.socket(socket.AF_NETLINK,
                         socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                         NETLINK_CONNECTOR)
    try:
        try:
            # FORCE ignores net.core.rmem_max (root only); a big buffer is what
            # keeps a fork storm from overrunning us.
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if code is not None:
            _attach_filter(sock, code)
        sock.bind((0, CN_IDX_PROC))
        # The kernel answers with cn_msg.ack = our ack + 1 (cn_proc_ack); its seq
        # is overwritten by a per-CPU counter. The ack is multicast to every
        # listener, so use a number other listeners' acks will not carry.
        ack = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        payload = _MCAST_OP.pack(PROC_CN_MCAST_LISTEN)
        cn = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, ack, len(payload), 0)
        nl = _NLMSGHDR.pack(_NLMSGHDR.size + len(cn) + len(payload), NLMSG_DONE, 0, 0, 0)
        sock.send(nl + cn + payload)
        deadline = time.monotonic() + ack_timeout_s
        while True:
            left = deadline - time.monotonic()
            # poll, never select(): the socket's number may be 1024 or more.
            if left <= 0 or not _readable(sock.fileno(), left):
                raise TimeoutError(errno.ETIMEDOUT, "process connector did not ack LISTEN")
            try:
                data = sock.recv(_RECV_SIZE)
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                # The ack was queued during send(), ahead of the messages an
                # overrun drops; those are covered by the caller's resync (or
                # precede any tracking, on first subscription).
                continue
            err = _parse(data, early, ack + 1)
            if err is not None:
                if err:
                    raise OSError(err, os.strerror(err))
                return sock
    except BaseException:
        sock.close()
        raise


def _attach_filter(sock: socket.socket, code: bytes) -> None:
    """Replace ``sock``'s socket filter with ``code`` (``struct sock_filter``s).

    ``sk_attach_filter`` swaps the program under RCU: every message queued
    after this call was judged by the new one, none is judged by neither.
    """
    buffer = ctypes.create_string_buffer(code, len(code))
    # struct sock_fprog { unsigned short len; struct sock_filter *filter; };
    fprog = struct.pack("@HP", len(code) // 8, ctypes.addressof(buffer))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def _keeper() -> socket.socket:
    """A member of the group that makes no broadcast "undelivered".

    Kernels with c46bfba1337d and before its revert (6.6.13 to early 2024
    stable releases) reset ``proc_event_num_listeners`` to 0 whenever
    ``cn_netlink_send_mult`` returns -ESRCH, i.e. whenever no socket took a
    message, and then send nothing until a new LISTEN: a filter that drops a
    message while we are the only listener would silence the connector for
    good. This socket is never read: its tiny buffer fills, after which every
    broadcast fails to reach it, and with NETLINK_BROADCAST_ERROR a failed
    delivery makes ``netlink_broadcast_filtered`` return -ENOBUFS, not -ESRCH.
    It never wakes us, and costs the kernel one overrun count per message.
    """
    sock = socket.socket(socket.AF_NETLINK,
                         socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                         NETLINK_CONNECTOR)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 0)  # SOCK_MIN_RCVBUF
        sock.setsockopt(SOL_NETLINK, NETLINK_BROADCAST_ERROR, 1)
        sock.bind((0, CN_IDX_PROC))
    except BaseException:
        sock.close()
        raise
    return sock


def _parse(data: bytes, out: deque[ProcEvent], ack: int = -1) -> int | None:
    """Append the events in one datagram to ``out``.

    Returns the error of the LISTEN ack numbered ``ack`` if the datagram holds
    it, else None. Other acks, other connector ids and the event kinds that
    user_events does not care about (uid, gid, sid, ptrace, comm, coredump)
    are skipped.
    """
    result = None
    off = 0
    while off + _EVENT_DATA <= len(data):
        nl_len, nl_type, _, _, _ = _NLMSGHDR.unpack_from(data, off)
        if nl_len < _EVENT_DATA or off + nl_len > len(data):
            break
        idx, val, _, cn_ack, _, _ = _CN_MSG.unpack_from(data, off + _NLMSGHDR.size)
        if nl_type == NLMSG_DONE and (idx, val) == (CN_IDX_PROC, CN_VAL_PROC):
            what, _, ts = _PROC_EVENT.unpack_from(data, off + _HEADERS)
            at = off + _EVENT_DATA
            if what == PROC_EVENT_FORK:
                ppid, ptgid, cpid, ctgid = _FORK.unpack_from(data, at)
                out.append(ForkEvent(parent_pid=ppid, parent_tgid=ptgid, child_pid=cpid,
                                     child_tgid=ctgid, timestamp_ns=ts))
            elif what == PROC_EVENT_EXEC:
                pid, tgid = _EXEC.unpack_from(data, at)
                out.append(ExecEvent(pid=pid, tgid=Tgid(tgid), timestamp_ns=ts))
            elif what == PROC_EVENT_EXIT:
                pid, tgid, code, _, _, _ = _EXIT.unpack_from(data, at)
                out.append(ExitEvent(pid=pid, tgid=Tgid(tgid), exit_code=code, timestamp_ns=ts))
            elif what == PROC_EVENT_NONE and cn_ack == ack:
                (result,) = _ACK.unpack_from(data, at)
        off += (nl_len + 3) & ~3  # NLMSG_ALIGN
    return result


class ProcConnector:
    """The process connector as a stream of :data:`ProcEvent`.

    :meth:`receive` (or ``async for``) waits; :meth:`drain` takes what is
    already queued without waiting. Both consume the same queue, in order, so
    hand whatever either returns to the same handler.

    The subscription is the legacy all-events LISTEN, which works on every
    kernel; :meth:`set_filter` narrows it in the kernel (``_proc_filter``),
    and from then on a member that never reads keeps a dropped message from
    counting as undelivered (see ``_keeper``).

    Args:
        rcvbuf: socket receive buffer in bytes (a message is 76 bytes of
            payload, about 768 bytes of buffer accounting).
        ack_timeout_s: how long to wait for the kernel to acknowledge LISTEN;
            it answers synchronously, so this only bounds failure.

    Raises:
        PermissionError: (EPERM) no CAP_NET_ADMIN.
        TimeoutError: (ETIMEDOUT) the kernel never acknowledged the LISTEN.
    """

    def __init__(self, *, rcvbuf: int = 8 << 20, ack_timeout_s: float = 1.0) -> None:
        self._rcvbuf = rcvbuf
        self._ack_timeout_s = ack_timeout_s
        self._pending: deque[ProcEvent] = deque()
        self._code: bytes | None = None
        self._keeper: socket.socket | None = None
        self._sock: socket.socket | None = _subscribe(rcvbuf, ack_timeout_s, self._pending)
        self._events = 0
        self._overruns = 0

    def set_filter(self, code: bytes) -> None:
        """Deliver only what the socket filter ``code`` passes (it must pass
        acks: ``_proc_filter.program``), from now on and after any overrun.

        Raises:
            OSError: the kernel refused the program (ENOMEM: over
                net.core.optmem_max); the previous filter stays.
        """
        sock = self._socket()
        if self._keeper is None:
            self._keeper = _keeper()
        _attach_filter(sock, code)
        self._code = code

    def drain(self, limit: int = 4096) -> list[ProcEvent]:
        """Every event already queued (at most ``limit``), without waiting.

        Raises:
            trio.ClosedResourceError: the connector was closed.
        """
        self._fill(limit)
        out = [self._pending.popleft() for _ in range(min(limit, len(self._pending)))]
        self._events += len(out)
        return out

    async def receive(self) -> ProcEvent:
        """The next event, waiting for one.

        Raises:
            trio.ClosedResourceError: the connector was closed.
        """
        while not self._pending:
            self._fill(1)
            if self._pending:
                break
            sock = self._socket()
            try:
                await trio.lowlevel.wait_readable(sock)
            except trio.ClosedResourceError:
                if self._sock is None:
                    raise
                # drain() replaced the socket after an overrun: wait on the new one.
        self._events += 1
        return self._pending.popleft()

    def __aiter__(self) -> ProcConnector:
        return self

    async def __anext__(self) -> ProcEvent:
        try:
            return await self.receive()
        except trio.ClosedResourceError:
            raise StopAsyncIteration from None

    def statistics(self) -> ConnectorStatistics:
        return ConnectorStatistics(events=self._events, overruns=self._overruns)

    def close(self) -> None:
        if self._sock is not None:
            self._close_socket(self._sock)
            self._sock = None
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None

    def __enter__(self) -> ProcConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------

    def _socket(self) -> socket.socket:
        if self._sock is None:
            raise trio.ClosedResourceError("process connector closed")
        return self._sock

    def _fill(self, want: int) -> None:
        """Read datagrams until ``want`` events are pending or none is queued."""
        sock = self._socket()
        while len(self._pending) < want:
            try:
                data = sock.recv(_RECV_SIZE)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                sock = self._resubscribe()
                continue
            _parse(data, self._pending)

    def _resubscribe(self) -> socket.socket:
        """Swap in a fresh subscription after an overrun; queue EventsLost."""
        self._overruns += 1
        self._pending.append(EventsLost())
        new = _subscribe(self._rcvbuf, self._ack_timeout_s, self._pending, self._code)
        old, self._sock = self._sock, new
        assert old is not None
        self._close_socket(old)
        return new

    @staticmethod
    def _close_socket(sock: socket.socket) -> None:
        if trio.lowlevel.in_trio_run():
            # Wake any task blocked in wait_readable() on it (trio's rule).
            trio.lowlevel.notify_closing(sock)
        sock.close()


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` polls readable within ``timeout_s``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


class ExitWatcher:
    """Thread-group exits, from pidfds: exact, and never lost.

    One epoll set holds a duplicate of each watched pidfd, so the watcher's
    lifetime is independent of whoever owns the original (e.g.
    :class:`~tracefs_fuse.process._memory.VmProcessMemory`). A pidfd stays
    readable once its group has exited; a reported group is unwatched.
    """

    def __init__(self) -> None:
        self._epoll: select.epoll | None = select.epoll()
        self._fds: dict[Tgid, int] = {}
        self._tgids: dict[int, Tgid] = {}
        self._exits = 0

    def watch(self, tgid: Tgid, pidfd: int) -> None:
        """Report when the group behind ``pidfd`` exits; replaces any earlier watch."""
        self.unwatch(tgid)
        fd = os.dup(pidfd)
        self._poller().register(fd, select.EPOLLIN)
        self._fds[tgid] = fd
        self._tgids[fd] = tgid

    def unwatch(self, tgid: Tgid) -> None:
        """Stop watching ``tgid``; no-op if not watched."""
        fd = self._fds.pop(tgid, None)
        if fd is not None:
            del self._tgids[fd]
            self._poller().unregister(fd)
            os.close(fd)

    def statistics(self) -> WatcherStatistics:
        return WatcherStatistics(watched=len(self._fds), exits=self._exits)

    def exited_nowait(self) -> list[Tgid]:
        """Groups that have exited (now unwatched), without waiting."""
        gone = [self._tgids[fd] for fd, _ in self._poller().poll(0)]
        for tgid in gone:
            self.unwatch(tgid)
        self._exits += len(gone)
        return gone

    async def wait_exited(self) -> list[Tgid]:
        """Wait until at least one watched group has exited; return those (now unwatched).

        Raises:
            trio.ClosedResourceError: the watcher was closed.
        """
        while True:
            gone = self.exited_nowait()
            if gone:
                return gone
            await trio.lowlevel.wait_readable(self._poller().fileno())

    def close(self) -> None:
        if self._epoll is None:
            return
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._tgids.clear()
        if trio.lowlevel.in_trio_run():
            trio.lowlevel.notify_closing(self._epoll.fileno())
        self._epoll.close()
        self._epoll = None

    def _poller(self) -> select.epoll:
        if self._epoll is None:
            raise trio.ClosedResourceError("exit watcher closed")
        return self._epoll
