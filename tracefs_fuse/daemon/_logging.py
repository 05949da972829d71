"""Where the daemon's log goes, and at what level.

Rules:
  * One format everywhere: ``tracefs-fuse[PID] LEVEL logger: message``.
  * ``warning`` (the default) shows what the user should know; ``info`` adds one
    line per refused request (``fuse/_errno.py``); ``debug`` everything of
    ours. libfuse's own dump of every request is separate (``--debug-fuse``).
  * In ``run`` the daemon shares the terminal with the command, so by default
    its lines are held back (:class:`HeldBack`) and written after the command
    has exited: they never interleave with the command's own output.
"""

from __future__ import annotations

import logging
from typing import TextIO

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
