"""Debian packages the oracle is made of: fetched, never installed.

``apt-get download`` puts a package's ``.deb`` in the cache and
``dpkg-deb`` reads it there, so the host's own package set is untouched
(only the build tools are installed, by ``make oracle-test``). The first
version fetched stays until its file is deleted: a kernel built once keeps
answering the same way when Debian publishes the next stable update.

Rules: nothing is fetched from outside the Debian archive; a failure says
which command failed and what to do about it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ._log import OracleError, log


def fetch(package: str, debs: Path) -> Path:
    """The cached ``.deb`` of ``package``, downloading the candidate once.

    Raises:
        OracleError: apt-get could not download it (no package lists?).
    """
    debs.mkdir(parents=True, exist_ok=True)
    cached = sorted(debs.glob(f"{package}_*.deb"))
    if cached:
        return cached[-1]
    log(f"apt-get download {package}")
    result = subprocess.run(["apt-get", "download", package], cwd=debs,
                            capture_output=True, text=True)
    cached = sorted(debs.glob(f"{package}_*.deb"))
    if result.returncode != 0 or not cached:
        raise OracleError(f"apt-get download {package} failed (as root, `apt-get update` "
                          f"first?):\n{result.stdout}{result.stderr}")
    return cached[-1]


def version(deb: Path) -> str:
    """The Debian version of a ``.deb`` (``6.12.117-1~deb12u1``)."""
    return subprocess.run(["dpkg-deb", "--field", str(deb), "Version"], check=True,
                          capture_output=True, text=True).stdout.strip()


def unpack_linux_source(deb: Path, into: Path) -> Path:
    """Unpack the kernel tree a ``linux-source-X.Y`` package carries.

    The package holds one ``usr/src/linux-source-X.Y.tar.xz``; its tree
    (about 1.5 GB) is what gets built.

    Returns:
        The tree's top directory (the one with the Makefile).
    """
    into.mkdir(parents=True, exist_ok=True)
    data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    tarball = subprocess.Popen(["tar", "-x", "-O", "--wildcards", "./usr/src/linux-source-*.tar.xz"],
                               stdin=data.stdout, stdout=subprocess.PIPE)
    assert data.stdout is not None and tarball.stdout is not None
    data.stdout.close()
    subprocess.run(["tar", "-x", "-J", "-C", str(into)], stdin=tarball.stdout, check=True)
    tarball.stdout.close()
    if tarball.wait() != 0 or data.wait() != 0:
        raise OracleError(f"could not unpack {deb.name}")
    trees = [p.parent for p in into.glob("linux-source-*/Makefile")]
    if len(trees) != 1:
        raise OracleError(f"{deb.name}: expected one linux-source-* tree, found {trees}")
    return trees[0]


def extract_file(deb: Path, member: str, to: Path) -> None:
    """Copy one file (``./bin/busybox``) out of a ``.deb``."""
    data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    with to.open("wb") as out:
        subprocess.run(["tar", "-x", "-O", member], stdin=data.stdout, stdout=out, check=True)
    assert data.stdout is not None
    data.stdout.close()
    if data.wait() != 0:
        raise OracleError(f"could not read {member} from {deb.name}")
