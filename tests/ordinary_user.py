"""An ordinary user for a test, and what it needs to reach; nothing is left behind.

CI runs as root. Where tracefs-fuse must work for a user without sudo, a test creates one with
useradd (``tfuse-<purpose>-<pid>``), runs commands as it through setpriv (its own uid, gid and
groups, and no capabilities: the kernel clears them once no uid is 0), and deletes it.

Rules:
  * The user is deleted however the test ends. Its processes must be gone by then: one still
    running after a grace period is killed (by pid) and fails the test.
  * Device modes changed for a test are restored to what they were. (``/dev/fuse`` and
    ``/dev/net/tun`` are 0600 on some VMs; distributions ship them 0666, and rootless FUSE and
    rootless podman's default network rely on that.)
  * An interpreter or checkout under a directory others cannot enter (``/root`` is 0700) is made
    reachable for the user's commands only: they start in a private mount namespace where a
    tmpfs covers the closed directory and holds bind mounts of just the trees they need. Nothing
    changes on the host, and the user stays in the initial user, pid and network namespaces.
"""

from __future__ import annotations

import os
import pwd
import select
import signal
import stat
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

#: Each user's subordinate ids: what useradd gives by default (login.defs SUB_UID_COUNT).
SUBID_COUNT = 65536


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run as this user, with its groups and no capabilities."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--",
                *argv]


@contextmanager
def ordinary_user(purpose: str, *, subids: bool = False) -> Iterator[User]:
    """A new user ``tfuse-<purpose>-<pid>``; with ``subids``, also subuid/subgid ranges."""
    name = f"tfuse-{purpose}-{os.getpid()}"
    subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", "--user-group", name],
                   check=True, capture_output=True)
    entry = pwd.getpwnam(name)
    user = User(name, entry.pw_uid, entry.pw_gid)
    try:
        if subids:
            _ensure_subids(name)
        yield user
    finally:
        stray = _end_processes(user.uid)
        subprocess.run(["userdel", name], check=True, capture_output=True)  # and its subids
    assert not stray, f"processes of {name} outlived the test: {stray}"


def _ensure_subids(name: str) -> None:
    """Give ``name`` subordinate ids where useradd did not (no SUB_UID_* in login.defs)."""
    for path, option in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        try:
            entries = [line.split(":") for line in Path(path).read_text().splitlines() if line]
        except FileNotFoundError:
            entries = []
        if any(fields[0] == name for fields in entries):
            continue
        start = max([100000, *(int(f[1]) + int(f[2]) for f in entries if len(f) == 3)])
        subprocess.run(["usermod", option, f"{start}-{start + SUBID_COUNT - 1}", name],
                       check=True, capture_output=True)


def _processes(uid: int) -> dict[int, str]:
    """Running processes whose real uid is ``uid``: pid -> command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        real_uid = next(line.split()[1] for line in status.splitlines()
                        if line.startswith("Uid:"))
        if int(real_uid) == uid:
            found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def _end_processes(uid: int, grace: float = 10.0) -> dict[int, str]:
    """Wait up to ``grace`` s for ``uid``'s processes to exit; kill the rest and return them.

    Some exit shortly after the command that started them returned (rootless podman's conmon
    and slirp4netns); they are awaited on pidfds, not polled.
    """
    stray: dict[int, str] = {}
    for pid, cmdline in _processes(uid).items():
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if not select.select([pidfd], [], [], grace)[0]:
                stray[pid] = cmdline
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                select.select([pidfd], [], [], grace)
        finally:
            os.close(pidfd)
    return stray


@contextmanager
def device_modes(modes: dict[str, int]) -> Iterator[None]:
    """Set device node modes for the duration; restore the old ones after."""
    saved = {path: stat.S_IMODE(os.stat(path).st_mode) for path in modes}
    try:
        for path, mode in modes.items():
            os.chmod(path, mode)
        yield
    finally:
        for path, mode in saved.items():
            os.chmod(path, mode)


def _closed_ancestor(path: Path) -> Path | None:
    """The outermost directory above ``path`` that others may not enter, if any."""
    for parent in reversed(path.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def reachable(paths: Iterable[str], stash: Path) -> list[str]:
    """An argv prefix under which every user can reach ``paths`` (empty when they already can).

    Args:
        paths: directories the user's commands need (an interpreter's prefix, a checkout).
        stash: an empty directory others can enter, for the bind mounts on their way in.
    """
    needed = sorted({Path(os.path.realpath(p)) for p in paths})
    needed = [p for p in needed if not any(q in p.parents for q in needed)]
    closed = {p: _closed_ancestor(p) for p in needed}
    covered = sorted({c for c in closed.values() if c is not None})
    if not covered:
        return []
    lines = ["set -e"]
    moves = [p for p in needed if closed[p] is not None]
    for i, path in enumerate(moves):
        (stash / str(i)).mkdir()
        lines.append(f"mount --bind '{path}' '{stash / str(i)}'")
    for directory in covered:
        lines.append(f"mount -t tmpfs -o mode=0755 tracefs-fuse-test '{directory}'")
    for i, path in enumerate(moves):
        lines.append(f"mkdir -p '{path}' && mount --move '{stash / str(i)}' '{path}'")
    lines.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines),
            "sh"]
