"""``python -m tests.adversarial.report FILE``: the fuzzers' figures as a table.

FILE is what the fuzzers append to ``$TFUSE_FUZZ_REPORT`` (JSON lines, see
conftest ``fuzz_report``); ``make fuzz`` prints it this way, for
docs/reliability.md.
"""

from __future__ import annotations

import sys

import msgspec

COLUMNS = ["tried", "written", "read", "lost", "bit_checks", "bit_wrong", "wrong_errnos",
           "fuse_forced", "crashes", "hangs", "seconds"]


def main(argv: list[str]) -> int:
    with open(argv[1], "rb") as f:
        runs = [msgspec.json.decode(line) for line in f if line.strip()]
    print("| fuzzer | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for run in runs:
        print(f"| {run['fuzzer']} | " + " | ".join(str(run.get(c, "")) for c in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
