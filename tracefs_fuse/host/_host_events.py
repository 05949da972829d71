"""The host kernel's highest trace event id, so that ours can stay above it.

A tool that reads ``events/<system>/<name>/id`` from our mount and hands the
number to ``perf_event_open(PERF_TYPE_TRACEPOINT)`` reaches the host kernel,
which looks the id up among *its* events. The engine therefore starts its
dynamic ids above the host's (``engine._events.first_dynamic_id``); this
module finds the host's highest.

Where from, in order:
  1. a tracefs already mounted at ``/sys/kernel/tracing`` or
     ``/sys/kernel/debug/tracing`` (checked with ``statfs``: a tracefs-fuse
     mount there is not the host's);
  2. a private, detached tracefs (``fsopen``/``fsmount``: it is attached
     nowhere, no other process sees it, and it goes away with its descriptor),
     for a root daemon on a host that mounts none;
  3. nothing: an unprivileged daemon in a container that has no tracefs.

Reading costs one ``open``/``read`` of each event's ``id``: 2325 events on
this machine's 6.18 kernel, 20 ms of CPU and 25 to 55 ms of wall time
(best of 10, detached mount, a busy 2-CPU machine; the statfs and fsmount
calls themselves take well under 1 ms); 15 ms since each ``id`` is opened
relative to its system's directory (issue 21). It runs once, before the mount,
when the engine is built.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..lib import libc, syscall

log = logging.getLogger(__name__)

#: ``include/uapi/linux/magic.h``
TRACEFS_MAGIC = 0x74726163
#: Where a host mounts its tracefs (``/sys/kernel/debug/tracing`` is the
#: automount of debugfs, also a tracefs).
TRACING_DIRS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

# The new mount API (linux/mount.h); the numbers are the same on every
# architecture that has these calls (the unified syscall table, 5.2+).
SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 430, 431, 432
FSOPEN_CLOEXEC = 0x1
FSCONFIG_CMD_CREATE = 6
FSMOUNT_CLOEXEC = 0x1
MOUNT_ATTR_RDONLY = 0x1


def is_tracefs(path: str) -> bool:
    """``statfs(path).f_type == TRACEFS_MAGIC``."""
    # struct statfs { __fsword_t f_type; ... } is 120 bytes on 64-bit Linux.
    buf = ctypes.create_string_buffer(256)
    if libc.statfs(os.fsencode(path), buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value == TRACEFS_MAGIC


@contextmanager
def detached_tracefs() -> Iterator[str]:
    """A fresh tracefs, mounted nowhere, as a path usable by this process.

    Raises:
        OSError: EPERM without CAP_SYS_ADMIN, ENOSYS before Linux 5.2, ENODEV
            in a kernel without tracefs.
    """
    fs = syscall(SYS_FSOPEN, b"tracefs", FSOPEN_CLOEXEC)
    try:
        syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0)
        mnt = syscall(SYS_FSMOUNT, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY)
    finally:
        os.close(fs)
    try:
        yield f"/proc/self/fd/{mnt}"
    finally:
        os.close(mnt)


def highest_event_id(tracing: str) -> int | None:
    """The highest ``events/*/*/id`` under a tracefs, None if it has none."""
    highest = None
    try:
        systems = list(os.scandir(os.path.join(tracing, "events")))
    except OSError:
        return None
    for system in systems:
        if not system.is_dir():
            continue
        try:
            system_fd = os.open(system.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # unreadable to us: its ids stay unknown, the rest count
        try:
            for name in os.listdir(system_fd):
                # os.open/os.read: a third of the cost of open() file objects;
                # relative to the system's directory: each open walks two
                # names, not the whole path (through /proc/self/fd/N for a
                # detached tracefs): 26 ms -> 15 ms for 2325 events.
                try:
                    fd = os.open(f"{name}/id", os.O_RDONLY, dir_fd=system_fd)
                except OSError:
                    continue  # not an event directory, or one without an id
                try:
                    event_id = int(os.read(fd, 32))
                except (OSError, ValueError):
                    continue
                finally:
                    os.close(fd)
                if highest is None or event_id > highest:
                    highest = event_id
        except OSError:
            continue  # unreadable to us: its ids stay unknown, the rest count
        finally:
            os.close(system_fd)
    return highest


#: The host's highest event id once read (a list: None is an answer too).
_highest: list[int | None] = []


def host_highest_event_id(where: tuple[str, ...] = TRACING_DIRS) -> int | None:
    """The host kernel's highest event id, or None where no tracefs is readable.

    Read once per process (some 2,000 ``id`` files: 20 ms), from the first of
    ``where`` that is a tracefs, else a detached one: the forks of a run
    server share the session's reading, as one long ``run`` keeps its own;
    the ids' headroom (``engine/_events.py``) covers host events added since.
    ``run`` reads it through descriptors of the directories its mount covers
    (:func:`tracing_dirs_beneath`), on a thread, while its mount waits for
    the daemon: a ``statfs`` of that mount would wait too.
    """
    if not _highest:
        _highest.append(_read_highest(where))
    return _highest[0]


def _read_highest(where: tuple[str, ...]) -> int | None:
    for path in where:
        if is_tracefs(path):
            found = highest_event_id(path)
            if found is not None:
                return found
    try:
        with detached_tracefs() as path:
            return highest_event_id(path)
    except OSError as exc:
        level = logging.DEBUG if exc.errno in (errno.EPERM, errno.ENOSYS) else logging.INFO
        log.log(level, "host event ids unknown (no tracefs mounted, cannot mount one: %s); "
                "dynamic ids start high", exc.strerror)
        return None


def tracing_dirs_beneath() -> tuple[int, ...]:
    """``O_PATH`` descriptors of :data:`TRACING_DIRS` as they are now, before
    a mount covers them (``/proc/self/fd/N`` then still reaches what is
    beneath)."""
    fds = []
    for path in TRACING_DIRS:
        try:
            fds.append(os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            continue  # not there, or closed to us: as for a path that is no tracefs
    return tuple(fds)
