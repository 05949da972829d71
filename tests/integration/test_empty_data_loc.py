"""An empty ``__data_loc char[]`` at offset 0, written by a C client.

``user_event_validate`` checks a string's terminator at ``pos - 1`` with
``pos = entry + offset + size``: for offset 0 and size 0 that is the byte
just before the entry in its ring buffer reservation, the last byte of the
event's header, never the record's own last byte. That byte is 0 for a long
event (``array[0]``, its length, comes last) and for the first event on a
page (time delta 0), so these writes succeed on Linux whatever their last
byte, with the fast path and without it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import Mount

pytestmark = pytest.mark.uses_fuse

CClient = Callable[[str], Path]


def dl(offset: int, length: int) -> bytes:
    return ((length << 16) | offset).to_bytes(4, "little")


#: An event of 8 + 8 bytes (short: type_len says its size) and one of
#: 8 + 124 bytes (long: over RB_MAX_SMALL_DATA), each ending in a non-zero byte.
SHORT = dl(0, 0) + b"\0\0\0\x07"
LONG = dl(0, 0) + bytes(119) + b"\x07"  # 124 bytes


@pytest.mark.parametrize("mount_options", [("--debug",), ("--debug", "--no-fast-path")],
                         ids=["fast-path", "engine"])
def test_empty_data_loc_string_at_offset_0_is_accepted(tracefs: Mount, c_client: CClient,
                                                        mount_options: tuple[str, ...]) -> None:
    script = "\n".join([
        "open",
        "reg 0 0 dle __data_loc char[] s; u32 n",
        "enable dle 1",
        f"write 0 0 {SHORT.hex()}",  # the first event on CPU 0's empty page
        *[f"write 0 0 {LONG.hex()}"] * 3,
    ]) + "\n"
    client = subprocess.run([c_client("ue_script"), str(tracefs)], input=script,
                            capture_output=True, text=True, timeout=60)
    assert client.returncode == 0, client.stderr
    results = [line.split(" -> ")[1] for line in client.stdout.splitlines()]
    assert results[1:] == ["0 0 index=0", "1 0", "12 0", "128 0", "128 0", "128 0"], results
    trace = tracefs.read("trace")
    assert trace.count(" dle: ") == 4, trace
