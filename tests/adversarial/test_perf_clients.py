"""Hostile and careless perf clients cannot wedge or bloat the daemon (issue 20 item 6).

``adv_perf`` runs under ``tracefs-fuse run`` (perf is emulated only there), as
root and as an ordinary user: clients that map a ring and are killed, never
read a ring, loop ``SET_OUTPUT``, open perf fds until their fd limit; after
each, a bystander process is served (its own event, its own perf event). The
daemon's descriptors are counted from inside (``/proc/PPID/fd``): nothing per
event, nothing per process seen beyond its bounded writer cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .conftest import HardUsers

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

TRACING = "/sys/kernel/tracing"
#: adv_perf's checks: 3 of setup, mapdie 4, noread 6, setoutput 5, many 8.
CHECKS = 26


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "without_sudo"])
def test_hostile_perf_clients(as_root: bool, hard_users: HardUsers, c_client) -> None:  # type: ignore[no-untyped-def]
    exe = c_client("adv_perf")
    if as_root:
        result = subprocess.run([sys.executable, "-m", "tracefs_fuse", "run", "--", str(exe),
                                 TRACING], capture_output=True, text=True, timeout=300)
    else:
        user = hard_users.stranger
        home = Path(tempfile.mkdtemp(prefix="tfuse-adv-perf-"))
        try:
            os.chown(home, user.uid, user.gid)
            home.chmod(0o755)
            copy = shutil.copy(exe, home / exe.name)
            result = user.run([*user.tracefs_fuse(), "run", "--", copy,
                                        TRACING])
        finally:
            shutil.rmtree(home)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == f"checks {CHECKS}", result.stdout + result.stderr
    assert sum(line.startswith("ok ") for line in lines) == CHECKS
