"""tracefs-fuse: a user-space tracefs for Linux user_events, served over FUSE.

Command line: ``tracefs-fuse`` (:mod:`tracefs_fuse.cli`). In-process: run
:func:`serve` in a trio nursery to mount a tracefs and get the daemon, whose
``tracefs`` engine the synthetic-event API (:mod:`tracefs_fuse.synth`) drives.

Events as data: :mod:`tracefs_fuse.decode` (trace records into msgspec
Structs), :mod:`tracefs_fuse.eventheader`, and for tests
:mod:`tracefs_fuse.testing` and the ``user_events`` pytest fixture.

The folders are the architecture (docs/architecture.md has the map; each
folder's docstring says what it owns and may import, and tests/test_layers.py
holds them to it): ``engine`` at the bottom, ``lib``, ``process``, ``host``,
``fuse``, then ``daemon`` and ``cli``; the users' toolkit (``decode``,
``eventheader``, ``record``, ``testing``, ``synth``) beside them.

Importing this package is cheap and pure: :func:`serve` (which loads trio, the
native FUSE bridge and pyfuse3, in that order) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .daemon._config import MountConfig

if TYPE_CHECKING:  # what type checkers see of the lazy names (py.typed)
    from .daemon._serve import serve as serve
    from .fuse._session import BridgeInactiveError as BridgeInactiveError

__version__ = "0.1.0"
__all__ = ["BridgeInactiveError", "MountConfig", "serve"]


def __getattr__(name: str) -> Any:
    if name == "serve":
        from .daemon._serve import serve

        return serve
    if name == "BridgeInactiveError":
        from .fuse._session import BridgeInactiveError

        return BridgeInactiveError
    raise AttributeError(name)
