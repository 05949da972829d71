"""The C clients and trace-cmd in real podman containers with default namespaces.

The image is built by ``mountscripts/Containerfile`` (see conftest.py); its entrypoint is
``tracefs-fuse run --``. Each mode runs every section of tests/client_suite.py in one container
and checks every line each client prints:

* ``rootful``: ``podman run --device /dev/fuse --cap-add SYS_ADMIN IMAGE sh -c SCRIPT`` as root:
  the container's own pid, network, mount, ipc and uts namespaces.
* ``rootful-unprivileged``: the same container, the command as uid 1000 and the mount owned by
  it (``tracefs-fuse run --uid 1000 --gid 1000 -- setpriv …``): the container job of
  mountscripts/github-actions.yml, which does not run the user's tests as root.
* ``rootless``: ``podman run --device /dev/fuse IMAGE …`` as an ordinary user: a user namespace
  on top, and no added capability (tracefs-fuse makes a user namespace of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from .. import client_suite
from .conftest import FUSE_FLAGS, Podman

# Building the image cold takes minutes (mmdebstrap, apt, pip), all in the first test's setup.
pytestmark = [pytest.mark.containers, pytest.mark.slow, pytest.mark.timeout(3600)]

TESTER = "1000"

#: What each mode runs. trace-cmd only as root: it creates its event through dynamic_events,
#: which needs CAP_PERFMON (as on the kernel), and libtracefs finds a tracefs only through the
#: real one mounted beneath ours, which a user namespace cannot mount (docs/containers.md).
SECTIONS = {
    "rootful": (*client_suite.CLIENT_SECTIONS, client_suite.TRACE_CMD_SECTION),
    "rootful-unprivileged": client_suite.CLIENT_SECTIONS,
    "rootless": client_suite.CLIENT_SECTIONS,
}
MODE_SECTIONS = [(mode, section) for mode, sections in SECTIONS.items() for section in sections]


@dataclass(frozen=True)
class Outcome:
    printed: dict[str, client_suite.Printed]
    status: int
    log: str


def _run(mode: str, request: pytest.FixtureRequest, image: str) -> Outcome:
    rootful: Podman = request.getfixturevalue("rootful")
    script = client_suite.script(SECTIONS[mode], "/opt/clients")
    own_network = ("--network", "none")
    if mode == "rootful":
        result = rootful.run(image, "sh", "-c", script, flags=(*FUSE_FLAGS, *own_network))
    elif mode == "rootful-unprivileged":
        # The daemon writes enable bits into another user's memory: CAP_SYS_PTRACE.
        result = rootful.run(
            image, "run", "--uid", TESTER, "--gid", TESTER, "--",
            "setpriv", f"--reuid={TESTER}", f"--regid={TESTER}", "--clear-groups",
            "sh", "-c", script,
            flags=(*FUSE_FLAGS, "--cap-add", "SYS_PTRACE", *own_network,
                   "--entrypoint", "tracefs-fuse"))
    else:
        # The documented command: no capability, tracefs-fuse makes its own user namespace.
        rootless: Podman = request.getfixturevalue("rootless")
        result = rootless.run(image, "sh", "-c", script, flags=("--device", "/dev/fuse"))
    return Outcome(client_suite.parse(result.stdout), result.returncode, result.stderr)


@pytest.fixture(scope="session")
def outcome(request: pytest.FixtureRequest, image: str) -> Callable[[str], Outcome]:
    """Each mode's outcome, run once on first use (rootless podman only if asked for)."""
    done: dict[str, Outcome] = {}

    def get(mode: str) -> Outcome:
        if mode not in done:
            done[mode] = _run(mode, request, image)
        return done[mode]

    return get


@pytest.mark.parametrize(("mode", "section"), MODE_SECTIONS,
                         ids=[f"{mode}-{section.name}" for mode, section in MODE_SECTIONS])
def test_client(outcome: Callable[[str], Outcome], mode: str,
                section: client_suite.Section) -> None:
    result = outcome(mode)
    client_suite.check(section, result.printed, result.log)


@pytest.mark.parametrize("mode", SECTIONS)
def test_container_exits_cleanly(outcome: Callable[[str], Outcome], mode: str) -> None:
    result = outcome(mode)
    assert result.status == 0, result.log
    assert client_suite.daemon_errors(result.log) == []


def test_with_tracefs_as_the_entrypoint(rootful: Podman, image: str) -> None:
    result = rootful.run(image, "cat", "/sys/kernel/tracing/user_events_status",
                         flags=(*FUSE_FLAGS, "--network", "none",
                                "--entrypoint", "/opt/tracefs-fuse/mountscripts/with-tracefs"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "\nActive: 0\nBusy: 0\n"


def test_without_dev_fuse_one_line_says_so(rootful: Podman, image: str) -> None:
    """docs/containers.md: without ``--device /dev/fuse`` the user is told, in one line."""
    result = rootful.run(image, "true", flags=("--cap-add", "SYS_ADMIN", "--network", "none"))
    assert result.returncode != 0
    assert "/dev/fuse" in result.stderr and len(result.stderr.strip().splitlines()) == 1, \
        result.stderr
