"""Building one oracle kernel: source, configuration, bzImage, headers, selftests.

Every step records what it was made from (a "stamp": the package version,
the configuration text, the compiler flags) and is skipped when that has not
changed, so a second build of a finished cache costs a few milliseconds, and
changing the configuration rebuilds only what depends on it (Kbuild is
incremental). Builds take a lock shared by every kernel in the cache: two
kernel builds at once would only make both slower.

Rules: the host is never changed (packages are fetched, not installed; the
only writes are under the cache directory); the source tree is never edited.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import _config, _debian
from ._log import OracleError, log

#: Debian packages the build and the VM need on the host (``make oracle-test``
#: installs the missing ones): the kernel's build dependencies for this
#: configuration (objtool needs libelf, certificates openssl), static glibc
#: for the selftests and guest programs, dpkg-deb/tar/xz for the packages,
#: and QEMU.
HOST_PACKAGES = ("make", "gcc", "libc6-dev", "flex", "bison", "bc", "libelf-dev", "libssl-dev",
                 "dpkg", "tar", "xz-utils", "qemu-system-x86")

SELFTEST_FLAGS = ("-static", "-O2", "-Wall", "-Wl,-no-as-needed")
SELFTEST_LIBS = ("-lrt", "-lpthread", "-lm")


def missing_packages() -> list[str]:
    """Those of :data:`HOST_PACKAGES` that dpkg does not list as installed."""
    result = subprocess.run(["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\\n",
                             *HOST_PACKAGES], capture_output=True, text=True)
    installed = {line.split()[0] for line in result.stdout.splitlines()
                 if line.endswith(" installed")}
    return [pkg for pkg in HOST_PACKAGES if pkg not in installed]


@contextmanager
def lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``, waiting for another process's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another process is {what}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


class Stamps:
    """What each finished step was made from, in ``stamps.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}

    def fresh(self, step: str, key: str) -> bool:
        return self.done.get(step) == key

    def record(self, step: str, key: str) -> None:
        self.done[step] = key
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.done, indent=1, sort_keys=True))
        tmp.replace(self.path)

    def forget(self, *steps: str) -> None:
        for step in steps:
            self.done.pop(step, None)


def _make(src: Path, build: Path, *targets: str, logfile: Path, **variables: str) -> None:
    command = ["make", "-C", str(src), f"O={build}", f"-j{os.cpu_count() or 1}", *targets,
               *(f"{k}={v}" for k, v in variables.items())]
    with logfile.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            tail = logfile.read_text().splitlines()[-30:]
            raise OracleError(f"{' '.join(command)} failed; end of {logfile}:\n" + "\n".join(tail))


def build_kernel(root: Path, kernel: str, variant: str = "") -> Path:
    """Build (or bring up to date) one kernel in the cache.

    Args:
        root: the cache directory.
        kernel: "6.12" or "6.1": Debian's ``linux-source-<kernel>``.
        variant: "" or a key of ``_config.VARIANTS``.

    Returns:
        The kernel's directory: ``bzImage``, ``config``, ``usr/include``,
        ``selftests/`` and ``VERSION``.

    Raises:
        OracleError: a missing tool, a failed download or build.
    """
    if missing := missing_packages():
        raise OracleError(f"the kernel build needs Debian packages {' '.join(missing)} "
                          f"(as root: apt-get install {' '.join(missing)}; "
                          f"`make oracle-test` installs them)")
    base = root / f"linux-{kernel}"
    out = base if not variant else root / f"linux-{kernel}-{variant}"
    with lock(base / "build.lock", f"building {base.name}"):
        return _build(root, kernel, variant, base, out)


def _build(root: Path, kernel: str, variant: str, base: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamps = Stamps(out / "stamps.json")
    deb = _debian.fetch(f"linux-source-{kernel}", root / "debs")
    src_version = _debian.version(deb)

    # The source tree is unpacked once per kernel; a variant builds from its base's.
    base_stamps = stamps if not variant else Stamps(base / "stamps.json")
    if not base_stamps.fresh("source", src_version):
        log(f"unpacking {deb.name} (about 1.5 GB)")
        t = time.monotonic()
        shutil.rmtree(base / "src", ignore_errors=True)
        _debian.unpack_linux_source(deb, base / "src")
        base_stamps.record("source", src_version)
        base_stamps.forget("config", "bzImage", "headers", "selftests")
        log(f"unpacked in {time.monotonic() - t:.0f}s")
    src = next((base / "src").glob("linux-source-*/"))

    build = out / "build"
    frag = _config.fragment(kernel, variant)
    config_key = f"{src_version}\n{frag}"
    if not stamps.fresh("config", config_key):
        if variant and (base / "build" / ".config").exists() and not build.exists():
            # A copy of the base tree (timestamps kept) makes the variant an
            # incremental build of the few objects its options touch.
            log(f"copying the {kernel} build tree for the {variant} variant")
            shutil.copytree(base / "build", build, symlinks=True)
        build.mkdir(exist_ok=True)
        (out / "oracle.config").write_text(frag)
        log(f"configuring: allnoconfig + {len(frag.splitlines())} options")
        _make(src, build, "allnoconfig", logfile=out / "make.log",
              KCONFIG_ALLCONFIG=str(out / "oracle.config"))
        _config.check(frag, build / ".config")
        stamps.record("config", config_key)
        stamps.forget("bzImage")

    if not stamps.fresh("bzImage", config_key) or not (out / "bzImage").exists():
        log(f"make bzImage, {os.cpu_count()} jobs (several minutes; log: {out / 'make.log'})")
        t = time.monotonic()
        with lock(root / "compile.lock", "compiling a kernel"):
            _make(src, build, "bzImage", logfile=out / "make.log")
        shutil.copy2(build / "arch/x86/boot/bzImage", out / "bzImage")
        shutil.copy2(build / ".config", out / "config")
        stamps.record("bzImage", config_key)
        log(f"kernel built in {time.monotonic() - t:.0f}s")

    if not stamps.fresh("headers", src_version) or not (out / "usr/include").exists():
        log("installing the uapi headers")
        shutil.rmtree(out / "usr", ignore_errors=True)
        # "make headers" fills build/usr/include (headers_install would copy
        # them on with rsync, one more host package for nothing).
        _make(src, build, "headers", logfile=out / "make.log")
        shutil.copytree(build / "usr/include", out / "usr/include")
        header = out / "usr/include/linux/user_events.h"
        if not header.exists():
            # 6.1 keeps the ABI header out of uapi (include/linux/), though
            # it is written as one; its selftests include <linux/user_events.h>.
            shutil.copy2(src / "include/linux/user_events.h", header)
        stamps.record("headers", src_version)
        stamps.forget("selftests")

    selftest_key = f"{src_version} {' '.join(SELFTEST_FLAGS + SELFTEST_LIBS)}"
    if not stamps.fresh("selftests", selftest_key):
        build_selftests(src, out / "usr/include", out / "selftests")
        stamps.record("selftests", selftest_key)

    (out / "VERSION").write_text(f"linux-source-{kernel} {src_version}\n")
    return out


def build_selftests(src: Path, include: Path, into: Path) -> None:
    """The kernel's own ``tools/testing/selftests/user_events``, linked statically.

    Their Makefile builds ``*_test.c`` with ``-Wl,-no-as-needed -Wall`` and
    ``-lrt -lpthread -lm``; the same here, static (the guest has no libc).
    """
    log("compiling the user_events selftests (static)")
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for source in sorted((src / "tools/testing/selftests/user_events").glob("*_test.c")):
        result = subprocess.run(["gcc", *SELFTEST_FLAGS, "-isystem", str(include), str(source),
                                 "-o", str(into / source.stem), *SELFTEST_LIBS],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise OracleError(f"selftest {source.name} does not compile:\n{result.stderr}")
