"""In-process serving: mount a tracefs from inside a trio program."""

from __future__ import annotations

import trio

from ._config import MountConfig
from ._daemon import Daemon


async def serve(config: MountConfig, *,
                task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
    """Mount a tracefs and serve it until cancelled or unmounted.

    Use as ``daemon = await nursery.start(tracefs_fuse.serve, config)``; then
    ``daemon.tracefs`` is the engine and ``daemon.engine_changed()`` must be
    called after changing it outside a FUSE request.

    Raises:
        tracefs_fuse.BridgeInactiveError: the FUSE bridge is not in the
            request path (for example, pyfuse3 was imported first).
    """
    await Daemon(config).run(stop_on_signals=False, task_status=task_status)
