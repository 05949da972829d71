"""Run synth_capture.sh on the kernel oracle(s) and write the golden JSON.

    .venv/bin/python -m tests.oracle.synth.capture              # both kernels, writes the golden
    .venv/bin/python -m tests.oracle.synth.capture --only base  # one kernel, keeps the other
    .venv/bin/python -m tests.oracle.synth.capture --parse OUT.txt

Two kernels, both Debian's 6.12 from our oracle (``tests/oracle/kernel``):
"base" is its ordinary build (synthetic events, hist triggers, user events;
no kprobes, no inject), "probes" its ``probes`` variant, which adds
CONFIG_KPROBES, CONFIG_KPROBE_EVENTS and CONFIG_TRACE_EVENT_INJECT (built on
first use, incrementally from the base tree). The script's output is a
sequence of ``@@ <case> <part>`` headers, each followed by that part's text;
this turns it into ``{"variants": {name: {"kernel", "cases": {case: {part:
text}}}}}`` with ``raw`` parts as lists of ``{"cpu", "page"}`` (hex
sub-buffers).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ..kernel import Oracle

HERE = Path(__file__).resolve().parent
GOLDEN = HERE.parents[1] / "data" / "synth-captures-6.12.117.json"
#: Capture name -> oracle variant.
VARIANTS = {"base": "", "probes": "probes"}


def parse(text: str) -> dict:
    """Group the script's output by case and part."""
    cases: dict[str, dict] = {}
    lines: list[str] | None = None
    raw: list[dict] | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("@@ "):
            words = line[3:].rstrip("\n").split(" ", 1)
            if len(words) == 1:
                break  # "@@ end"
            case, name = words
            parts = cases.setdefault(case, {})
            raw = lines = None
            if name == "raw":
                raw = parts.setdefault("raw", [])
                continue
            key, n = name, 2
            while key in parts:  # the same file snapshotted twice in one case
                key, n = f"{name}#{n}", n + 1
            lines = parts[key] = []
        elif raw is not None:
            cpu, _, page = line.split()
            raw.append({"cpu": int(cpu[3:]), "page": page})
        elif lines is not None:
            lines.append(line)
    return {case: {name: value if name == "raw" else "".join(value)
                   for name, value in parts.items()}
            for case, parts in cases.items()}


def run(variant: str, workdir: Path) -> str:
    oracle = Oracle("6.12", VARIANTS[variant])
    tfctl = workdir / "tfctl"
    subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-isystem", str(oracle.include),
                    str(HERE / "tfctl.c"), "-o", str(tfctl)], check=True)
    result = oracle.run([tfctl, HERE / "synth_capture.sh"], "sh synth_capture.sh")
    if result.status != 0:
        raise SystemExit(f"synth_capture.sh exited with {result.status}:\n{result.output}")
    return result.output


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parse", type=Path, help="print a saved VM output as JSON instead")
    ap.add_argument("--only", choices=sorted(VARIANTS), action="append",
                    help="capture only this variant (others stay as in the golden file)")
    args = ap.parse_args()
    if args.parse:
        json.dump(parse(args.parse.read_text(encoding="latin-1")), sys.stdout, indent=1)
        return 0
    golden: dict = {"captured_with": "tests/oracle/synth/capture.py (synth_capture.sh)",
                    "variants": {}}
    if GOLDEN.exists():
        golden["variants"] = json.loads(GOLDEN.read_text(encoding="utf-8"))["variants"]
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.only or list(VARIANTS):
            cases = parse(run(variant, Path(tmp)))
            meta = cases.pop("meta")
            golden["variants"][variant] = {"kernel": meta["kernel"].strip(),
                                           "config": meta["config"].split(),
                                           "cases": cases}
    GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
