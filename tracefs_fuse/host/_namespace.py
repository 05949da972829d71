"""A private mount namespace in which our tracefs is *the* tracefs.

``tracefs-fuse run`` enters one, mounts the daemon at ``/sys/kernel/tracing``
and ``/sys/kernel/debug/tracing``, and runs the command there. Nothing is
visible outside: when the last process of the namespace exits, its mounts go
with it, so even a crashed daemon leaves no stale mount behind.

Rules:
  * With CAP_SYS_ADMIN (root), only the mount namespace is new. Without it (an
    ordinary user, or root in a container without CAP_SYS_ADMIN), a user
    namespace comes first, in which we, and the command, are uid 0 with every
    capability: the kernel lets root of a user namespace mount FUSE (see
    :mod:`._environment` for exactly what it allows). Only our own uid and gid
    are mapped (``0 <uid> 1``); ``setgroups`` is denied, as an unprivileged
    map requires.
  * Tools find tracefs through ``/proc/mounts`` by the type ``tracefs``, which a
    FUSE mount never has (it is ``fuse.tracefs``). Where we may, a real (empty,
    private) tracefs is mounted at ``/sys/kernel/tracing`` first and ours on top
    of it: the first ``tracefs`` line names the right directory, and path
    lookups reach the top mount, ours. Where we may not (no tracefs in the
    kernel; a user namespace, where tracefs cannot be mounted),
    ``/proc/mounts`` is covered by a copy that lists one there
    (:func:`list_tracefs`), so that trace-cmd works rootless too; only where
    even that is refused is it said, and tools must be told the path (see
    docs/emulation.md).
  * ``/sys/kernel/tracing`` must exist to be mounted on. Where it does not
    (sysfs without tracefs), a tmpfs is mounted over ``/sys/kernel`` holding
    just ``tracing`` and ``debug/tracing``; the rest of ``/sys/kernel`` is then
    hidden inside the namespace. Likewise a debugfs we may not enter (a user
    namespace) is covered by a tmpfs holding ``tracing``.
  * Control files outside tracefs that trace-cmd must write and this machine
    refuses (``/proc/sys/kernel/ftrace_enabled``) get a writable stand-in,
    bind-mounted inside the namespace only.

Kernel: man 2 unshare, man 2 mount, man 7 mount_namespaces, man 7 user_namespaces.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os

from ..lib import check, libc, syscall
from . import _environment, _mountinfo

log = logging.getLogger(__name__)

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2

TRACING = "/sys/kernel/tracing"
DEBUG = "/sys/kernel/debug"
DEBUG_TRACING = "/sys/kernel/debug/tracing"
FTRACE_ENABLED = "/proc/sys/kernel/ftrace_enabled"


def enter() -> bool:
    """Enter a new mount namespace whose mounts never propagate back, inside a
    new user namespace if we may not mount where we are.

    Its mounts are slaves, not private: an unmount outside (of a shared
    parent) still reaches this namespace's copy, which would otherwise pin
    that filesystem for as long as the command runs (issue 19 item 9).

    Returns:
        Whether a user namespace was made.

    Raises:
        EnvironmentProblem: the kernel or a policy refused; one line.
    """
    if _environment.has_cap_sys_admin():
        try:
            check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        except OSError as exc:
            raise _environment.EnvironmentProblem(
                f"cannot create a mount namespace: {exc.strerror}") from None
        mount(None, "/", None, MS_REC | MS_SLAVE)
        return False
    uid, gid = os.geteuid(), os.getegid()
    try:
        check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER)")
    except OSError as exc:
        raise _environment.userns_refused(exc) from None
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError as exc:
        if uid == 0 and exc.errno == errno.EPERM:
            # Mapping uid 0 needs CAP_SETFCAP (kernel/user_namespace.c verify_root_map).
            raise _environment.EnvironmentProblem(
                "root without CAP_SYS_ADMIN needs CAP_SETFCAP to map itself into a user "
                "namespace: give it CAP_SYS_ADMIN (--cap-add SYS_ADMIN) or keep "
                "CAP_SETFCAP") from None
        raise _environment.userns_powerless(exc, f"map uid {uid} to 0") from None
    try:
        mount(None, "/", None, MS_REC | MS_SLAVE)
    except OSError as exc:
        raise _environment.userns_powerless(exc, "make its mounts slaves") from None
    return True


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0,
          data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else os.fsencode(s)

    check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {fstype or 'bind'} on {target}")


def mounted_types(path: str) -> list[str]:
    """Filesystem types mounted exactly at ``path``, bottom first."""
    return [m.fstype for m in _mountinfo.mounted_at(path)]


def detach_other_tracefs() -> None:
    """Detach every tracefs mounted elsewhere, and every other tracefs-fuse
    mount: inside, ours is the only one.

    Tools take the first ``tracefs`` line of ``/proc/mounts``; a tracefs the
    host mounted at another place would otherwise come first. A copy of
    another tracefs-fuse mount would keep that FUSE connection, and so its
    daemon, alive after ``tracefs-fuse umount`` outside (issue 19 item 9).
    Only this namespace's copy of those mounts goes. In a user namespace the
    host's mounts are locked (EINVAL): they stay, which is said.
    """
    points = [(m.mount_point, m.fstype) for m in _mountinfo.read()
              if m.fstype in ("tracefs", _mountinfo.FSTYPE)]
    for point, fstype in reversed(points):  # submounts before their parents
        if fstype == "tracefs" and point in (TRACING, DEBUG_TRACING):
            continue
        if libc.umount2(os.fsencode(point), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            if fstype == "tracefs" and err not in (errno.EINVAL, errno.EACCES):
                raise OSError(err, f"umount {point}: {os.strerror(err)}")
            # EINVAL: a user namespace locks the host's mounts; EACCES: its
            # path is closed to us (a tracefs under root's 0700 directory, or
            # another user's tracefs-fuse mount). For another user's
            # tracefs-fuse mount also ENOTCONN (its daemon died): it stays, as
            # outside.
            log.info("the host's %s at %s cannot be detached here (%s): tools that take "
                     "the first tracefs in /proc/mounts may pick it, and umount outside "
                     "leaves its daemon running while we do", fstype, point,
                     os.strerror(err))


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
            log.debug("no real tracefs beneath ours: %s", exc.strerror)
    return TRACING


#: <uapi/linux/mount.h>; the syscalls' numbers are the same on every architecture.
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH = 0x4
AT_FDCWD = -100
PROC_MOUNTS = "/proc/mounts"
#: What a tracefs line of /proc/mounts says (tracefs mounted by systemd, as by hand).
TRACEFS_LINE = f"tracefs {TRACING} tracefs rw,nosuid,nodev,noexec,relatime 0 0\n"


def list_tracefs() -> bool:
    """Make ``/proc/mounts`` list a tracefs beneath ours, if it lists none there.

    libtracefs (and so trace-cmd) finds tracefs only by a line of type
    ``tracefs`` in ``/proc/mounts``, and a user namespace may not mount one.
    ``/proc/mounts`` is a symlink (``self/mounts``); a copy of this
    namespace's mounts, with the line a real tracefs beneath ours would add,
    is mounted over the symlink itself (``move_mount`` without
    ``MOVE_MOUNT_T_SYMLINKS`` does not follow it). The line comes first among
    the tracefs lines: a host's tracefs elsewhere, locked in a user namespace,
    stays listed after it. Only that name changes:
    ``/proc/self/mounts`` and ``mountinfo`` stay the kernel's, and the copy
    is of the mounts as the command starts.

    Returns:
        Whether tools find a tracefs at ``/sys/kernel/tracing`` now.
    """
    if "tracefs" in mounted_types(TRACING):
        return True
    with open("/proc/self/mounts") as f:
        lines = f.readlines()
    # Before ours, and before any tracefs the host mounted elsewhere that this
    # namespace could not detach (tools take the first line of type tracefs).
    first = next((i for i, line in enumerate(lines)
                  if line.split()[2:3] == ["tracefs"]
                  or line.split()[1:3] == [TRACING, "fuse.tracefs"]), len(lines))
    lines.insert(first, TRACEFS_LINE)
    import tempfile  # where the copy is needed only: 4 ms of run's start-up

    fd, copy = tempfile.mkstemp(prefix="tracefs-fuse-mounts-")
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(lines)
        os.chmod(copy, 0o444)
        tree = syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(copy),
                       OPEN_TREE_CLONE | os.O_CLOEXEC)
        try:
            syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, os.fsencode(PROC_MOUNTS),
                    MOVE_MOUNT_F_EMPTY_PATH)
        finally:
            os.close(tree)
    except OSError as exc:
        log.warning("no tracefs listed beneath ours (tracefs cannot be mounted here, and "
                    "covering %s failed: %s): libtracefs and trace-cmd, which look for type "
                    "'tracefs' there, must be given the path (docs/emulation.md)",
                    PROC_MOUNTS, exc.strerror)
        return False
    finally:
        os.unlink(copy)  # the mount keeps the file; nothing is left behind
    return True


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
        try:
            os.mkdir(DEBUG_TRACING, 0o700)
        except PermissionError:
            # The host's debugfs, which root of a user namespace may not enter.
            mount("tracefs-fuse", DEBUG, "tmpfs", 0, "mode=0700")
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
    import tempfile  # where the stand-in is needed only: 4 ms of run's start-up

    fd, standin = tempfile.mkstemp(prefix="tracefs-fuse-ftrace_enabled-")
    with os.fdopen(fd, "w") as f:
        f.write(value)
    try:
        mount(standin, FTRACE_ENABLED, None, MS_BIND)
    finally:
        os.unlink(standin)  # the bind mount keeps the file; nothing is left behind
    return standin
