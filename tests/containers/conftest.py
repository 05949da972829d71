"""Real podman containers from Debian's packages, for ``make container-test``.

No image registry is needed: mmdebstrap builds a Debian 12 root filesystem from the machine's
own apt sources (what ``debian:12`` is: the minbase variant), podman imports it as the base
image, and the image is built from it with ``mountscripts/Containerfile``, the recipe users
build, from this working tree. ``Containerfile.clients`` adds the C clients and trace-cmd. The
tests run that image rootful, rootful with the command as an unprivileged user (the GitHub
Actions container job of mountscripts/github-actions.yml), and rootless as an ordinary user
created for the purpose.

Rules:
  * Cached between runs under ``~/.cache/tracefs-fuse-containers`` (``TRACEFS_FUSE_CONTAINERS_
    CACHE`` moves it): the root filesystem, as ``base-<key>.tar`` where the key hashes the
    suite, variant and package list; and the rootful podman storage, whose build layers make a
    rebuild after a source change redo only the project's own layers. One session at a time
    (a lock file).
  * Nothing is left behind: containers run with ``--rm``; the rootful storage's own bind mount
    is undone at the end; the rootless user, its storage and its processes (podman's pause
    process included) go with the session; device modes are restored.
  * Flags these VMs need and users do not are apart (:data:`VM_FLAGS`, :data:`RUN_VM_FLAGS`);
    docs/containers.md says why.
  * Rootful containers get ``--network none``: a network namespace of their own like the
    default bridge, without the bridge interface and firewall rules the default leaves on the
    host. Rootless ones keep their default (slirp4netns), which leaves nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from .. import client_suite
from ..ordinary_user import User, device_modes, ordinary_user

REPO = Path(__file__).parents[2]
CACHE = Path(os.environ.get("TRACEFS_FUSE_CONTAINERS_CACHE",
                            "~/.cache/tracefs-fuse-containers")).expanduser()

#: The root filesystem: Debian 12 as the debian:12 image has it (no extra packages; the
#: Containerfiles install what they need, so a package they forget is a failure here too).
SUITE = "bookworm"
VARIANT = "minbase"
PACKAGES: tuple[str, ...] = ()

#: Host commands the session needs, and the Debian packages that have them.
TOOLS = {"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap", "newuidmap": "uidmap",
         "slirp4netns": "slirp4netns"}

VM_FLAGS = ("--runtime", "runc", "--cgroup-manager", "cgroupfs")
RUN_VM_FLAGS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096")
FUSE_FLAGS = ("--device", "/dev/fuse", "--cap-add", "SYS_ADMIN")

IMAGE = "localhost/tracefs-fuse-test"
#: A TLS-intercepting proxy the host trusts must be trusted by pip in the build's RUN steps
#: too: the host's CA bundle is lent to them beside the image's own (which ca-certificates must
#: be free to rewrite), and pip is pointed at it.
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
LENT_CA_BUNDLE = "/run/tracefs-fuse-test-ca.crt"


def base_key() -> str:
    spec = f"{SUITE}\n{VARIANT}\n" + "\n".join(sorted(PACKAGES))
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


@dataclass
class Podman:
    """One podman storage, rootful or as an ordinary user."""

    root: Path
    runroot: Path
    user: User | None = None
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, *args: str) -> list[str]:
        argv = ["podman", *VM_FLAGS, "--storage-driver", "overlay", "--root", str(self.root),
                "--runroot", str(self.runroot), "--tmpdir", str(self.runroot / "libpod"), *args]
        return argv if self.user is None else self.user.argv(argv)

    def __call__(self, *args: str, check: bool = True, timeout: float = 1800,
                 **kwargs: object) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.argv(*args), capture_output=True, text=True,
                                timeout=timeout, env={**os.environ, **self.env},
                                **kwargs)  # type: ignore[call-overload]
        if check:
            assert result.returncode == 0, (f"podman {' '.join(args[:3])}… failed:\n"
                                            f"{result.stdout[-4000:]}{result.stderr[-4000:]}")
        return result  # type: ignore[no-any-return]

    def run(self, image: str, *command: str, flags: Sequence[str] = FUSE_FLAGS,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return self("run", "--rm", *RUN_VM_FLAGS, *flags, image, *command, check=False,
                    timeout=timeout)


@pytest.fixture(scope="session")
def container_session() -> Iterator[Path]:
    """The cache directory, locked for this session; the host tools checked."""
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        pytest.fail("make container-test needs Debian's " + " ".join(missing)
                    + f" (apt-get install {' '.join(missing)})")
    if os.geteuid() != 0:
        pytest.fail("make container-test runs rootful podman and creates a user: run it as root")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield CACHE


def base_rootfs(cache: Path) -> Path:
    """Debian 12 from Debian's packages, built once per package list."""
    tar = cache / f"base-{base_key()}.tar"
    if not tar.exists():
        partial = cache / f"{tar.name}.partial"
        include = [f"--include={','.join(PACKAGES)}"] if PACKAGES else []
        result = subprocess.run(["mmdebstrap", f"--variant={VARIANT}", "--format=tar", *include,
                                 SUITE, str(partial)], capture_output=True, text=True,
                                timeout=1800)
        assert result.returncode == 0, f"mmdebstrap failed:\n{result.stderr[-4000:]}"
        partial.rename(tar)
    return tar


@pytest.fixture(scope="session")
def rootful(container_session: Path) -> Iterator[Podman]:
    # Podman's database remembers the run directory: a fixed one, emptied after the session.
    runroot = Path("/run/tracefs-fuse-containers")
    podman = Podman(container_session / "storage", runroot)
    try:
        yield podman
    finally:
        leftover = podman("ps", "--all", "--quiet", check=False).stdout.split()
        if leftover:
            podman("rm", "--force", *leftover, check=False)
        # containers/storage's overlay driver bind-mounts its directory onto itself.
        for mountpoint in mounts_under(podman.root):
            subprocess.run(["umount", mountpoint], check=True)
        shutil.rmtree(runroot, ignore_errors=True)  # absent if podman never ran
    assert not leftover, f"containers left running: {leftover}"


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path``, innermost first."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return sorted((p for p in points if Path(p).is_relative_to(path)), reverse=True)


@pytest.fixture(scope="session")
def image(rootful: Podman, container_session: Path) -> str:
    """The test image, built from this working tree (cached layers where nothing changed)."""
    base = f"{IMAGE}:base-{base_key()}"
    if rootful("image", "exists", base, check=False).returncode != 0:
        rootful("import", str(base_rootfs(container_session)), base)
    build = ["build", "--force-rm", "--network", "host", *RUN_VM_FLAGS]
    if os.path.exists(CA_BUNDLE):
        build += ["--volume", f"{CA_BUNDLE}:{LENT_CA_BUNDLE}:ro", "--env",
                  f"PIP_CERT={LENT_CA_BUNDLE}"]
    # Each stage is tagged, so that pruning the previous builds keeps every cached layer.
    project = ["-f", "mountscripts/Containerfile", "--build-arg", f"BASE={base}"]
    rootful(*build, *project, "--target", "build", "-t", f"{IMAGE}:project-build", ".", cwd=REPO)
    rootful(*build, *project, "-t", f"{IMAGE}:project", ".", cwd=REPO)
    clients = ["-f", "tests/containers/Containerfile.clients", "--build-arg", f"BASE={base}",
               "--build-arg", f"IMAGE={IMAGE}:project",
               "--build-arg", f"CLIENTS={' '.join(client_suite.CLIENTS)}"]
    rootful(*build, *clients, "--target", "cc", "-t", f"{IMAGE}:clients-cc", ".", cwd=REPO)
    rootful(*build, *clients, "-t", f"{IMAGE}:clients", ".", cwd=REPO)
    rootful("image", "prune", "--force")
    return f"{IMAGE}:clients"


@pytest.fixture(scope="session")
def rootless(rootful: Podman, image: str) -> Iterator[Podman]:
    """Podman as an ordinary user, ``tfuse-ctr-N``, with the test image loaded."""
    home = Path(tempfile.mkdtemp(prefix="tracefs-fuse-rootless-"))
    try:
        with ordinary_user("ctr", subids=True) as user:  # waits for the user's processes
            os.chown(home, user.uid, user.gid)
            xdg = home / "run"
            xdg.mkdir(mode=0o700)
            os.chown(xdg, user.uid, user.gid)
            podman = Podman(home / "storage", xdg / "containers", user,
                            {"HOME": str(home), "XDG_RUNTIME_DIR": str(xdg), "USER": user.name})
            with device_modes({"/dev/fuse": 0o666, "/dev/net/tun": 0o666}):
                try:
                    load_as(podman, rootful, image)
                    yield podman
                finally:
                    end_pause_process(home)
    finally:
        shutil.rmtree(home)  # its storage too, once nothing of the user runs


def load_as(podman: Podman, rootful: Podman, image: str) -> None:
    """Copy ``image`` from the rootful storage into ``podman``'s (a pipe: nothing on disk)."""
    save = subprocess.Popen(rootful.argv("save", "--quiet", "--format", "docker-archive", image),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert save.stdout is not None
    try:
        podman("load", "--quiet", stdin=save.stdout)
    finally:
        save.stdout.close()
        _, err = save.communicate(timeout=600)
    assert save.returncode == 0, err.decode(errors="replace")


def end_pause_process(home: Path) -> None:
    """Rootless podman keeps a process holding its user namespace: end it and wait."""
    for pidfile in home.rglob("pause.pid"):
        try:
            pidfd = os.pidfd_open(int(pidfile.read_text()))
        except ProcessLookupError:
            continue
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
            select.select([pidfd], [], [], 30)
        finally:
            os.close(pidfd)
