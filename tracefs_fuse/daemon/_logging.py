"""Where the daemon's log goes, and at what level.

Rules:
  * One format everywhere: ``tracefs-fuse[PID] LEVEL logger: message``.
  * ``warning`` (the default) shows what the user should know; ``info`` adds one
    line per refused request (``fuse/_errno.py``); ``debug`` everything of
    ours. libfuse's own dump of every request is separate (``--debug-fuse``).
  * In ``run`` the daemon shares the terminal with the command, so by default
    its lines are held back (:class:`HeldBack`) and written after the command
    has exited: they never interleave with the command's own output.
  * A bug (an exception that is not a failure the machine or the mount
    explains: :func:`is_bug`) is said in one line naming the file its
    traceback was written to (:func:`bug_line`), whatever the log level.
"""

from __future__ import annotations

import logging
import os
import traceback
from typing import TextIO

from ..host._environment import EnvironmentProblem, one_line

#: What a machine or a mount that cannot be served raises (pyfuse3 and the
#: bridge's live check raise RuntimeError); anything else escaping is a bug.
FAILURES = (EnvironmentProblem, OSError, RuntimeError)

FORMAT = "tracefs-fuse[%(process)d] %(levelname)s %(name)s: %(message)s"


def setup(level: str, handler: logging.Handler) -> None:
    """Send every ``tracefs_fuse`` (and pyfuse3) log line at ``level`` or above to ``handler``."""
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


class HeldBack(logging.Handler):
    """Keeps log lines (up to :attr:`LIMIT`) until :meth:`write_to` is called."""

    LIMIT = 1000

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) < self.LIMIT:
            self.lines.append(self.format(record))
        else:
            self.dropped += 1

    def write_to(self, stream: TextIO) -> None:
        for line in self.lines:
            print(line, file=stream)
        if self.dropped:
            print(f"tracefs-fuse: {self.dropped} more log lines dropped "
                  f"(run --log FILE keeps them all)", file=stream)
        self.lines.clear()
        self.dropped = 0


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def is_bug(exc: BaseException) -> bool:
    """Whether ``exc`` (or a member of trio's exception groups) is a bug of ours."""
    return any(not isinstance(leaf, FAILURES) for leaf in _leaves(exc))


def bug_line(exc: BaseException) -> str:
    """Write ``exc``'s traceback to a file; the one line that says where."""
    leaf = next(leaf for leaf in _leaves(exc) if not isinstance(leaf, FAILURES))
    what = f"a bug in tracefs-fuse: {type(leaf).__name__}: {one_line(leaf)}"
    import tempfile  # a bug's path only

    try:
        fd, path = tempfile.mkstemp(prefix=f"tracefs-fuse-{os.getpid()}-", suffix=".traceback")
        with os.fdopen(fd, "w") as f:
            traceback.print_exception(exc, file=f)
    except OSError as error:
        return f"{what} (its traceback could not be written: {one_line(error)})"
    return f"{what} (traceback in {path})"
