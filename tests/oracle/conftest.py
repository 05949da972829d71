"""Differential tests against a real kernel: the same static program, twice.

``make oracle-test`` runs these. Each test builds a C client statically, runs
it on a real Linux with CONFIG_USER_EVENTS booted in QEMU
(``../shared/tools/kernel-oracle``; built on first use, about 8 minutes per
kernel) and against a tracefs-fuse mount, and compares what the two printed.
They are kept out of ``make test``: building and booting kernels is too slow
for every CI run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

ORACLE_TOOLS = Path(os.environ.get(
    "ORACLE_TOOLS", Path(__file__).parents[3] / "shared" / "tools" / "kernel-oracle"))
CLIENTS = Path(__file__).parents[1] / "clients"
ORACLE_CLIENTS = Path(__file__).parent / "clients"


def oracle_dir(kernel: str) -> Path:
    default = "~/.cache/kernel-oracle" + ("" if kernel == "6.12" else f"-{kernel}")
    return Path(os.environ.get("ORACLE_DIR", default)).expanduser()


class Oracle:
    """A real kernel to run static programs on."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.dir = oracle_dir(kernel)
        self.env = {**os.environ, "ORACLE_KERNEL": kernel, "ORACLE_DIR": str(self.dir)}
        if not (self.dir / "bzImage").exists():
            subprocess.run([ORACLE_TOOLS / "oracle-build.sh"], env=self.env, check=True)

    def run(self, files: list[Path], command: str) -> str:
        result = subprocess.run(
            [ORACLE_TOOLS / "oracle-run.sh", *map(str, files), "--", "sh", "-c", command],
            env=self.env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"oracle run failed:\n{result.stdout}{result.stderr}"
        return result.stdout


@pytest.fixture(scope="session")
def oracle_6_12() -> Oracle:
    return Oracle("6.12")


@pytest.fixture(scope="session")
def oracle_6_1() -> Oracle:
    return Oracle("6.1")


@pytest.fixture(scope="session")
def static_client(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Compile a client statically (the oracle's initramfs has only busybox)."""
    outdir = tmp_path_factory.mktemp("static")

    def build(name: str) -> Path:
        src = CLIENTS / f"{name}.c"
        if not src.exists():
            src = ORACLE_CLIENTS / f"{name}.c"
        exe = outdir / name
        if not exe.exists():
            include = oracle_dir("6.12") / "usr" / "include"
            subprocess.run(["cc", "-static", "-O1", "-D_GNU_SOURCE", "-isystem", str(include),
                            "-o", str(exe), str(src), "-lpthread"], check=True)
        return exe

    return build


def run_here(exe: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, f"{shlex.join([str(exe), *args])}:\n{result.stdout}{result.stderr}"
    return result.stdout


# The mounting fixtures of the integration tests, for the "ours" side.
from ..integration.conftest import mount_options, tracefs  # noqa: E402,F401
