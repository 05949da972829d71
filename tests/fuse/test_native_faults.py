"""The native code out of memory, through a fault-injection build of its C files.

``tests/clients/native_*_faults.c`` include ``fastpath.c`` and ``receiver.c``
with their allocations (and the fast path's ``open()``) interposed, so an
allocation can fail exactly where the daemon cannot make one fail. A failure
must fall back to the engine's path or refuse, never drop: a write
acknowledged and recorded nowhere, a fast path said to be on while off, a
device end or a drain never queued. The fast path's client also checks that
``/proc`` is never read while ``fp.lock`` is held (fastpath.c's first rule).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable


def run(c_client: Callable[[str], Path], name: str) -> list[str]:
    result = subprocess.run([c_client(name)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_fast_path_out_of_memory_falls_back_to_the_engine(
        c_client: Callable[[str], Path]) -> None:
    lines = run(c_client, "native_fastpath_faults")
    assert lines == [line for line in lines if line.startswith("ok ")]
    assert len(lines) == 13


def test_receiver_queues_the_drain_and_the_end_without_memory(
        c_client: Callable[[str], Path]) -> None:
    lines = run(c_client, "native_receiver_faults")
    assert lines == [line for line in lines if line.startswith("ok ")]
    assert len(lines) == 5
