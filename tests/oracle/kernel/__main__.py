"""``python -m tests.oracle.kernel build|run``: see the package docstring."""

from __future__ import annotations

import argparse
import sys

from . import KERNELS, OracleError, cache_root
from ._build import build_kernel, build_lock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle.kernel",
                                     description="A real Linux with user_events, in QEMU.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or bring up to date) a kernel")
    build.add_argument("kernel", choices=KERNELS)
    build.add_argument("--variant", default="", choices=("", "probes"))
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            with build_lock(cache_root()):
                print(build_kernel(cache_root(), args.kernel, args.variant))
    except OracleError as e:
        print(f"oracle: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
