"""ioctl numbers a file does not know (issue 11, item 7, the ioctl half).

The kernel's files look at the number first: tracefs' control files have no
``unlocked_ioctl`` (``vfs_ioctl``: ENOTTY), ``trace_pipe_raw`` knows 0 and
GET_READER (``tracing_buffers_ioctl``: ENOTTY), ``user_events_data`` its three
(``user_events_ioctl``: ENOTTY). Through FUSE, an ioctl whose number says it
passes ``_IOC_SIZE`` bytes in (``_IOC_WRITE``, which ``0xffffffff`` does)
has them copied from the caller before the daemon sees the number
(fs/fuse/ioctl.c ``fuse_do_ioctl``; every server but CUSE is "restricted"),
so an unreadable argument is EFAULT before anyone can say ENOTTY. That is the
closest FUSE allows, documented in docs/emulation.md and pinned here, next
to the live kernel's answers.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import Mount

pytestmark = pytest.mark.uses_fuse

#: What the kernel answers, for every file here (checked live below).
KERNEL = {
    "none": "ENOTTY", "write_unreadable": "ENOTTY", "write_readable": "ENOTTY",
    "read_unwritable": "ENOTTY", "all_ones_unreadable": "ENOTTY", "all_ones_null": "ENOTTY",
    "all_ones_readable": "ENOTTY", "reg_unreadable": "ENOTTY", "fionread": "0 value=0",
}
#: Where FUSE copies the argument in first: the copy's EFAULT.
FUSE_COPY_IN = {"write_unreadable": "EFAULT", "all_ones_unreadable": "EFAULT",
                "all_ones_null": "EFAULT", "reg_unreadable": "EFAULT"}


def answers(client: Path, file: Path) -> dict[str, str]:
    out = subprocess.run([str(client), str(file)], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return dict(line.split(": ", 1) for line in out.splitlines())


@pytest.mark.parametrize("name", ["tracing_on", "per_cpu/cpu0/trace_pipe_raw"])
def test_unknown_ioctls_of_tracefs_files(name: str, open_mount: Mount, kernel_instance: Path,
                                         c_client: Callable[[str], Path]) -> None:
    client = c_client("adv_ioctl")
    assert answers(client, kernel_instance / name) == KERNEL
    expected = KERNEL | FUSE_COPY_IN
    if name.endswith("trace_pipe_raw"):
        # FIONREAD is the VFS's i_size - f_pos, as an int: st_size differs
        # (docs/emulation.md), so does this.
        size = (open_mount / name).stat().st_size
        expected["fionread"] = f"0 value={ctypes.c_int(size).value}"
    assert answers(client, open_mount / name) == expected


def test_unknown_ioctls_of_user_events_data(open_mount: Mount, c_client: Callable[[str], Path]) -> None:
    """user_events_ioctl: ENOTTY for anything but its three; DIAG_IOCSREG's
    ``get_user(size, &ureg->size)`` is EFAULT in the kernel too."""
    assert answers(c_client("adv_ioctl"), open_mount / "user_events_data") == KERNEL | FUSE_COPY_IN
