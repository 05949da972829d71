"""The ``tracefs-fuse`` command line.

Owns: argument parsing and the sub-commands (``_main``), the recording options
and ``show`` (``_record``).
May import: ``daemon``, ``host``, ``decode``, ``lib``, ``engine``.
"""

from ._main import main as main

__all__ = ["main"]
