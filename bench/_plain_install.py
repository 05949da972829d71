"""A plain install of this tree, as a user's ``pip install`` makes it (benchmark 11).

The development venv is not what users start: its editable install adds an import
finder to every interpreter's start (some 12 ms here), and its test tools bring
``typing_extensions``, which msgspec imports, with ``inspect``, whenever it is
installed (some 14 ms). A plain install is a fresh venv holding the wheel of
this tree and the runtime dependencies the development venv has (their files
linked from it: the same versions, no network), and nothing else.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).parents[1]
PROJECT = "tracefs-fuse"


def runtime_dependencies(name: str) -> list[metadata.Distribution]:
    """``name``'s installed runtime dependencies, recursively (no extras)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(text) for text in metadata.requires(name) or []]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = metadata.distribution(req.name)
        key = dist.metadata["Name"].lower()
        if key not in found:
            found[key] = dist
            todo += [Requirement(text) for text in dist.requires or []]
    return list(found.values())


@contextlib.contextmanager
def plain_install() -> Iterator[Path]:
    """The python of a plain install of this tree, in a directory every user may
    read (the benchmark runs it as an ordinary user too); removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="bench-plain-"))
    try:
        top.chmod(0o755)
        venv = top / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        site = Path(subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True).stdout.strip())
        ours = Path(sysconfig.get_path("purelib"))
        for dist in runtime_dependencies(PROJECT):
            for file in dist.files or []:
                source = Path(str(dist.locate_file(file)))
                if not source.is_relative_to(ours):
                    continue  # scripts and data outside site-packages: not imported
                target = site / source.relative_to(ours)
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    target.symlink_to(source)
        # Built from a copy: a build in the checkout leaves build/ and an egg-info
        # there, which pytest then takes for the installed distribution.
        source = top / "source"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
            "results", "*.so"))
        wheels = top / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "-w", str(wheels), str(source)], check=True,
                       capture_output=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-index", "--target", str(site), *map(str, wheels.glob("*.whl"))],
                       check=True, capture_output=True)
        # As pip compiles what it installs (this workplace sets PYTHONDONTWRITEBYTECODE).
        subprocess.run([str(python), "-m", "compileall", "-q", str(site)], check=True,
                       capture_output=True)
        yield python
    finally:
        shutil.rmtree(top)
