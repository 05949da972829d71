"""A FUSE mount made with mount(2) itself, before any daemon reads it.

``tracefs-fuse run`` mounts this way so that the command can start while the
daemon is still being loaded (issue 21: most of a run's start-up is imports):
the kernel queues ``FUSE_INIT`` and whatever the command asks of the mount
until the daemon reads the device, and libfuse then takes the mounted
device as ``/dev/fd/N`` (``fuse_session_mount``).

Rules:
  * Only where we may call mount(2) for FUSE: root, or root of our own user
    namespace (``FS_USERNS_MOUNT``). ``tracefs-fuse mount`` as an ordinary
    user goes through libfuse and ``fusermount3`` as before.
  * The device is close-on-exec: the command never holds our connection.

Kernel: fs/fuse/inode.c ``fuse_fs_parameters`` (``fd``, ``rootmode``,
``user_id``, ``group_id`` are required); libfuse lib/mount.c
``fuse_mount_sys`` (what it passes, and the ``fuse.SUBTYPE`` type).
"""

from __future__ import annotations

import os
import stat

from . import _namespace


def mount_fuse(source: str, mountpoint: str, fstype: str, flags: int, options: list[str]) -> int:
    """Mount a new FUSE connection at ``mountpoint``; its ``/dev/fuse`` descriptor.

    ``options``: the kernel's own (``allow_other``, ``default_permissions``, …);
    the four it requires are added here, as libfuse adds them.

    Raises:
        OSError: the device cannot be opened, or mount(2) refused.
    """
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    try:
        root = stat.S_IFMT(os.stat(mountpoint).st_mode)
        data = ",".join([*options, f"fd={fd}", f"rootmode={root:o}",
                         f"user_id={os.getuid()}", f"group_id={os.getgid()}"])
        _namespace.mount(source, mountpoint, fstype, flags, data)
    except BaseException:
        os.close(fd)
        raise
    return fd

