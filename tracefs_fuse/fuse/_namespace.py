"""A private mount namespace in which our tracefs is *the* tracefs.

``tracefs-fuse run`` enters one, mounts the daemon at ``/sys/kernel/tracing``
and ``/sys/kernel/debug/tracing``, and runs the command there. Nothing is
visible outside: when the last process of the namespace exits, its mounts go
with it, so even a crashed daemon leaves no stale mount behind.

Rules:
  * Tools find tracefs through ``/proc/mounts`` by the type ``tracefs``, which a
    FUSE mount never has (it is ``fuse.tracefs``). Where the kernel has tracefs,
    a real (empty, private) tracefs is mounted at ``/sys/kernel/tracing`` first
    and ours on top of it: the first ``tracefs`` line names the right
    directory, and path lookups reach the top mount, ours. Where the kernel
    has no tracefs, tools must be told the path (``tracefs_set_tracing_dir``,
    ``trace-cmd -t``… ); see docs/emulation.md.
  * ``/sys/kernel/tracing`` must exist to be mounted on. Where it does not
    (sysfs without tracefs), a tmpfs is mounted over ``/sys/kernel`` holding
    just ``tracing`` and ``debug/tracing``; the rest of ``/sys/kernel`` is then
    hidden inside the namespace.
  * Control files outside tracefs that trace-cmd must write and this machine
    refuses (``/proc/sys/kernel/ftrace_enabled``) get a writable stand-in,
    bind-mounted inside the namespace only.

Kernel: man 2 unshare, man 2 mount, man 7 mount_namespaces.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import tempfile

log = logging.getLogger(__name__)

CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

TRACING = "/sys/kernel/tracing"
DEBUG = "/sys/kernel/debug"
DEBUG_TRACING = "/sys/kernel/debug/tracing"
FTRACE_ENABLED = "/proc/sys/kernel/ftrace_enabled"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare_mounts() -> None:
    """Enter a new mount namespace whose mounts never propagate back."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0,
          data: str | None = None) -> None:
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {fstype or 'bind'} on {target}")


def mounted_types(path: str) -> list[str]:
    """Filesystem types mounted exactly at ``path``, bottom first."""
    types = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[4] == path:
                types.append(fields[sep + 1])
    return types


def detach_other_tracefs() -> None:
    """Detach every tracefs mounted elsewhere: inside, ours is the only one.

    Tools take the first ``tracefs`` line of ``/proc/mounts``; a tracefs the
    host mounted at another place would otherwise come first. Only this
    namespace's copy of those mounts goes.
    """
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f
                  if line.split()[line.split().index("-") + 1] == "tracefs"]
    for point in reversed(points):  # submounts before their parents
        if point not in (TRACING, DEBUG_TRACING):
            _check(_libc.umount2(os.fsencode(point), MNT_DETACH), f"umount {point}")


def prepare_tracing_dir() -> str:
    """Make ``/sys/kernel/tracing`` a place to mount on, real tracefs beneath.

    Returns:
        The mountpoint for the daemon.
    """
    detach_other_tracefs()
    if not os.path.isdir(TRACING):
        mount("tracefs-fuse", "/sys/kernel", "tmpfs", 0, "mode=0755")
        for path in (TRACING, DEBUG, DEBUG_TRACING):
            os.mkdir(path, 0o700)
        return TRACING
    if "tracefs" not in mounted_types(TRACING):
        try:
            mount("nodev", TRACING, "tracefs")
        except OSError as exc:
            log.info("no real tracefs beneath ours (%s): tools scanning /proc/mounts "
                     "for 'tracefs' will not find us", exc.strerror)
    return TRACING


def bind_debug_tracing(mountpoint: str) -> None:
    """Show the mount at ``/sys/kernel/debug/tracing`` too (pre-4.1 tools use it)."""
    if not os.path.isdir(DEBUG):
        log.info("no %s: %s not provided", DEBUG, DEBUG_TRACING)
        return
    if "debugfs" not in mounted_types(DEBUG):
        try:
            mount("debugfs", DEBUG, "debugfs")
        except OSError:
            mount("tracefs-fuse", DEBUG, "tmpfs", 0, "mode=0700")
    if not os.path.isdir(DEBUG_TRACING):
        os.mkdir(DEBUG_TRACING, 0o700)
    mount(mountpoint, DEBUG_TRACING, None, MS_BIND)


def writable_ftrace_enabled() -> str | None:
    """Give ``ftrace_enabled`` a writable stand-in if this machine refuses writes.

    trace-cmd writes ``1`` to it before recording and stops if that fails;
    the value means nothing to our tracefs (there is no function tracer).

    Returns:
        The stand-in file's former name, or None if none was needed.
    """
    if not os.path.exists(FTRACE_ENABLED):
        return None
    try:
        with open(FTRACE_ENABLED, "r+") as f:
            value = f.read()
            f.seek(0)
            f.write(value)
        return None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
            raise
    with open(FTRACE_ENABLED) as f:
        value = f.read()
    fd, standin = tempfile.mkstemp(prefix="tracefs-fuse-ftrace_enabled-")
    with os.fdopen(fd, "w") as f:
        f.write(value)
    try:
        mount(standin, FTRACE_ENABLED, None, MS_BIND)
    finally:
        os.unlink(standin)  # the bind mount keeps the file; nothing is left behind
    return standin
