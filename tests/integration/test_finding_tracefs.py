"""How each kind of tool finds a tracefs-fuse mount (docs/emulation.md, "Pointing tools at a mount").

A FUSE mount has type ``fuse.tracefs``, never ``tracefs``, so discovery
through ``/proc/mounts`` never finds it. These tests check each way the
documentation offers, and that the environment variable it does not offer
really does nothing. This kernel has no user_events: ``user_events_data``
present means the tool reached our mount.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]


def run(argv: list[str], env: dict[str, str] | None = None) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_libtracefs_takes_the_path_from_tracefs_set_tracing_dir(tracefs: Mount,
                                                                  c_client) -> None:  # type: ignore[no-untyped-def]
    """Files are reached; libtracefs 1.6.4's ``tracefs_file_exists(NULL, …)``
    (``tracefs_instance_get_dir(NULL)``) rediscovers through /proc/mounts
    instead, a top instance from ``tracefs_instance_alloc(dir, NULL)`` does not."""
    out = run([str(c_client("tracefs_dir")), str(tracefs)])
    assert out == f"dir={tracefs} read=yes exists=no top=yes\n"


def test_libtracefs_1_6_4_ignores_tracefs_path_in_the_environment(tracefs: Mount,
                                                                   c_client) -> None:  # type: ignore[no-untyped-def]
    """``TRACEFS_PATH`` is a compile-time default in libtracefs, not a variable.

    Its discovery reads /proc/mounts and, finding no tracefs, mounts one at
    /sys/kernel/tracing: in a private mount namespace here, so the host is
    left as it was.
    """
    env = {**os.environ, "TRACEFS_PATH": str(tracefs)}
    out = run(["unshare", "--mount", "--propagation", "private", str(c_client("tracefs_dir"))],
              env=env)
    # Whatever it found (this machine's tracefs, or none), it is not ours.
    assert not out.startswith(f"dir={tracefs} ")
    assert out.endswith(" read=no exists=no top=no\n")


def test_discovering_tools_find_the_mount_inside_run(c_client) -> None:  # type: ignore[no-untyped-def]
    """libtracefs' own discovery (trace-cmd's, LinuxTracepoints' alike) inside ``run``."""
    assert run([*RUN, str(c_client("tracefs_dir"))]) == (
        "dir=/sys/kernel/tracing read=yes exists=yes top=yes\n")
    # trace-cmd 3.1.6 has no option naming a tracing directory; inside run it
    # lists our events (test_trace_cmd.py records and reports them).
    out = run([*RUN, "sh", "-c", "echo 'u:findme u32 x' >> /sys/kernel/tracing/dynamic_events "
               "&& trace-cmd list -e user_events"])
    assert out == "user_events:findme\n"
