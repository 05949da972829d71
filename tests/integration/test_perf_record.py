"""Debian's ``perf record -e user_events:NAME -- CMD`` inside ``tracefs-fuse run``,
decoded by ``perf script`` (docs/perf.md, issue 20)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.uses_fuse

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
EVENT = "u:emit u32 count; char[16] msg"


def test_perf_record_and_script(tmp_path: Path, c_client) -> None:  # type: ignore[no-untyped-def]
    # perf opens the event before the command execs (disabled, enable_on_exec),
    # so the event exists already: created through dynamic_events, as on a
    # real kernel. ue_emit writes once a tracer enabled it: perf's open does.
    script = (f"echo '{EVENT}' >> /sys/kernel/tracing/dynamic_events && "
              f"perf record --no-buildid-cache -o {tmp_path}/perf.data -e user_events:emit "
              f"-- {c_client('ue_emit')} /sys/kernel/tracing 5")
    record = subprocess.run([*RUN, "sh", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert record.returncode == 0, record.stdout + record.stderr
    assert "(5 samples)" in record.stderr, record.stderr
    decoded = subprocess.run(["perf", "script", "-i", str(tmp_path / "perf.data")],
                             capture_output=True, text=True, timeout=60)
    assert decoded.returncode == 0, decoded.stderr
    # ue_emit: the exec's PERF_RECORD_COMM names the samples (else "perf-exec").
    events = re.findall(r"ue_emit +\d+ +\[\d{3}\] +[\d.]+: +user_events:emit: +count=(\d+) msg=(\S+)",
                        decoded.stdout)
    assert events == [(str(i), f"msg-{i}") for i in range(5)], decoded.stdout
