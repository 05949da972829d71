"""An ordinary user, created for the session, and a way to run things as them.

Rootless tests run tracefs-fuse where users run it: as a user made with
``useradd`` (``tfuse-cli-<pid>-<n>``), with no capabilities, through ``setpriv``.

``/dev/fuse`` on the test VM has mode 0600, not the usual 0666. Rather than
chmod the host's device (other test sessions share it), each command runs in a
private mount namespace, made as root before dropping to the user, in which a
private node of the same device with mode 0666 (or ``fuse_mode``) is
bind-mounted over ``/dev/fuse``; the host's device is never touched.
``fuse_mode=None`` leaves the host's device as it is.

The command runs the package from this checkout: with this session's Python if
the user may execute it, otherwise with the system Python of the same version
and this checkout and its site-packages on ``PYTHONPATH`` (a pyenv Python under
``/root``, mode 0700, is out of an ordinary user's reach). Either way the
checkout must be readable by every user.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).parents[2]
#: Test modules import the fixture, and each import is a fixture of its own.
_created = itertools.count()

_PRIVATE_FUSE = """\
set -e
dev=$(mktemp -d /tmp/tfuse-cli-dev.XXXXXX)
mount -t tmpfs -o mode=0755 tfuse-cli-dev "$dev"
mknod -m {mode:04o} "$dev/fuse" c {major} {minor}
mount --bind "$dev/fuse" /dev/fuse
umount -l "$dev"
rmdir "$dev"
"""


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None


class OrdinaryUser:
    """A user without privileges, and how to run commands as them."""

    def __init__(self, name: str) -> None:
        entry = pwd.getpwnam(name)
        self.name = name
        self.uid = entry.pw_uid
        self.gid = entry.pw_gid
        self._python: list[str] | None = None

    def argv(self, argv: list[str], *, fuse_mode: int | None = 0o666) -> list[str]:
        """``argv`` as this user, in a private mount namespace (see the module)."""
        script = ""
        if fuse_mode is not None:
            rdev = os.stat("/dev/fuse").st_rdev
            script = _PRIVATE_FUSE.format(mode=fuse_mode, major=os.major(rdev),
                                          minor=os.minor(rdev))
        script += (f"exec setpriv --reuid={self.uid} --regid={self.gid} --clear-groups "
                   f"--inh-caps=-all -- \"$@\"\n")
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
                "sh", *argv]

    def run(self, argv: list[str], *, fuse_mode: int | None = 0o666, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv, fuse_mode=fuse_mode), capture_output=True,
                              text=True, timeout=timeout, env=env, cwd="/")

    def shell(self, script: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """A shell script as this user; ``$TRACEFS_FUSE`` is the command to use."""
        command = shlex.join(self.tracefs_fuse())
        return self.run(["sh", "-c", f"TRACEFS_FUSE={shlex.quote(command)}\n{script}"],
                        **kwargs)  # type: ignore[arg-type]

    def processes(self, timeout: float = 0) -> list[int]:
        """The user's processes, once none is left or ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        while True:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _owner(p) == self.uid]
            if not pids or time.monotonic() >= deadline:
                return pids
            time.sleep(0.05)

    def tracefs_fuse(self) -> list[str]:
        """The ``tracefs-fuse`` command, as this user can run it."""
        if self._python is None:
            self._python = self._find_python()
        return [*self._python, "-m", "tracefs_fuse"]

    def _can_run(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        # From a shell, as users start it: setpriv itself may exec a program
        # below a directory the user may not search.
        return self.run(["sh", "-c", '"$@" -c "import tracefs_fuse.fuse._session"', "sh",
                         *command], fuse_mode=None)

    def _find_python(self) -> list[str]:
        own = self._can_run([sys.executable])
        if own.returncode == 0:
            return [sys.executable]
        system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
        path = f"{ROOT}:{sysconfig.get_paths()['purelib']}"
        command = ["env", f"PYTHONPATH={path}", system]
        check = self._can_run(command)
        if check.returncode != 0:
            pytest.fail(f"{self.name} can run neither {sys.executable} nor {system} with "
                        f"this checkout ({ROOT} must be readable by every user):\n"
                        f"{own.stderr}{check.stderr}")
        return command


@pytest.fixture(scope="session")
def ordinary_user() -> Iterator[OrdinaryUser]:
    """A user created for this session, removed at its end."""
    name = f"tfuse-cli-{os.getpid()}-{next(_created)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], check=True, capture_output=True)
    user = OrdinaryUser(name)
    try:
        yield user
    finally:
        for pid in user.processes(timeout=10):
            os.kill(pid, signal.SIGKILL)  # left behind by a failed test
        subprocess.run(["userdel", name], check=True, capture_output=True)
