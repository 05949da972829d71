"""The mount(2) flags and options ``run`` mounts with (daemon/_mount_options.py):
what libfuse's ``fuse_kern_mount`` passes for the same words (lib/mount.c)."""

from __future__ import annotations

import pytest

from tracefs_fuse.daemon._config import MountConfig
from tracefs_fuse.daemon._mount_options import (
    MOUNT_FLAGS,
    MS_DIRSYNC,
    MS_NOATIME,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_SYNCHRONOUS,
    kernel_mount,
)

DEFAULT = MS_NOSUID | MS_NODEV

CASES = [
    ((), DEFAULT),
    (("ro",), DEFAULT | MS_RDONLY),
    (("ro", "rw"), DEFAULT),              # the last word wins, as in libfuse
    (("suid",), MS_NODEV),
    (("dev",), MS_NOSUID),
    (("dev", "nodev"), DEFAULT),
    (("suid", "nosuid"), DEFAULT),
    (("noexec",), DEFAULT | MS_NOEXEC),
    (("noexec", "exec"), DEFAULT),
    (("sync",), DEFAULT | MS_SYNCHRONOUS),
    (("sync", "async"), DEFAULT),
    (("noatime",), DEFAULT | MS_NOATIME),
    (("noatime", "atime"), DEFAULT),
    (("dirsync",), DEFAULT | MS_DIRSYNC),
    (("ro", "dev", "suid", "noexec"), MS_RDONLY | MS_NOEXEC),
]


@pytest.mark.parametrize(("words", "flags"), CASES)
def test_words_set_and_clear_libfuses_flags(words: tuple[str, ...], flags: int) -> None:
    config = MountConfig(mountpoint="/m", mount_flags=words)  # type: ignore[arg-type]
    assert kernel_mount(config) == (flags, ["default_permissions", "allow_other"])


def test_every_word_is_in_the_table() -> None:
    assert {word for words, _ in CASES for word in words} == MOUNT_FLAGS


def test_allow_other_only_when_asked() -> None:
    config = MountConfig(mountpoint="/m", allow_other=False)
    assert kernel_mount(config) == (DEFAULT, ["default_permissions"])
