"""The receiver answers the daemon's own faults for any bridged filesystem (issue 11, item 1).

The bridge's test filesystem answers an ioctl by writing into the caller's
struct with ``process_vm_writev``; here the struct runs from ordinary memory
into an untouched private writable mapping of one of its own files, so the
write faults into a read sent to the daemon making it. The receiver answers
that read EIO: the write fails, the handler's exception is answered EIO, and
the daemon goes on serving. (Without the receiver the daemon hangs, and with
it every client.)
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.adversarial.fault_abort import abort, connection
from tests.fuse.test_bridge import MountedFs, run_client

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]
STEP_TIMEOUT_S = 10.0
CClient = Callable[[str], Path]


def test_fault_process_vm_writev_into_own_mapping(testfs: MountedFs, c_client: CClient) -> None:
    conn = connection(testfs.mnt)
    client = subprocess.Popen([str(c_client("bridge_ioctl")), "reg-mapped",
                               testfs.path("ioctl"), testfs.path("dual")],
                              stdout=subprocess.PIPE, text=True)
    try:
        out, _ = client.communicate(timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        abort(conn)
        client.kill()
        client.communicate()
        raise AssertionError("the daemon hung in its own fault") from None
    assert out == "ret=-1 errno=EIO\n"
    assert testfs.status()["own_fills_refused"] >= 1
    # Still serving, and a client's own fault on that file is served.
    assert run_client(c_client, "bridge_ioctl", "reg", testfs.path("ioctl"))["ret"] == "7"
