"""The pytest plugin: a ``user_events`` fixture for testing instrumented programs.

Installed with the package and registered through the ``pytest11`` entry
point, so a test only names the fixture::

    def test_hello_greets_the_world(user_events):
        run = user_events.run(["./hello", "world"])
        run.events.assert_event("hello", who="world", times=1)

Each :meth:`UserEvents.run` or :meth:`UserEvents.start` gets a tracefs of its
own at ``/sys/kernel/tracing``, seen by the program alone (``tracefs-fuse
run``), with user events enabled as the program registers them. Commands a
test started and left running are stopped when it ends. See
:mod:`tracefs_fuse.testing` for the objects it returns, and
docs/testing-your-events.md for a walk-through.

Where tracefs-fuse cannot start (no ``/dev/fuse``, user namespaces refused),
a test fails with :class:`~tracefs_fuse.testing.TracefsFuseUnavailable`, whose
first line says why. On machines where that is expected, opt in to skipping
such tests instead, with the reason shown in pytest's summary (``-rs``): the
command-line flag ``--user-events-skip-unavailable`` or the ini option
``user_events_skip_unavailable = true``.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Generator, Iterator, Sequence

import pytest

from ._forks import RunServer
from ._run import DEFAULT_EVENTS, Command, Run, Running, TracefsFuseUnavailable, start

#: The opt-in to skip, not fail, where tracefs-fuse cannot start.
SKIP_OPTION = "--user-events-skip-unavailable"
SKIP_INI = "user_events_skip_unavailable"


def pytest_addoption(parser: pytest.Parser) -> None:
    help = ("skip, not fail, a test whose user_events fixture finds that tracefs-fuse "
            "cannot start here (no FUSE, ...); the reason shows in the summary")
    parser.getgroup("tracefs-fuse").addoption(SKIP_OPTION, action="store_true", help=help)
    parser.addini(SKIP_INI, help=help, type="bool", default=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    except TracefsFuseUnavailable as exc:
        if item.config.getoption(SKIP_OPTION) or item.config.getini(SKIP_INI):
            # Reported at the test, as a skip marker's are (not at this line).
            raise pytest.skip.Exception(f"tracefs-fuse could not start: {exc.reason}",
                                        _use_item_location=True) from None
        raise


class UserEvents:
    """What the ``user_events`` fixture gives a test.

    Attributes:
        events: what :meth:`run` and :meth:`start` enable unless told
            otherwise (``set_event`` words with globs).
        options: more ``tracefs-fuse run`` options for every command.
    """

    def __init__(self, workdir: Path, server: RunServer | None = None) -> None:
        self.workdir = workdir
        self._server = server
        self.events: Sequence[str] = DEFAULT_EVENTS
        self.options: Sequence[str] = ()
        self._running: list[Running] = []
        self._numbers = itertools.count(1)

    def start(self, command: Command, *, events: Sequence[str] | None = None,
              options: Sequence[str] = (), env: dict[str, str] | None = None,
              cwd: str | os.PathLike[str] | None = None) -> Running:
        """Start ``command`` (argv or a module-level callable) in the
        background; wait on it with ``wait_for``, end it with ``stop``."""
        running = start(command, events=self.events if events is None else events,
                        options=[*self.options, *options], env=env, cwd=cwd,
                        workdir=self.workdir / f"run-{next(self._numbers)}",
                        server=self._server)
        self._running.append(running)
        return running

    def run(self, command: Command, *, events: Sequence[str] | None = None,
            options: Sequence[str] = (), env: dict[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None, timeout: float = 60.0,
            check: bool = True) -> Run:
        """Run ``command`` to its end and return its :class:`~tracefs_fuse.testing.Run`
        (``.events``, ``.returncode``, ``.stdout``, ``.stderr``, a callable's
        ``.result``); with ``check``, a non-zero exit fails the test."""
        __tracebackhide__ = True
        running = self.start(command, events=events, options=options, env=env, cwd=cwd)
        try:
            return running.wait(timeout, check=check)
        finally:
            if running.process.poll() is None:
                running.stop()

    def close(self) -> None:
        for running in self._running:
            try:
                running.stop()
            except TracefsFuseUnavailable:
                pass  # the test saw it, if it waited for anything


@pytest.fixture(scope="session")
def user_events_server() -> Iterator[RunServer]:
    """The session's (each xdist worker's) server of runs: it forks each
    ``tracefs-fuse run`` of the ``user_events`` fixture, ready imported."""
    server = RunServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def user_events(tmp_path: Path, user_events_server: RunServer) -> Iterator[UserEvents]:
    """Run programs under a private, recording tracefs; see :class:`UserEvents`."""
    session = UserEvents(tmp_path / "user_events", user_events_server)
    try:
        yield session
    finally:
        session.close()
