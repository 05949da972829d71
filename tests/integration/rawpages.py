"""Draining a CPU's ``trace_pipe_raw`` of a mount, for tests."""

from __future__ import annotations

import os
from pathlib import Path


def drain_pages(tracing: Path, cpu: int) -> list[bytes]:
    """Every sub-buffer ``per_cpu/cpu<cpu>/trace_pipe_raw`` hands out now."""
    fd = os.open(tracing / f"per_cpu/cpu{cpu}/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
    pages = []
    try:
        while True:
            try:
                page = os.read(fd, 4096)
            except BlockingIOError:
                break
            if not page:
                break
            pages.append(page)
    finally:
        os.close(fd)
    return pages


def nr_cpus(tracing: Path) -> int:
    return len([d for d in os.listdir(tracing / "per_cpu") if d.startswith("cpu")])
