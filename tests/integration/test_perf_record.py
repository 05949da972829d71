"""Debian's ``perf record -e user_events:NAME [-a] -- CMD`` inside ``tracefs-fuse run``,
decoded by ``perf script`` (docs/perf.md, issue 20)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..ordinary_user import User

pytestmark = pytest.mark.uses_fuse

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
EVENT = "u:emit u32 count; char[16] msg"


#: perf record's mode -> its options.
MODES = {
    # Per task: the command's event, disabled until its exec (enable_on_exec).
    "per_task": "",
    # System-wide: one event per CPU (pid -1), enabled at once, and a real
    # side-band dummy per CPU that perf redirects into ours (SET_OUTPUT).
    "system_wide": "-a ",
}


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "without_sudo"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_perf_record_and_script(mode: str, as_root: bool, ordinary_user: User, tmp_path: Path,
                                c_client) -> None:  # type: ignore[no-untyped-def]
    # perf opens the event before the command execs, so the event exists
    # already: created through dynamic_events, as on a real kernel. ue_emit
    # writes once a tracer enabled it: perf's open does.
    home = Path(tempfile.mkdtemp(prefix="tfuse-perf-record-"))
    try:
        emit = shutil.copy(c_client("ue_emit"), home / "ue_emit")
        script = (f"echo '{EVENT}' >> /sys/kernel/tracing/dynamic_events && "
                  f"perf record --no-buildid-cache -o {home}/perf.data {MODES[mode]}-e user_events:emit "
                  f"-- {emit} /sys/kernel/tracing 5")
        if as_root:
            record = subprocess.run([*RUN, "sh", "-c", script], cwd=home, capture_output=True,
                                    text=True, timeout=120)
        else:
            os.chown(home, ordinary_user.uid, ordinary_user.gid)
            home.chmod(0o755)
            record = ordinary_user.run([*ordinary_user.tracefs_fuse(), "run", "--",
                                        "sh", "-c", f"cd {home} && {script}"])
        assert record.returncode == 0, record.stdout + record.stderr
        assert "(5 samples)" in record.stderr, record.stderr
        # -f: the ordinary user's file, read by root.
        decoded = subprocess.run(["perf", "script", "-f", "-i", str(home / "perf.data")],
                                 capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(home)
    assert decoded.returncode == 0, decoded.stderr
    # ue_emit: the exec's PERF_RECORD_COMM names the samples (else "perf-exec");
    # with -a it is written for perf's real tracking dummy, redirected into ours.
    events = re.findall(r"ue_emit +\d+ +\[\d{3}\] +[\d.]+: +user_events:emit: +count=(\d+) msg=(\S+)",
                        decoded.stdout)
    assert events == [(str(i), f"msg-{i}") for i in range(5)], decoded.stdout


@pytest.mark.parametrize("as_root", [True, False], ids=["root", "without_sudo"])
def test_perf_stat_counts(as_root: bool, ordinary_user: User, c_client) -> None:  # type: ignore[no-untyped-def]
    # perf stat opens a counting event (no period, no ring) on the workload,
    # disabled until its exec, and read()s the value, enabled and running
    # times at its exit: every write is counted, and ran the whole time.
    home = Path(tempfile.mkdtemp(prefix="tfuse-perf-stat-"))
    try:
        emit = shutil.copy(c_client("ue_emit"), home / "ue_emit")
        script = (f"echo '{EVENT}' >> /sys/kernel/tracing/dynamic_events && "
                  f"perf stat -x, -e user_events:emit -- {emit} /sys/kernel/tracing 7")
        if as_root:
            stat = subprocess.run([*RUN, "sh", "-c", script], capture_output=True, text=True,
                                  timeout=120)
        else:
            os.chown(home, ordinary_user.uid, ordinary_user.gid)
            home.chmod(0o755)
            stat = ordinary_user.run([*ordinary_user.tracefs_fuse(), "run", "--", "sh", "-c",
                                      script])
    finally:
        shutil.rmtree(home)
    assert stat.returncode == 0, stat.stdout + stat.stderr
    # -x,: value,unit,event,run time,percentage running,...
    rows = [line.split(",") for line in stat.stderr.splitlines() if ",user_events:emit," in line]
    assert [(row[0], row[2], row[4]) for row in rows] == [("7", "user_events:emit", "100.00")], \
        stat.stderr


@pytest.mark.parametrize("mode", sorted(MODES))
def test_perf_records_samples_are_written_natively(mode: str, tmp_path: Path,
                                                    c_client) -> None:  # type: ignore[no-untyped-def]
    # perf record's events follow the workload with inherit and ask for COMM
    # records: once the workload's thread was announced, the fast path writes its
    # samples (the debug log names each write's path), and perf script still
    # names every one of them.
    emit = c_client("ue_emit")
    script = (f"echo '{EVENT}' >> /sys/kernel/tracing/dynamic_events && "
              f"perf record --no-buildid-cache -o {tmp_path}/perf.data {MODES[mode]}"
              f"-e user_events:emit -- {emit} /sys/kernel/tracing 200")
    record = subprocess.run([sys.executable, "-m", "tracefs_fuse", "run", "--log-level", "debug",
                             "--", "sh", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert record.returncode == 0, record.stdout + record.stderr
    assert record.stderr.count("served natively") >= 150, record.stderr[-2000:]
    decoded = subprocess.run(["perf", "script", "-i", str(tmp_path / "perf.data")],
                             capture_output=True, text=True, timeout=60)
    assert decoded.returncode == 0, decoded.stderr
    events = re.findall(r"ue_emit +\d+ +\[\d{3}\] +[\d.]+: +user_events:emit: +count=(\d+) msg=(\S+)",
                        decoded.stdout)
    assert events == [(str(i), f"msg-{i}") for i in range(200)], decoded.stdout[-2000:]
