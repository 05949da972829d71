"""The command line of recordings: ``--events``, ``run --record`` and ``show``.

* ``mount --events GLOB`` and ``run --events GLOB``: enable matching user
  events the moment they are registered (repeatable; ``set_event`` words with
  globs, ``!`` to exclude).
* ``run --record FILE [--events GLOB ...] -- CMD``: record what CMD emits as
  JSON Lines; ``--events`` defaults to ``user_events:*`` there.
* ``run --record - -- CMD``: the JSON Lines go to standard output.
* ``show FILE``: a recording, one line per event; ``-`` reads stdin and shows
  each event as its line arrives, ``--follow`` follows a growing FILE,
  ``--event GLOB`` keeps the events GLOB names (as the pytest fixture names
  them), ``--format chrome`` writes the Trace Event Format (``_chrome.py``).
  A trace-cmd ``trace.dat`` is pointed at ``trace-cmd report``.

Rules: these are hooks :mod:`tracefs_fuse.cli` calls, one per place; errors
in the user's input exit 2 without a traceback, like the rest of the CLI.
The decoder (``decode``, ``eventheader``) is imported by ``show`` alone: a
``run`` imports this module for its options (issue 21: 15-30 ms of start-up).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator

import msgspec

from ..lib import check, libc

if TYPE_CHECKING:
    from ..decode import Record

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
                        help="write the events CMD emits to FILE as JSON Lines ('-': standard "
                             "output, shared with CMD's own), and a summary line to stderr "
                             "(default: no recording)")


SHOW_DESCRIPTION = """\
Print a recording (tracefs-fuse run --record FILE), one line per event, as
the kernel's trace file starts its lines, then the event's fields.

FILE '-' reads standard input and prints each event as its line arrives
(tracefs-fuse run --record - -- CMD | tracefs-fuse show -); --follow keeps
showing events as FILE grows, as tail -f does. --format chrome writes the
Trace Event Format instead, which Perfetto (ui.perfetto.dev) and
chrome://tracing open (docs/testing-your-events.md).

A trace-cmd recording (trace.dat) is read by trace-cmd report, not here.
"""

#: How a trace-cmd recording (trace.dat) starts: trace-cmd.dat(5).
TRACE_DAT_MAGIC = b"\x17\x08\x44tracing"


def add_show(sub: Any) -> None:
    show = sub.add_parser("show", help="print a recording (run --record FILE) for people",
                          description=SHOW_DESCRIPTION,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("file", metavar="FILE",
                      help="a JSON Lines recording ('-': standard input, shown as it arrives)")
    show.add_argument("--follow", "-f", action="store_true",
                      help="keep showing events as FILE grows, until interrupted (default: "
                           "stop at its end)")
    show.add_argument("--event", action="append", dest="event_globs", metavar="GLOB",
                      help="only events GLOB names: system:name, the tracepoint name, or an "
                           "EventHeader event's EventName or Provider:EventName (repeatable) "
                           "(default: every event)")
    show.add_argument("--format", choices=("text", "chrome"), default="text",
                      help="text for people, or chrome: the Trace Event Format JSON that "
                           "Perfetto and chrome://tracing open (default: %(default)s)")
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
    if args.record == "-":
        return os.fdopen(os.dup(sys.stdout.fileno()), "wb"), "standard output"
    try:
        return open(args.record, "wb"), args.record
    except OSError as exc:
        print(f"tracefs-fuse run: --record {args.record}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(1) from None


class _NotJsonLines(Exception):
    """What ``show`` was given is not a recording of ours."""


_IN_MODIFY = 0x2


def _follow(path: str) -> Iterator[bytes]:
    """The lines of ``path``, then those written to it later, forever."""
    inotify = check(libc.inotify_init1(os.O_CLOEXEC), "inotify_init1")
    try:
        check(libc.inotify_add_watch(inotify, os.fsencode(path), _IN_MODIFY), "inotify_add_watch")
        # Watched before the first read: nothing written in between is missed.
        with open(path, "rb", buffering=0) as f:
            partial = b""
            while True:
                data = f.read(1 << 16)
                if not data:
                    os.read(inotify, 4096)  # wait for more
                    continue
                *lines, partial = (partial + data).split(b"\n")
                yield from lines
    finally:
        os.close(inotify)


def _lines(args: argparse.Namespace) -> Iterator[bytes]:
    """The lines to show, as they come (standard input and --follow: as they arrive)."""
    if args.file == "-":
        yield from sys.stdin.buffer
    elif args.follow:
        yield from _follow(args.file)
    else:
        with open(args.file, "rb") as f:
            yield from f.read().splitlines()


def _records(lines: Iterable[bytes], globs: list[str] | None) -> Iterator[Record]:
    from ..decode import Lost, read_lines
    from ..testing import name_matches  # for show alone: run need not import it

    for number, line in enumerate(lines, 1):
        if number == 1 and line.startswith(TRACE_DAT_MAGIC):
            raise _NotJsonLines("a trace-cmd recording (trace.dat), not JSON Lines: "
                                "read it with trace-cmd report")
        try:
            records = list(read_lines(line))
        except msgspec.DecodeError as exc:
            raise _NotJsonLines(f"line {number}: {str(exc).removeprefix('line 1: ')}") from None
        for record in records:
            if (globs is None or isinstance(record, Lost)
                    or any(name_matches(record, glob) for glob in globs)):
                yield record


def cmd_show(args: argparse.Namespace) -> int:
    if args.follow and (args.file == "-" or args.format == "chrome"):
        args.parser.error("argument --follow: not with FILE '-' (it streams already) or "
                          "--format chrome (one JSON object, written at the end)")
    from ..decode import render_record
    from ._chrome import chrome_trace

    streaming = args.file == "-" or args.follow
    try:
        records = _records(_lines(args), args.event_globs)
        if args.format == "chrome":
            sys.stdout.buffer.write(msgspec.json.encode(chrome_trace(records)) + b"\n")
        else:
            for record in records:
                print(render_record(record), flush=streaming)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            # "| head" has seen enough; keep the interpreter's exit flush quiet.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        print(f"tracefs-fuse show: {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    except _NotJsonLines as exc:
        print(f"tracefs-fuse show: {args.file}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the end of --follow, or of a stream
        return 130
    return 0
