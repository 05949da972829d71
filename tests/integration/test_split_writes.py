"""Writes FUSE cannot pass as one request get the kernel's answer for the whole write.

FUSE splits a write of more than ``max_pages`` pages (an iovec takes one at
least) or ``max_write`` bytes into several requests, and cuts one short at an
iovec it cannot pin (fs/fuse/file.c, ``fuse_direct_io``). The kernel's
``user_events_write_core`` takes the write whole: the index from its first 4
bytes, ``min_size`` against its full count, EFAULT if any byte of an enabled
event's write is unreadable, one record (dropped if larger than a
sub-buffer takes), its full count returned (issue 11, items 4 and 7).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.engine.pagedecode import decode_page
from tests.integration.conftest import Mount
from tests.integration.rawpages import drain_pages, nr_cpus

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]
CClient = Callable[[str], Path]
ENTRY_HEADER = 8


def _payload_lengths(mount: Mount) -> list[int]:
    # An event's body is padded to 4 bytes: the payloads here are 4-aligned,
    # so their lengths are exact.
    return [len(e.data) - ENTRY_HEADER for cpu in range(nr_cpus(mount.path))
            for page in drain_pages(mount.path, cpu) for e in decode_page(page).events]


@pytest.mark.parametrize("mount_options", [(), ("--no-fast-path",)], ids=["fast-path", "engine"])
@pytest.mark.parametrize("mode, disabled, answer, payloads", [
    ("iov300", False, "rc=1200 errno=0", [1196]),       # two requests: 1024 + 176 bytes
    ("iov1024", False, "rc=1024 errno=0", [1020]),      # four requests of 256 bytes
    ("mib", False, "rc=1048576 errno=0", []),           # larger than a sub-buffer: dropped
    ("unmapped", False, "rc=-1 errno=EFAULT", []),      # FUSE sends the index alone
    # FUSE sends the 304 readable bytes: few iovecs, yet not the whole write
    # (issue 19 item 5: the fast path recorded 300 bytes, rc=304)
    ("cutshort", False, "rc=-1 errno=EFAULT", [4]),  # the first write's record only
    ("cutshort", True, "rc=-1 errno=EBADF", []),
    ("iov300", True, "rc=-1 errno=EBADF", []),
    ("unmapped", True, "rc=-1 errno=EBADF", []),
])
def test_split_write_is_answered_whole(tracefs: Mount, c_client: CClient, mode: str,
                                       disabled: bool, answer: str, payloads: list[int],
                                       mount_options: tuple[str, ...]) -> None:
    argv = [str(c_client("split_write")), str(tracefs), mode] + (["disabled"] if disabled else [])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    assert out == f"{mode} {answer}\n"
    assert _payload_lengths(tracefs) == payloads
