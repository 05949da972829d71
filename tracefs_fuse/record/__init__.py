"""Recording events from a daemon's own engine, as JSON Lines (users' toolkit).

Owns: ``_recording`` (the in-process reader behind ``run --record``).
May import: ``engine`` and ``decode`` (public names only).
"""

from ._recording import BATCH_S as BATCH_S
from ._recording import Recording as Recording
from ._recording import RecordSummary as RecordSummary
from ._recording import finish_recording as finish_recording
from ._recording import start_recording as start_recording

__all__ = ["BATCH_S", "RecordSummary", "Recording", "finish_recording", "start_recording"]
