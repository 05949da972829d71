"""Ordinary users for tests, and how to run things as them; nothing is left behind.

CI runs as root. Where tracefs-fuse must work for a user without sudo, a test creates one with
useradd (``tfuse-<purpose>-<pid>[-n]``), runs commands as it through setpriv (its uid, gid and
groups, no capabilities: the kernel clears them once no uid is 0), and deletes it.

Rules:
  * The user is deleted however the test ends. Its processes must be gone by then: one still
    running after a grace period is killed (by pid) and fails the test.
  * The host is never changed for a user's command: it starts in a private mount namespace
    (made as root, before dropping to the user) where
      - with ``fuse_mode``, ``/dev/fuse`` is a private node of the same device with that mode
        (this VM's is 0600; distributions ship 0666, which rootless FUSE relies on);
      - a directory others cannot enter on the way to this session's interpreter or checkout
        (``/root`` is 0700, and pyenv lives there) is covered by a tmpfs holding bind mounts of
        just those trees, so the user runs the very same interpreter.
    The user stays in the initial user, pid and network namespaces.
  * :func:`device_modes` changes host device modes for what cannot run in such a namespace
    (rootless podman's helpers), and restores them.
"""

from __future__ import annotations

import itertools
import os
import pwd
import select
import shlex
import signal
import stat
import subprocess
import sys
import sysconfig
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

#: Each user's subordinate ids: what useradd gives by default (login.defs SUB_UID_COUNT).
SUBID_COUNT = 65536
ROOT = Path(__file__).parents[1]
_created = itertools.count()


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    @property
    def groups(self) -> tuple[int, ...]:
        return tuple(os.getgrouplist(self.name, self.gid))

    def argv(self, argv: Sequence[str], *, fuse_mode: int | None = None) -> list[str]:
        """``argv`` as this user, in a private mount namespace (see the module)."""
        lines = ["set -e", "stash=$(mktemp -d /tmp/tfuse-user.XXXXXX)",
                 'mount -t tmpfs -o mode=0755 tfuse-user "$stash"']
        if fuse_mode is not None:
            rdev = os.stat("/dev/fuse").st_rdev
            lines += [f'mknod -m {fuse_mode:04o} "$stash/fuse" c {os.major(rdev)} '
                      f'{os.minor(rdev)}', 'mount --bind "$stash/fuse" /dev/fuse']
        lines += _reach_lines(_session_trees())
        lines += ['umount -l "$stash"', 'rmdir "$stash"',
                  f'exec setpriv --reuid={self.uid} --regid={self.gid} --init-groups '
                  '--inh-caps=-all -- "$@"']
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                "\n".join(lines), "sh", *argv]

    def run(self, argv: Sequence[str], *, fuse_mode: int | None = 0o666, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv, fuse_mode=fuse_mode), capture_output=True,
                              text=True, timeout=timeout, env=env, cwd="/")

    def shell(self, script: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """A shell script as this user; ``$TRACEFS_FUSE`` is the command to use."""
        command = shlex.join(self.tracefs_fuse())
        return self.run(["sh", "-c", f"TRACEFS_FUSE={shlex.quote(command)}\n{script}"],
                        **kwargs)  # type: ignore[arg-type]

    def tracefs_fuse(self) -> list[str]:
        """The ``tracefs-fuse`` command of this session, as the user runs it."""
        return [sys.executable, "-m", "tracefs_fuse"]

    def processes(self) -> dict[int, str]:
        """The user's running processes: pid -> command line."""
        return _processes(self.uid)


@contextmanager
def ordinary_user(purpose: str, *, group: str | None = None,
                  subids: bool = False) -> Iterator[User]:
    """A new user ``tfuse-<purpose>-<pid>-<n>`` (in ``group`` if given, else its own);
    with ``subids``, also subuid/subgid ranges."""
    name = f"tfuse-{purpose}-{os.getpid()}-{next(_created)}"
    groups = ["--gid", group, "--no-user-group"] if group else ["--user-group"]
    subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", *groups, name],
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
    and slirp4netns, a background daemon after its unmount); they are awaited on pidfds.
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


def wait_for_no_processes(user: User, timeout: float) -> list[int]:
    """The user's processes still running after ``timeout`` seconds (awaited on pidfds)."""
    left = []
    for pid in user.processes():
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if not select.select([pidfd], [], [], timeout)[0]:
                left.append(pid)
        finally:
            os.close(pidfd)
    return left


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


def _session_trees() -> list[str]:
    """What a user's command needs of this session: the interpreter, the venv, the checkout."""
    return [sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"], str(ROOT)]


def _closed_ancestor(path: Path) -> Path | None:
    """The outermost directory above ``path`` that others may not enter, if any."""
    for parent in reversed(path.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def _opened(path: Path) -> list[Path]:
    """``path``, or its entries if others may not enter it (a checkout in ``mktemp -d``):
    those are then reached through a tmpfs over ``path`` like any closed directory's."""
    if path.is_dir() and not os.stat(path).st_mode & stat.S_IXOTH:
        return sorted(path.iterdir())
    return [path]


def _reach_lines(paths: Iterable[str]) -> list[str]:
    """Shell lines (with ``$stash``, an enterable tmpfs) that cover each closed directory on
    the way to ``paths`` with a tmpfs holding bind mounts of just those paths."""
    needed = sorted({Path(os.path.realpath(p)) for p in paths})
    needed = [p for p in needed if not any(q in p.parents for q in needed)]
    needed = [entry for p in needed for entry in _opened(p)]
    closed = {p: _closed_ancestor(p) for p in needed}
    moves = [p for p in needed if closed[p] is not None]
    # A bind mount's mount point is a directory for a directory, a file for a file.
    make = {p: "mkdir -p" if p.is_dir() else "touch" for p in moves}
    lines = []
    for i, path in enumerate(moves):
        lines += [f'{make[path]} "$stash/{i}"',
                  f'mount --bind {shlex.quote(str(path))} "$stash/{i}"']
    for directory in sorted({c for c in closed.values() if c is not None}):
        lines.append(f"mount -t tmpfs -o mode=0755 tfuse-user {shlex.quote(str(directory))}")
    for i, path in enumerate(moves):
        quoted = shlex.quote(str(path))
        lines += [f"mkdir -p {shlex.quote(str(path.parent))}", f"{make[path]} {quoted}",
                  f'mount --move "$stash/{i}" {quoted}']
    return lines
