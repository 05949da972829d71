"""Mount options: the ones we mount with, and the words ``-o`` may carry.

``-o`` is how FUSE filesystems take options, and how mount(8) hands them over
(``mount -t fuse.tracefs-fuse tracefs DIR -o mode=750,gid=100`` makes Debian's
``mount.fuse3`` run ``tracefs-fuse tracefs DIR -o mode=750,gid=100,dev,suid``).
A word is one of:

* one of our options by its long name (``mode=750``, ``abi=6.1``, ``cpus=4``,
  ``buffer_size_kb=2048``, ``debug``; ``_`` and ``-`` alike), handled by the
  CLI exactly as ``--mode 750`` and so on;
* a generic mount flag libfuse passes to mount(2) (:data:`~tracefs_fuse.daemon._config.MountFlag`);
* an atime flag libfuse refuses and FUSE ignores anyway (FUSE inodes are
  ``S_NOATIME``), or an option only mount(8) and fstab use (``noauto``,
  ``_netdev``, ``x-systemd.…``, …): accepted, nothing to do;
* ``allow_other``, ``default_permissions``: what we mount with anyway.

Anything else is refused, by name.

Kernel: fs/fuse/inode.c ``fuse_fs_parameters``; libfuse lib/mount.c
``fuse_mount_opts``; util/mount.fuse.c.
"""

from __future__ import annotations

import typing

from ..host._mountinfo import FSNAME, SUBTYPE
from ._config import MountConfig, MountFlag

MOUNT_FLAGS = frozenset(typing.get_args(MountFlag))
#: Accepted and without effect here.
NO_EFFECT = frozenset({
    # atime: FUSE inodes never update it
    "relatime", "norelatime", "strictatime", "nostrictatime", "diratime", "nodiratime",
    "lazytime", "nolazytime",
    # mount(8) and fstab only
    "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev",
    "nofail",
    # always on
    "allow_other", "default_permissions",
})
_NO_EFFECT_PREFIXES = ("x-", "comment=")


def has_no_effect(word: str) -> bool:
    return word in NO_EFFECT or word.startswith(_NO_EFFECT_PREFIXES)


#: include/uapi/linux/mount.h; each word sets or clears one, as libfuse's
#: ``mount_flags`` table in lib/mount.c does.
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_SYNCHRONOUS = 0x1, 0x2, 0x4, 0x8, 0x10
MS_DIRSYNC, MS_NOATIME = 0x80, 0x400
_FLAG_WORDS = {
    "ro": (MS_RDONLY, True), "rw": (MS_RDONLY, False),
    "nosuid": (MS_NOSUID, True), "suid": (MS_NOSUID, False),
    "nodev": (MS_NODEV, True), "dev": (MS_NODEV, False),
    "noexec": (MS_NOEXEC, True), "exec": (MS_NOEXEC, False),
    "sync": (MS_SYNCHRONOUS, True), "async": (MS_SYNCHRONOUS, False),
    "noatime": (MS_NOATIME, True), "atime": (MS_NOATIME, False),
    "dirsync": (MS_DIRSYNC, True),
}


def kernel_mount(config: MountConfig) -> tuple[int, list[str]]:
    """The mount(2) flags and the FUSE options ``config`` mounts with when we
    call mount(2) ourselves (``host/_fuse_mount.py``): what libfuse's
    ``fuse_kern_mount`` passes for :func:`fuse_options`, nosuid and nodev
    unless a word says otherwise."""
    flags = MS_NOSUID | MS_NODEV
    for word in config.mount_flags:
        bit, on = _FLAG_WORDS[word]
        flags = flags | bit if on else flags & ~bit
    options = ["default_permissions", *(["allow_other"] if config.allow_other else [])]
    return flags, options


def fuse_options(config: MountConfig) -> list[str]:
    """The options libfuse mounts ``config`` with."""
    options = [f"fsname={FSNAME}", f"subtype={SUBTYPE}", "default_permissions",
               *config.mount_flags]
    if config.allow_other:
        options.append("allow_other")
    if config.debug_fuse:
        options.append("debug")
    return options
