"""The guest's root file system: busybox, ``/init``, and the files of one run.

An initramfs is a "newc" cpio archive (Documentation/driver-api/early-userspace/
buffer-format.rst); several archives concatenated are unpacked one after
the other, so each run appends a small archive with its own files to the
cached base one instead of rebuilding it. Written here rather than with
``cpio``: a dozen lines, and one host package fewer.

The guest's ``/init`` (busybox ``sh``) mounts what a tracing program
expects, runs ``/oracle/run`` with its output on the second serial port and
writes the exit status to the third: the kernel's own console (ttyS0) never
mixes with the program's output, and a missing status means the guest died.
"""

from __future__ import annotations

import gzip
import stat
from pathlib import Path

# The guest's view: ttyS0 console, ttyS1 the program's output, ttyS2 its status.
INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
export PATH=/oracle:/bin HOME=/root
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm 2>/dev/null || { mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm; }
# debugfs: 6.1's selftests and sample use /sys/kernel/debug/tracing, which
# tracefs automounts there.
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
stty -F /dev/ttyS1 raw -echo
stty -F /dev/ttyS2 raw -echo
cd /oracle
sh /oracle/run </dev/null >/dev/ttyS1 2>&1
echo $? >/dev/ttyS2
sync
reboot -f
"""

_DIRS = ("bin", "dev", "proc", "sys", "tmp", "root", "oracle")


class Cpio:
    """A newc archive being written."""

    def __init__(self) -> None:
        self.data = bytearray()
        self._ino = 0

    def _entry(self, name: str, mode: int, body: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        self._ino += 1
        encoded = name.encode() + b"\0"
        # c_magic, then 13 fields of 8 hex digits: ino mode uid gid nlink
        # mtime filesize devmajor devminor rdevmajor rdevminor namesize check.
        fields = (self._ino, mode, 0, 0, 1, 0, len(body), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        self.data += b"070701" + b"".join(b"%08X" % f for f in fields) + encoded
        self._pad()
        self.data += body
        self._pad()

    def _pad(self) -> None:
        self.data += b"\0" * (-len(self.data) % 4)

    def directory(self, name: str) -> None:
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, body: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, body)

    def char_device(self, name: str, major: int, minor: int) -> None:
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def gzipped(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return gzip.compress(bytes(self.data), compresslevel=6, mtime=0)


def base(busybox: bytes) -> bytes:
    """The cached part: directories, ``/dev/console``, busybox and ``/init``."""
    archive = Cpio()
    for name in _DIRS:
        archive.directory(name)
    archive.char_device("dev/console", 5, 1)
    archive.file("bin/busybox", busybox, 0o755)
    archive.file("init", INIT.encode(), 0o755)
    return archive.gzipped()


def run_files(files: list[Path], script: str) -> bytes:
    """One run's part: the files (flat, under ``/oracle``) and ``/oracle/run``."""
    archive = Cpio()
    archive.directory("oracle")
    for path in files:
        mode = 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644
        archive.file(f"oracle/{path.name}", path.read_bytes(), mode)
    archive.file("oracle/run", script.encode(), 0o755)
    return archive.gzipped()
