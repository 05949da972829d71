"""What mounting needs from the machine: checked before we try, explained in one line.

Rules:
  * A check returns, or raises :class:`EnvironmentProblem` whose message is one
    line for the person at the terminal: what is missing, then how to fix it.
    No Python exception text: the CLI prints the message as it is.
  * Checks look and never change anything (the device check opens
    ``/dev/fuse`` and closes it again, mounting nothing).
  * Nothing here loads pyfuse3 or the bridge: the checks run first.

What the kernel allows (the limits these checks and the docs state):
  * ``fuse`` is ``FS_USERNS_MOUNT``: root of a user namespace may mount it in a
    mount namespace that namespace owns, provided the ``/dev/fuse`` descriptor
    was opened inside that same user namespace (``fuse_fill_super`` refuses
    ``file->f_cred->user_ns != sb->s_user_ns`` with EINVAL). So an ordinary user
    needs ``/dev/fuse`` openable as themselves: its usual mode 0666.
  * tracefs and debugfs are not ``FS_USERNS_MOUNT``: inside a user namespace no
    real tracefs can be mounted beneath ours.
  * ``allow_other`` on a mount made in a user namespace admits only processes
    of that namespace and its descendants (``fuse_allow_current_process``:
    ``current_in_userns(fc->user_ns)``); the host's other users, and root, stay
    out. Without ``allow_other``, only the mounting user's own processes get in
    (``fuse_permissible_uidgid``), not even root. ``fusermount3`` grants
    ``allow_other`` to ordinary users only with ``user_allow_other`` in
    ``/etc/fuse.conf``.

Kernel: fs/fuse/inode.c (``fuse_fill_super``, ``fuse_fs_type``), fs/fuse/dir.c
(``fuse_allow_current_process``), kernel/ucount.c (``user.max_user_namespaces``);
libfuse util/fusermount.c (``check_perm``, ``read_conf``).
"""

from __future__ import annotations

import errno
import os
import shlex
import stat

from . import _mountinfo
from ._mountinfo import FSTYPE

FUSE_DEVICE = "/dev/fuse"
FUSE_CONF = "/etc/fuse.conf"
#: capability(7) number of CAP_SYS_ADMIN, a bit of CapEff in /proc/self/status.
CAP_SYS_ADMIN = 21


class EnvironmentProblem(Exception):
    """Something the machine lacks for mounting; ``str()`` is one line saying
    what and how to fix it."""


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line without exception text: the message of
    ``exc``, or of its only cause in trio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def has_cap_sys_admin() -> bool:
    """May this process mount (CAP_SYS_ADMIN in its user namespace)?"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def check_fuse_device() -> None:
    """``/dev/fuse`` exists and this process may open it."""
    try:
        st = os.stat(FUSE_DEVICE)
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"{FUSE_DEVICE} does not exist: load the FUSE module (modprobe fuse); "
            f"in a container, pass the device in (--device {FUSE_DEVICE})") from None
    if not stat.S_ISCHR(st.st_mode):
        raise EnvironmentProblem(f"{FUSE_DEVICE} is not a character device: it is not FUSE's")
    try:
        os.close(os.open(FUSE_DEVICE, os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        raise _device_refused(exc, st) from None


def _device_refused(exc: OSError, st: os.stat_result) -> EnvironmentProblem:
    mode = stat.S_IMODE(st.st_mode)
    if exc.errno == errno.EACCES:
        return EnvironmentProblem(
            f"{FUSE_DEVICE} (mode {mode:04o}) cannot be opened by uid {os.getuid()}: "
            f"give it its usual mode 0666 (sudo chmod 0666 {FUSE_DEVICE}), or use sudo")
    if exc.errno == errno.EPERM:
        return EnvironmentProblem(
            f"opening {FUSE_DEVICE} is not permitted (a container's device rules?): "
            f"pass the device in (--device {FUSE_DEVICE})")
    return EnvironmentProblem(f"{FUSE_DEVICE} cannot be opened: {exc.strerror}")


def check_mountpoint(path: str) -> None:
    """``path`` is a directory with no tracefs-fuse mount on it already.

    Args:
        path: absolute, symlinks resolved (as mountinfo names mount points).
    """
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"{path} does not exist: create it first (mkdir -p {shlex.quote(path)})") from None
    except OSError as exc:
        if exc.errno != errno.ENOTCONN:
            raise EnvironmentProblem(f"{path}: {exc.strerror}") from None
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise EnvironmentProblem(f"{path} is not a directory")
    stack = _mountinfo.mounted_at(path)
    ours = bool(stack) and stack[-1].fstype == FSTYPE
    if st is None or ours and _dead(path):
        raise EnvironmentProblem(
            f"{path} is a dead FUSE mount (its daemon is gone): unmount it first "
            f"(fusermount3 -u {shlex.quote(path)})")
    if ours:
        raise EnvironmentProblem(
            f"{path} already has a tracefs-fuse mount, which a second one would hide: "
            f"unmount it first (tracefs-fuse umount {shlex.quote(path)})")


def _dead(path: str) -> bool:
    """Is the FUSE mount at ``path`` without its daemon? (statfs always asks the
    daemon; stat may be answered from the kernel's cache.)"""
    try:
        os.statvfs(path)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def check_is_ours(path: str) -> None:
    """``path`` has a tracefs-fuse mount on top (before unmounting it)."""
    stack = _mountinfo.mounted_at(path)
    if not stack or stack[-1].fstype != FSTYPE:
        raise EnvironmentProblem(f"{path} is not a tracefs-fuse mount")


def check_user_mount(path: str) -> None:
    """What ``fusermount3`` needs to mount for an ordinary user at ``path``."""
    import shutil  # ``mount`` without sudo only, never ``run``

    fusermount = shutil.which("fusermount3")
    if fusermount is None:
        raise EnvironmentProblem(
            "fusermount3, which mounts FUSE filesystems for ordinary users, is missing: "
            "install it (apt-get install fuse3), or use sudo")
    st = os.stat(fusermount)
    if not (st.st_mode & stat.S_ISUID and st.st_uid == 0):
        raise EnvironmentProblem(
            f"{fusermount} is not set-uid root, so it cannot mount for you: "
            f"sudo chmod u+s {fusermount}, or use sudo")
    if not os.access(path, os.W_OK):
        raise EnvironmentProblem(
            f"you may not mount on {path}: fusermount3 mounts only where you can write; "
            f"use a directory of your own (mkdir ~/tracing)")


def user_allow_other(conf: str = FUSE_CONF) -> bool:
    """Does ``/etc/fuse.conf`` let ordinary users mount with ``allow_other``?"""
    try:
        with open(conf) as f:
            return any(line.strip() == "user_allow_other" for line in f)
    except OSError:
        return False


def _sysctl(name: str, proc_sys: str) -> int | None:
    try:
        with open(os.path.join(proc_sys, name.replace(".", "/"))) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


#: Distribution switches that make unshare(CLONE_NEWUSER) EPERM for ordinary
#: users: (sysctl, the value that forbids, the value that allows). Debian and
#: Ubuntu patch in the first; linux-hardened the second.
_USERNS_SWITCHES = (("kernel.unprivileged_userns_clone", 0, 1), ("kernel.userns_restrict", 1, 0))


def userns_refused(exc: OSError, proc_sys: str = "/proc/sys") -> EnvironmentProblem:
    """Why ``unshare(CLONE_NEWUSER)`` failed, and the sysctl that decides it.

    Args:
        exc: the failure of ``unshare``.
        proc_sys: where the sysctls are (a fake tree in tests).
    """
    sudo = "or use sudo"
    if exc.errno == errno.ENOSPC:
        limit = _sysctl("user.max_user_namespaces", proc_sys)
        if limit == 0:
            return EnvironmentProblem(
                "user namespaces are disabled (sysctl user.max_user_namespaces = 0): "
                f"sudo sysctl -w user.max_user_namespaces=15000, {sudo}")
        return EnvironmentProblem(
            f"no more user namespaces may be created (sysctl user.max_user_namespaces = "
            f"{limit}): raise it, {sudo}")
    if exc.errno == errno.EPERM:
        for sysctl, forbids, allows in _USERNS_SWITCHES:
            if _sysctl(sysctl, proc_sys) == forbids:
                return EnvironmentProblem(
                    f"unprivileged user namespaces are disabled (sysctl {sysctl} = {forbids}): "
                    f"sudo sysctl -w {sysctl}={allows}, {sudo}")
        return EnvironmentProblem(
            "creating a user namespace is not permitted here (a seccomp or security "
            "policy, as in a container): give the container CAP_SYS_ADMIN "
            f"(--cap-add SYS_ADMIN), {sudo}")
    if exc.errno == errno.EUSERS:
        return EnvironmentProblem(f"user namespaces are nested too deeply here, {sudo}")
    return EnvironmentProblem(f"cannot create a user namespace: {exc.strerror}")


def userns_powerless(exc: OSError, step: str,
                     proc_sys: str = "/proc/sys") -> EnvironmentProblem:
    """Why our new user namespace is of no use: the step that failed in it.

    Args:
        exc: the failure.
        step: what we tried, in words ("mount", …).
        proc_sys: where the sysctls are.
    """
    sysctl = "kernel.apparmor_restrict_unprivileged_userns"
    if exc.errno in (errno.EPERM, errno.EACCES) and _sysctl(sysctl, proc_sys) == 1:
        return EnvironmentProblem(
            f"AppArmor withholds capabilities in unprivileged user namespaces (sysctl "
            f"{sysctl} = 1): sudo sysctl -w {sysctl}=0, or use sudo")
    return EnvironmentProblem(f"in a new user namespace, cannot {step}: {exc.strerror}")
