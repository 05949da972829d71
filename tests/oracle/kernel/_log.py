"""Progress lines and the one error the oracle raises."""

from __future__ import annotations

import sys
import time

_START = time.monotonic()


class OracleError(Exception):
    """The oracle cannot be built or booted; the message says why and what to do."""


def log(message: str) -> None:
    """One progress line on stderr, with the seconds since the tool started."""
    print(f"[oracle +{time.monotonic() - _START:5.0f}s] {message}", file=sys.stderr, flush=True)
