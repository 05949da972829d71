"""The kernel oracle: a real Linux with user_events, booted in QEMU.

This machine's kernel, like most, is built without ``CONFIG_USER_EVENTS``,
so the reference for user_events is a small kernel built from Debian's own
``linux-source-6.12`` or ``linux-source-6.1`` package with it switched on,
booted in QEMU with a busybox initramfs, running static programs against
its real ``/sys/kernel/tracing``.

    python -m tests.oracle.kernel build 6.12          # once, 4 to 8 minutes
    python -m tests.oracle.kernel run 6.12 FILE... -- 'SHELL COMMAND'

The cache (``$TRACEFS_FUSE_ORACLE_CACHE``, default
``~/.cache/tracefs-fuse-oracle``) holds the fetched ``.deb`` files, the
base initramfs and, per kernel, its tree, ``bzImage``, uapi headers and
the kernel's own user_events selftests, linked statically.
docs/oracle.md has the details and timings.

Rules: nothing outside the cache is written; the host gets no packages but
the build tools; a command that cannot be answered raises
:class:`OracleError` with the reason (never a silent empty output).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from . import _debian, _initramfs, _vm
from ._build import build_kernel
from ._log import OracleError
from ._vm import Run

KERNELS = ("6.12", "6.1")

__all__ = ["KERNELS", "Oracle", "OracleError", "Run", "cache_root"]


def cache_root() -> Path:
    """Where builds live: ``$TRACEFS_FUSE_ORACLE_CACHE`` or ``~/.cache/tracefs-fuse-oracle``."""
    return Path(os.environ.get("TRACEFS_FUSE_ORACLE_CACHE",
                               Path.home() / ".cache" / "tracefs-fuse-oracle")).expanduser()


class Oracle:
    """One built kernel, ready to run commands.

    Args:
        kernel: "6.12" or "6.1".
        variant: "" or "probes" (kprobe events and ``inject`` files).
        root: the cache (default :func:`cache_root`).

    Raises:
        OracleError: the kernel cannot be built here.
    """

    def __init__(self, kernel: str, variant: str = "", root: Path | None = None) -> None:
        self.kernel = kernel
        self.root = root or cache_root()
        self.dir = build_kernel(self.root, kernel, variant)
        self._base = self._base_initramfs()
        self.version = (self.dir / "VERSION").read_text().split()[1]
        self.include = self.dir / "usr" / "include"
        self.selftests = self.dir / "selftests"
        self._accel: tuple[str, ...] | None = None

    def _base_initramfs(self) -> bytes:
        deb = _debian.fetch("busybox-static", self.root / "debs")
        key = hashlib.sha256(deb.name.encode() + _initramfs.INIT.encode()).hexdigest()[:16]
        path = self.root / f"initramfs-{key}.cpio.gz"
        if not path.exists():
            staging = Path(tempfile.mkdtemp(prefix="initramfs-", dir=self.root))
            try:
                _debian.extract_file(deb, "./bin/busybox", staging / "busybox")
                (staging / "base").write_bytes(_initramfs.base((staging / "busybox").read_bytes()))
                (staging / "base").replace(path)
            finally:
                shutil.rmtree(staging)
        return path.read_bytes()

    #: Every boot zeroes what kmalloc() returns, so that a kernel bug reading uninitialised
    #: memory reads zeros, the same in every run: 6.1.192's user_event_add_field()
    #: (kernel/trace/trace_events_user.c) kmallocs its struct ftrace_event_field and never sets
    #: the ``len`` member the tree's trace_events.c gained, which f_show() prints as an array
    #: length (``field:char s[%d]`` when non-zero), so a ``char[8] s`` field read back as
    #: ``char s[1641256]`` in 3 boots in 6 (issue 22).
    BOOT_PARAMETERS = "init_on_alloc=1"

    def run(self, files: list[Path], command: str, *, timeout: float = 300) -> Run:
        """Boot, run ``command`` (busybox ``sh``, in ``/oracle`` with ``files``), power off.

        Raises:
            OracleError: the guest died or timed out before the command ended
                (the message ends with its console).
        """
        initrd = self._base + _initramfs.run_files(files, command + "\n")
        if self._accel is None:
            self._accel = _vm.choose_accel(self.root, self.dir / "bzImage", self._base)
        result = _vm.boot(self.dir / "bzImage", initrd, accel=self._accel, timeout=timeout,
                          append=self.BOOT_PARAMETERS)
        if result.status is None:
            why = f"timed out after {timeout:.0f}s" if result.timed_out else "died"
            raise OracleError(f"the {self.kernel} guest {why} before `{command}` ended; "
                              f"output:\n{result.output}\nconsole:\n{result.console[-3000:]}")
        return result
