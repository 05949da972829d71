"""The machine a run measured, as far as it changes the figures."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from ._results import Machine


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _libfuse() -> str:
    """The libfuse that pyfuse3 and the floor load (its own version string)."""
    lib = ctypes.CDLL("libfuse3.so.3")
    lib.fuse_pkgversion.restype = ctypes.c_char_p
    text: bytes = lib.fuse_pkgversion()
    return text.decode()


def _commit() -> str:
    try:
        result = subprocess.run(["git", "describe", "--always", "--dirty"],
                                capture_output=True, text=True, cwd=Path(__file__).parent)
    except OSError:  # no git: a tarball
        return "unknown"
    return result.stdout.strip() or "unknown"


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def describe(load_average_start: tuple[float, float, float], started: datetime) -> Machine:
    uname = os.uname()
    return Machine(kernel=f"{uname.release} {uname.version}", cpu_model=_cpu_model(),
                   cpus=os.cpu_count() or 0, python=platform.python_version(),
                   libfuse=_libfuse(), pyfuse3=version("pyfuse3"),
                   load_average_start=load_average_start, load_average_end=load_average(),
                   commit=_commit(), started=started.astimezone(timezone.utc).isoformat())
