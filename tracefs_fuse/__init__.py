"""tracefs-fuse: a user-space tracefs for Linux user_events, served over FUSE.

Command line: ``tracefs-fuse`` (:mod:`tracefs_fuse.cli`). In-process: run
:func:`serve` in a trio nursery to mount a tracefs and get the daemon, whose
``tracefs`` engine the synthetic-event API (:mod:`tracefs_fuse.synth`) drives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .config import MountConfig

if TYPE_CHECKING:
    from .fuse._daemon import Daemon

__version__ = "0.1.0"
__all__ = ["MountConfig", "serve"]


async def serve(config: MountConfig, *,
                task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
    """Mount a tracefs and serve it until cancelled or unmounted.

    Use as ``daemon = await nursery.start(tracefs_fuse.serve, config)``; then
    ``daemon.tracefs`` is the engine and ``daemon.engine_changed()`` must be
    called after changing it outside a FUSE request.

    Raises:
        tracefs_fuse.fuse._session.BridgeInactiveError: the FUSE bridge is not
            in the request path (for example, pyfuse3 was imported first).
    """
    # Imported here: loading the FUSE adapter loads the native bridge, which
    # must happen before anything imports pyfuse3 (fuse/_session.py).
    from .fuse._daemon import Daemon

    await Daemon(config).run(stop_on_signals=False, task_status=task_status)
