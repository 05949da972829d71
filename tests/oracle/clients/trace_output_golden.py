"""Turn a trace_output.c log into the JSON golden file tests/engine/test_output.py replays.

    python trace_output_golden.py LOG OUT.json "how it was captured"

Each case becomes a list of steps in log order. Bytes that are text (read
results, commands) are stored as latin-1 strings, so the golden file reads
like the trace itself; payloads and written data stay hex. The consecutive
reads of one open file become one ``read`` step with the result of each
read(2): text, or ``"EAGAIN"``.
"""

from __future__ import annotations

import json
import sys


def _bytes(field: str) -> bytes:
    return b"" if field == "-" else bytes.fromhex(field)


def convert(log: str, captured_with: str) -> dict[str, object]:
    golden: dict[str, object] = {"captured_with": captured_with}
    cases: dict[str, list[dict[str, object]]] = {}
    steps: list[dict[str, object]] = []
    reading: dict[str, object] | None = None
    for line in log.splitlines():
        words = line.split(" ")
        tag = words[0]
        if tag == "KERNEL":
            golden["kernel"] = words[1]
        elif tag == "PID":
            golden["pid"] = int(words[1])
        elif tag == "CASE":
            steps = cases.setdefault(words[1], [])
        elif tag == "REGISTER":
            steps.append({"op": "register", "index": int(words[1]), "id": int(words[2]),
                          "command": _bytes(words[3]).decode("latin-1")})
        elif tag == "EVENT":
            steps.append({"op": "event", "cpu": int(words[1]), "index": int(words[2]),
                          "ret": int(words[3]), "payload": words[4].strip("-")})
        elif tag == "WRITE":
            steps.append({"op": "write", "path": words[1], "cpu": int(words[2]),
                          "trunc": words[3] == "1", "ret": int(words[4]),
                          "data": words[5].strip("-")})
        elif tag == "DELETE":
            steps.append({"op": "delete", "name": words[1], "ret": int(words[2])})
        elif tag == "READ":
            if reading is None:
                reading = {"op": "read", "path": words[1], "size": int(words[2]), "results": []}
                steps.append(reading)
            result = words[3]
            reading["results"].append(  # type: ignore[attr-defined]
                result if result == "EAGAIN" else _bytes(result).decode("latin-1"))
        elif tag == "CLOSE":
            reading = None
    golden["cases"] = cases
    return golden


def main() -> None:
    log, out, captured_with = sys.argv[1:4]
    with open(log, encoding="ascii") as f:
        golden = convert(f.read(), captured_with)
    with open(out, "w", encoding="ascii") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
