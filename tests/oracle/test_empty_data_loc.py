"""An empty ``__data_loc char[]`` at offset 0 against Linux 6.12 (``make oracle-test``).

Its terminator is the byte just before the entry in its reservation (the last
byte of the ring buffer event's header), which is 0 for the first event on a
page and for a long event: the kernel accepts these writes whatever their
last byte (tests/integration/test_empty_data_loc.py says why).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..integration.conftest import Mount
from ..integration.test_empty_data_loc import LONG, SHORT
from .conftest import Kernel

pytestmark = [pytest.mark.oracle, pytest.mark.uses_fuse]

TRACING = "/sys/kernel/tracing"

SCRIPT = "\n".join([
    "open",
    "reg 0 0 dle __data_loc char[] s; u32 n",
    "enable dle 1",
    f"write 0 0 {SHORT.hex()}",
    *[f"write 0 0 {LONG.hex()}"] * 3,
]) + "\n"


def test_empty_data_loc_string_at_offset_0_matches_linux_6_12(  # type: ignore[no-untyped-def]
        oracle_6_12: Kernel, static_client, tracefs: Mount, tmp_path: Path) -> None:
    exe = static_client("ue_script")
    script = tmp_path / "dle.script"
    script.write_text(SCRIPT)
    kernel = oracle_6_12.run([exe, script], f"./ue_script {TRACING} < dle.script").splitlines()
    here = subprocess.run([str(exe), str(tracefs)], input=SCRIPT, capture_output=True,
                          text=True, timeout=60)
    assert here.returncode == 0, here.stdout + here.stderr
    ours = here.stdout.splitlines()
    assert [line.split(" -> ")[1] for line in kernel][3:] == ["12 0", "128 0", "128 0", "128 0"]
    assert [line.split(" -> ")[1] for line in ours][1:] == [
        line.split(" -> ")[1] for line in kernel][1:]  # the first: an fd number
