"""Our event ids against the host kernel's (issue 13, fidelity 1).

Tools such as perf-collect read ``events/*/*/id`` from the tracefs they are
given and hand it to ``perf_event_open``, which the *host* kernel answers.
An id the host also uses would attach them to one of its own events and
record it under our name; ours must be ids the host does not have.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracefs_fuse.host._host_events import highest_event_id

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse


def host_ids(tracing: Path) -> set[int]:
    return {int(p.read_text()) for p in tracing.glob("events/*/*/id")}


def test_dynamic_ids_are_not_the_host_kernels(tracefs: Mount, real_tracefs_root: Path,
                                              c_client) -> None:  # type: ignore[no-untyped-def]
    tracefs.write("dynamic_events", "u:idcheck u32 x")
    ours = int(tracefs.read("events/user_events/idcheck/id"))
    host = host_ids(real_tracefs_root)
    assert ours not in host
    assert ours > max(host) == highest_event_id(str(real_tracefs_root))
    # What a perf-based collector then does with it: the host refuses the id
    # instead of opening one of its own events.
    exe = c_client("perf_tracepoint")
    out = subprocess.run([str(exe), str(tracefs / "events/user_events/idcheck/id")],
                         capture_output=True, text=True, check=True).stdout
    assert out == f"id={ours} perf_event_open=EINVAL\n"
    # The check itself can tell: a host event's id opens.
    kernel_id = real_tracefs_root / "events/syscalls/sys_enter_sync/id"
    out = subprocess.run([str(exe), str(kernel_id)], capture_output=True, text=True,
                         check=True).stdout
    assert out.endswith("perf_event_open=ok\n")
