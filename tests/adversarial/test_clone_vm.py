"""A clone(CLONE_VM) child keeps its enablers after the registrant exits (issue 19 item 6).

The kernel shares the registrant's ``user_event_mm`` with a ``CLONE_VM``
child (``user_events_fork``: ``refcount_inc(&mm->tasks)``) and removes it only
when its last task exits or execs (``user_event_mm_remove``): enabling and
disabling keep reaching the shared memory while the child runs.
"""

from __future__ import annotations

import os
import select
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import start_mount, stop_mount
from .conftest import CLIENT_TIMEOUT_S, expect_line, spawn_as

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]


@pytest.mark.parametrize("source", ["connector", "procfs"])
def test_a_clone_vm_child_keeps_updates_after_the_registrant_exits(
        source: str, scratch: Path, client_as: Callable[[str], Path]) -> None:
    home = Path(tempfile.mkdtemp(dir=scratch))
    mount = start_mount(home / "tracing", home / "daemon.log", "--process-source", source)
    try:
        enable = "events/user_events/adv_clonevm/enable"
        client = spawn_as(None, client_as("adv_clonevm"), mount)
        assert client.stdin is not None
        child = None
        try:
            lines = expect_line(client, "ready")
            child = os.pidfd_open(int(lines[0].split()[1]))
            mount.write(enable, "1")  # the child is found here (a catch up)
            client.stdin.write("x")
            client.stdin.flush()
            assert client.wait(timeout=CLIENT_TIMEOUT_S) == 0  # the registrant is gone
            answers = []
            for value, command in (("1", "1"), ("0", "0"), ("1", "1")):
                mount.write(enable, value)
                client.stdin.write(command)
                client.stdin.flush()
                answers.append(client.stdout.readline().strip())  # type: ignore[union-attr]
            assert answers == ["set", "clear", "set"]
        finally:
            client.stdin.write("q")  # the child exits, and closes its descriptors
            for pipe in (client.stdin, client.stdout, client.stderr):
                pipe.close()  # type: ignore[union-attr]
            if child is not None:
                assert select.select([child], [], [], CLIENT_TIMEOUT_S)[0], "the child stayed"
                os.close(child)
    finally:
        stop_mount(mount)
