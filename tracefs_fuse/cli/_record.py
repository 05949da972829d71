"""The command line of recordings: ``--events``, ``run --record`` and ``show``.

* ``mount --events GLOB`` and ``run --events GLOB``: enable matching user
  events the moment they are registered (repeatable; ``set_event`` words with
  globs, ``!`` to exclude).
* ``run --record FILE [--events GLOB ...] -- CMD``: record what CMD emits as
  JSON Lines; ``--events`` defaults to ``user_events:*`` there.
* ``show FILE``: a recording, one line per event (``-`` reads stdin).

Rules: these are hooks :mod:`tracefs_fuse.cli` calls, one per place; errors
in the user's input exit 2 without a traceback, like the rest of the CLI.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, BinaryIO

import msgspec

#: What ``run --record`` enables when no ``--events`` is given.
DEFAULT_RECORD_EVENTS = ("user_events:*",)


def add_events_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--events", action="append", default=None, metavar="GLOB",
        help="enable user events matching GLOB as they are registered ([!]system:event "
             "or [!]name, globs allowed; repeatable) (default: none; with run --record: "
             "user_events:*)")


def add_record_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", metavar="FILE", default=None,
                        help="write the events CMD emits to FILE as JSON Lines, and a summary "
                             "line to stderr (default: no recording)")


def add_show(sub: Any) -> None:
    show = sub.add_parser("show", help="print a recording (run --record FILE) for people")
    show.add_argument("file", help="the JSON Lines file ('-': standard input)")
    show.set_defaults(handler=cmd_show, parser=show)


def events_config(args: argparse.Namespace) -> dict[str, Any]:
    """The ``events`` field of the config, for ``mount`` and ``run``."""
    events = args.events
    if events is None and getattr(args, "record", None) is not None:
        events = list(DEFAULT_RECORD_EVENTS)
    return {"events": events or []}


def open_record(args: argparse.Namespace) -> tuple[BinaryIO, str] | None:
    """The file ``--record`` names, opened for writing (exit 1 if it cannot be)."""
    if args.record is None:
        return None
    try:
        return open(args.record, "wb"), args.record
    except OSError as exc:
        print(f"tracefs-fuse run: --record {args.record}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_show(args: argparse.Namespace) -> int:
    from ..decode import read_lines, render_record

    try:
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
    except OSError as exc:
        print(f"tracefs-fuse show: {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        for record in read_lines(data):
            print(render_record(record))
    except msgspec.DecodeError as exc:
        print(f"tracefs-fuse show: {args.file}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # "| head" has seen enough; keep the interpreter's exit flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
