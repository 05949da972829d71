"""The ``tracefs-fuse`` command line.

Owns: argument parsing and the sub-commands (``_main``), the recording options
and ``show`` (``_record``), the Trace Event Format (``_chrome``), the run
server that forks ``tracefs-fuse run`` for the pytest fixture (``_run_server``)
and the pages its forks copy before their requests (``_warm_pages``).
May import: ``daemon``, ``host``, ``decode``, ``lib``, ``engine``, ``testing``
(``show --event`` names events as the fixture does).
"""

from ._main import console as console
from ._main import main as main

__all__ = ["console", "main"]
