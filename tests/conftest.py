"""Shared fixtures: C clients compiled once per session, the FUSE and tracefs gates.

Integration tests drive the filesystem from small C programs, because our users
are C programs. Sources live in ``tests/clients/*.c``; a first-line comment
``// link: -lfoo`` adds libraries, ``// cflags: ...`` adds compiler flags.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import settings

from . import real_tracefs

# Hypothesis fails an example slower than 200 ms by default: on a loaded 2-CPU machine (CI, or
# helpers sharing it) an ordinary example can take that long. Speed is bench/'s; no deadline.
settings.register_profile("tracefs-fuse", deadline=None)
settings.load_profile("tracefs-fuse")

CLIENTS = Path(__file__).parent / "clients"


def _header_flags(src: Path, key: str) -> list[str]:
    flags: list[str] = []
    for line in src.read_text().splitlines()[:5]:
        prefix = f"// {key}:"
        if line.startswith(prefix):
            flags += shlex.split(line[len(prefix):])
    return flags


@pytest.fixture(scope="session")
def c_client(tmp_path_factory: pytest.TempPathFactory):
    """Compile ``tests/clients/<name>.c`` (once) and return the binary's path."""
    outdir = tmp_path_factory.mktemp("clients")
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in built:
            src = CLIENTS / f"{name}.c"
            exe = outdir / name
            cmd = ["cc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                   *_header_flags(src, "cflags"), "-o", str(exe), str(src),
                   "-lpthread", *_header_flags(src, "link")]
            subprocess.run(cmd, check=True)
            built[name] = exe
        return built[name]

    return build


def fuse_unavailable_reason() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (FUSE kernel module not loaded)"
    if os.geteuid() != 0:
        return "integration tests mount with mount namespaces and need root"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CI"):
        # In CI a missing FUSE or tracefs is a broken machine: the tests run and fail.
        return
    fuse_reason = fuse_unavailable_reason()
    tracefs_reason = real_tracefs.unavailable_reason()
    for item in items:
        if fuse_reason is not None and "uses_fuse" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=fuse_reason))
        if tracefs_reason is not None and "real_tracefs_root" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(reason=tracefs_reason))


@pytest.fixture
def real_tracefs_root() -> Iterator[Path]:
    """The machine's tracefs, mounted privately for one test."""
    with real_tracefs.real_tracefs() as root:
        yield root
