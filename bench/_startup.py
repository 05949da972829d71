"""Benchmark 11: the test loop (issue 21), as root and as an ordinary user.

* ``tracefs-fuse run -- true``, wall time, against ``python -c pass`` (the
  interpreter's own floor) measured in the same run; from this development
  venv, and from a plain install of the same tree (``_plain_install``: what a
  user's ``pip install`` makes, without the editable finder and the test
  tools' modules that the development venv's start-up pays).
* The ``user_events`` fixture's run of ``true`` after the first (the session's
  run server is up), against a plain ``subprocess.run(["true"])``: what a test
  pays for the tool. Goal: at most 20 ms over it.

Each figure is the median of :data:`LOOPS` runs in one process (``_PROBE``),
executed as the user it is for: the ordinary user is made with useradd for the
benchmark and deleted after (``tests/ordinary_user.py``, which also lets it
reach this session's interpreter).

The package's bytecode is compiled first, as ``pip install`` compiles it and
as any start writes it, unless ``PYTHONDONTWRITEBYTECODE`` is set (it is in
the sessions of this workplace): each ``run`` would otherwise compile its
~250 modules again, 100-200 ms that no user's start-up pays.
"""

from __future__ import annotations

import compileall
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import tracefs_fuse

from tests.ordinary_user import ordinary_user

from ._plain_install import plain_install
from ._results import Recorder

LOOPS = 20
GROUP = "11. The test loop: start-up, and a fixture test that runs true (median of 20)"

_PROBE = textwrap.dedent('''
    import json, statistics, subprocess, sys, tempfile, time
    from pathlib import Path
    from tracefs_fuse.testing._forks import RunServer
    from tracefs_fuse.testing.pytest_plugin import UserEvents

    loops, plain = int(sys.argv[1]), sys.argv[2]

    def median_ms(action):
        times = []
        for _ in range(loops):
            start = time.perf_counter()
            action()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    def command(*argv):
        return lambda: subprocess.run(argv, check=True, capture_output=True)

    out = {
        "python": median_ms(command(sys.executable, "-P", "-c", "pass")),
        "run": median_ms(command(sys.executable, "-P", "-m", "tracefs_fuse", "run", "--",
                                 "true")),
        "run plain": median_ms(command(plain, "-P", "-m", "tracefs_fuse", "run", "--", "true")),
        "subprocess": median_ms(command("true")),
    }
    server = RunServer()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            fixture = UserEvents(Path(workdir), server)
            fixture.run(["true"])  # the first test's: the server's start is behind it
            out["fixture"] = median_ms(lambda: fixture.run(["true"]))
    finally:
        server.close()
    print(json.dumps(out))
''')


def test_loop(rec: Recorder, repeats: int) -> None:
    compileall.compile_dir(Path(tracefs_fuse.__file__).parent, quiet=1)
    with ordinary_user("bench") as user, plain_install() as plain:
        probe = [sys.executable, "-P", "-c", _PROBE, str(LOOPS), str(plain)]
        for _ in range(repeats):
            for column, argv in (("root", probe),
                                 ("ordinary user", user.argv(probe, fuse_mode=0o666))):
                done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                      cwd="/")
                if done.returncode != 0:
                    raise RuntimeError(f"the test-loop probe failed as {column}:\n"
                                       f"{done.stderr}")
                got = json.loads(done.stdout.splitlines()[-1])
                rec.add(GROUP, "python -P -c pass", column, "ms", got["python"])
                rec.add(GROUP, "tracefs-fuse run -- true", column, "ms", got["run"])
                rec.add(GROUP, "tracefs-fuse run -- true, plain install (goals 100 ms; 150 ms)",
                        column, "ms", got["run plain"])
                rec.add(GROUP, "subprocess.run(['true'])", column, "ms", got["subprocess"])
                rec.add(GROUP, "fixture's run of true, after the first", column, "ms",
                        got["fixture"])
                rec.add(GROUP, "fixture's run of true over subprocess.run (goal ≤ 20 ms)",
                        column, "ms", got["fixture"] - got["subprocess"])
        for column in ("root", "ordinary user"):
            rec.add_ratio(GROUP, "fixture's run of true ÷ subprocess.run", column,
                          ("fixture's run of true, after the first", column),
                          ("subprocess.run(['true'])", column))
