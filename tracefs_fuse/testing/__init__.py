"""Testing one's instrumentation: run a command under tracefs-fuse, assert its events.

Owns: ``_run`` (``run``, ``start`` and the objects they return), the pytest
plugin (``pytest_plugin``: the ``user_events`` fixture), ``_call`` (the child
that runs a Python callable) and ``_forks`` (the fixture's run server: its
protocol and the test's side of it).
May import: ``decode`` (public names only), ``lib``. It starts ``tracefs-fuse
run`` (or the run server, ``cli/_run_server.py``) as a command, never the
daemon's modules.
"""

from ._run import DEFAULT_EVENTS as DEFAULT_EVENTS
from ._run import Command as Command
from ._run import EventList as EventList
from ._run import Run as Run
from ._run import RunFailed as RunFailed
from ._run import Running as Running
from ._run import TracefsFuseUnavailable as TracefsFuseUnavailable
from ._run import name_matches as name_matches
from ._run import run as run
from ._run import start as start

__all__ = ["DEFAULT_EVENTS", "Command", "EventList", "Run", "RunFailed", "Running",
           "TracefsFuseUnavailable", "name_matches", "run", "start"]
