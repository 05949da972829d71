"""``python -m tests.oracle.kernel build|run|missing-packages``: see the package docstring."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import KERNELS, Oracle, OracleError
from ._build import build_kernel, missing_packages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle.kernel",
                                     description="A real Linux with user_events, in QEMU.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or bring up to date) a kernel; prints its directory")
    build.add_argument("kernel", choices=KERNELS)
    build.add_argument("--variant", default="", choices=("", "probes"))
    run = sub.add_parser("run", help="boot a kernel and run one shell command in /oracle")
    run.add_argument("kernel", choices=KERNELS)
    run.add_argument("--variant", default="", choices=("", "probes"))
    run.add_argument("--timeout", type=float, default=300, help="seconds (default 300)")
    run.add_argument("files", nargs="*", type=Path, help="copied into /oracle")
    run.add_argument("shell_command", metavar="-- COMMAND", help="run by busybox sh")
    sub.add_parser("missing-packages", help="print the host packages the build lacks")
    args = parser.parse_args(argv)
    if args.command == "missing-packages":
        print(" ".join(missing_packages()))
        return 0
    try:
        if args.command == "build":
            from . import cache_root
            print(build_kernel(cache_root(), args.kernel, args.variant))
            return 0
        oracle = Oracle(args.kernel, args.variant)
        result = oracle.run(args.files, args.shell_command, timeout=args.timeout)
    except OracleError as e:
        print(f"oracle: {e}", file=sys.stderr)
        return 125
    sys.stdout.write(result.output)
    return result.status or 0


if __name__ == "__main__":
    sys.exit(main())
