"""Debian's trace-cmd records our user events inside ``tracefs-fuse run`` and decodes them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..client_suite import WAIT_FOR_RECORDERS

pytestmark = pytest.mark.uses_fuse

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
EVENT = "u:emit u32 count; char[16] msg"


@pytest.mark.parametrize("mode", [["--nosplice"], []], ids=["read", "splice"])
def test_trace_cmd_record_and_report(tmp_path: Path, c_client, mode: list[str]) -> None:  # type: ignore[no-untyped-def]
    # trace-cmd enables the event before the program starts, so the event must
    # exist already: created through dynamic_events, as on a real kernel.
    # The traced command starts once the recorders have (WAIT_FOR_RECORDERS: without
    # that wait, 1 run in 6 lost its recorder here).
    script = (f"echo '{EVENT}' >> /sys/kernel/tracing/dynamic_events && "
              f"trace-cmd record {' '.join(mode)} -e user_events:emit "
              f"sh -c '{WAIT_FOR_RECORDERS}; exec {c_client('ue_emit')} /sys/kernel/tracing 5'")
    record = subprocess.run([*RUN, "sh", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert record.returncode == 0, record.stdout + record.stderr
    report = subprocess.run(["trace-cmd", "report"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    events = re.findall(r"ue_emit-\d+ +\[\d{3}\] +[\d.]+: emit: +count=(\d+) msg=(\S+)",
                        report.stdout)
    assert events == [(str(i), f"msg-{i}") for i in range(5)], report.stdout
