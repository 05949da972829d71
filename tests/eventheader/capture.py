"""Capture EventHeader records written by the project's own C clients.

    sudo .venv/bin/python -m tests.eventheader.capture

builds ``tests/clients/eh_emit.c`` and ``docs/examples/eventheader.c``, runs
them under ``tracefs-fuse run --events 'user_events:*'``, and stores what a
reader of that tracefs sees (the events' ``format`` files and the raw
``trace_pipe_raw`` sub-buffers) in ``tests/data/`` as :data:`CAPTURES`.
``test_captures.py`` decodes them; the values it expects are the ones the C
sources write, not a copy of a decoder's output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[2]
CAPTURES = ROOT / "tests" / "data" / "eventheader-captures.tracefs-fuse.json"

#: Runs inside the namespace, after the clients: formats and pages as JSON.
_DUMP = r"""
import errno, json, os, sys
root = "/sys/kernel/tracing"
formats = []
for system in sorted(os.listdir(f"{root}/events")):
    if system.startswith("user_events"):
        for name in sorted(os.listdir(f"{root}/events/{system}")):
            path = f"{root}/events/{system}/{name}/format"
            if os.path.exists(path):
                formats.append({"system": system, "text": open(path).read()})
pages = []
for cpu in sorted(int(d[3:]) for d in os.listdir(f"{root}/per_cpu")):
    fd = os.open(f"{root}/per_cpu/cpu{cpu}/trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
    while True:
        try:
            page = os.read(fd, 4096)
        except OSError as exc:
            assert exc.errno == errno.EAGAIN
            break
        pages.append({"cpu": cpu, "page": page.hex()})
    os.close(fd)
json.dump({"formats": formats, "pages": pages}, open(sys.argv[1], "w"), indent=1)
"""


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for source in (ROOT / "tests/clients/eh_emit.c", ROOT / "docs/examples/eventheader.c"):
            built[source.stem] = Path(tmp, source.stem)
            subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-o", str(built[source.stem]),
                            str(source)], check=True)
        out = Path(tmp, "capture.json")
        script = (f"{built['eh_emit']} && {built['eventheader']} 'captured greeting' 7 && "
                  f"{sys.executable} -c '{_DUMP}' {out}")
        subprocess.run([sys.executable, "-m", "tracefs_fuse", "run", "--events", "user_events:*",
                        "--", "sh", "-c", script], check=True)
        capture = json.loads(out.read_text())
    capture["source"] = ("tests/clients/eh_emit.c, docs/examples/eventheader.c "
                         "'captured greeting' 7, under tracefs-fuse run")
    CAPTURES.write_text(json.dumps(capture, indent=1) + "\n")
    print(f"{CAPTURES}: {len(capture['formats'])} formats, {len(capture['pages'])} pages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
