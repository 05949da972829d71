"""The daemon's own accesses to client memory never wait on its own mount (issue 11, item 1).

A client points an address the daemon reads or writes (a name, a struct, an
enable word) at a page of a mapping of one of the mount's own files that
nobody has touched. The daemon's access faults; the fault is a FUSE read sent
to the daemon itself. Before the receiver thread (``fuse/_native/receiver.c``)
the one thread reading ``/dev/fuse`` was the one blocked in that access: the
daemon sat in D state and every client with it, until the daemon was killed.
Now the receiver answers such a read EIO at once, the access fails, and the
client gets EFAULT (the kernel would have read the mapped page: see
docs/emulation.md).

Each test runs ``tests/clients/fault_mem.c`` against a real mount with a bound
on every step; a step that does not finish in time kills the daemon (the only
way to free a client stuck in a FUSE request) and fails. A reader running
alongside proves the daemon kept serving everyone else.

Text files (``README``) are mapped too (``FUSE_DIRECT_IO_ALLOW_MMAP`` allows
it) but cannot hang even without the receiver: they report size 0, and a
fault past ``i_size`` fails in ``filemap_fault`` without a FUSE request.
"""

from __future__ import annotations

import select
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.adversarial.fault_abort import abort, connection
from tests.integration.conftest import Mount, start_mount, stop_mount

pytestmark = [pytest.mark.uses_fuse, pytest.mark.slow]

#: Every step ends in milliseconds; this bound only catches a hang.
STEP_TIMEOUT_S = 10.0
RAW = "per_cpu/cpu0/trace_pipe_raw"
STATUS = "user_events_status"
TEXT = "README"
CClient = Callable[[str], Path]


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Mount]:
    mnt = start_mount(tmp_path / "tracing", tmp_path / "daemon.log")
    _connections[mnt.path] = connection(mnt.path)
    try:
        yield mnt
    finally:
        if mnt.proc.poll() is None:
            stop_mount(mnt)
        else:  # killed by a bound: just clean up
            subprocess.run(["fusermount3", "-u", "-z", str(mnt.path)], check=False)


#: Connection id of each mount, by mountpoint (see fault_abort).
_connections: dict[Path, int] = {}


def _hung(mount: Mount, what: str, client: subprocess.Popen[str]) -> AssertionError:
    abort(_connections[mount.path])
    mount.proc.kill()
    mount.proc.wait()
    client.kill()
    client.communicate()
    return AssertionError(f"{what} did not finish in {STEP_TIMEOUT_S} s: the daemon hung")


def run_bounded(mount: Mount, argv: list[str], input: str | None = None) -> str:
    client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        out, err = client.communicate(input, timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise _hung(mount, " ".join(argv), client) from None
    assert client.returncode == 0, err
    return out


class Interactive:
    """A client that prints lines and waits for ours, every step bounded."""

    def __init__(self, mount: Mount, argv: list[str]) -> None:
        self.mount = mount
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)

    def line(self) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], STEP_TIMEOUT_S)
        if not ready:
            raise _hung(self.mount, " ".join(self.argv), self.proc)
        return self.proc.stdout.readline().strip()

    def finish(self) -> list[str]:
        try:
            out, _ = self.proc.communicate("go\n", timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise _hung(self.mount, " ".join(self.argv), self.proc) from None
        assert self.proc.returncode == 0
        return out.splitlines()


class Bystander:
    """Another client reading a file in a loop while the fault happens."""

    READS = 200

    def __init__(self, mount: Mount) -> None:
        self.mount = mount
        path = mount / "tracing_on"
        self.proc = subprocess.Popen(
            ["sh", "-c", f'i=0; while [ $i -lt {self.READS} ]; do read x < "{path}" || exit 1; '
                         'i=$((i+1)); done; echo done'],
            stdout=subprocess.PIPE, text=True)

    def check(self) -> None:
        try:
            out, _ = self.proc.communicate(timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise _hung(self.mount, "a bystander's reads", self.proc) from None
        assert out.strip() == "done"


def still_serving(mount: Mount) -> None:
    assert run_bounded(mount, ["cat", str(mount / "tracing_on")]).strip() == "1"


@pytest.mark.parametrize("mode, expected", [
    ("reg-name", "EFAULT"),       # strndup_user of the name
    ("reg-struct", "EFAULT"),     # copy_struct_from_user of struct user_reg
    ("reg-enable", "ENOMEM"),     # the enable bit's first write (kernel: ENOMEM too)
    ("reg-5.18", "EFAULT"),       # the 5.18 struct
    ("reg-6.1", "EFAULT"),        # the 6.1 struct
    ("del-name", "EFAULT"),       # DIAG_IOCSDEL's name
    ("unreg-struct", "EFAULT"),   # struct user_unreg
])
@pytest.mark.parametrize("file", [RAW, STATUS, TEXT])
def test_fault_ioctl_argument_in_own_mapping(mount: Mount, c_client: CClient, mode: str,
                                             expected: str, file: str) -> None:
    bystander = Bystander(mount)
    out = run_bounded(mount, [str(c_client("fault_mem")), mode, str(mount), file])
    assert out == f"{mode} rc=-1 errno={expected}\n"
    bystander.check()
    still_serving(mount)


@pytest.mark.parametrize("file", [RAW, STATUS])
def test_fault_enable_word_mapped_over_then_enabled(mount: Mount, c_client: CClient,
                                                    file: str) -> None:
    """Register, map the file over the enable word, then ``echo 1 > enable``."""
    client = Interactive(mount, [str(c_client("fault_mem")), "remap", str(mount), file,
                                 "fault_remap u32 a"])
    assert client.line() == "reg rc=0 errno=0"
    assert client.line() == "ready"
    enable = mount / "events/user_events/fault_remap/enable"
    bystander = Bystander(mount)
    # The write succeeds: the kernel, too, keeps an enabler whose bit cannot
    # be written (and retries it from a work item).
    run_bounded(mount, ["sh", "-c", f'echo 1 > "{enable}"'])
    run_bounded(mount, ["sh", "-c", f'echo 0 > "{enable}"'])
    bystander.check()
    # DIAG_IOCSUNREG clears the bit "regardless": it cannot, EFAULT.
    assert client.finish() == ["unreg rc=-1 errno=EFAULT"]
    still_serving(mount)


def test_fault_enable_word_of_forked_child(mount: Mount, c_client: CClient) -> None:
    """After a fork the daemon writes the child's enable bits: into the mapping."""
    client = Interactive(mount, [str(c_client("fault_mem")), "fork", str(mount), RAW,
                                 "fault_fork u32 a"])
    assert client.line() == "reg rc=0 errno=0"
    assert client.line().startswith("forked ")
    enable = mount / "events/user_events/fault_fork/enable"
    bystander = Bystander(mount)
    # The fork event and an enable both make the daemon write the child's bit.
    run_bounded(mount, ["sh", "-c", f'echo 1 > "{enable}"; echo 0 > "{enable}"'])
    bystander.check()
    assert client.finish() == ["unreg rc=-1 errno=EFAULT"]
    still_serving(mount)
    log = mount.log_text()
    assert "Traceback" not in log, log


def test_fault_reads_are_refused_only_for_the_daemon(mount: Mount) -> None:
    """A client's own fault on such a mapping is served as usual."""
    page = run_bounded(mount, [
        "python3", "-c",
        "import mmap, sys; f = open(sys.argv[1], 'rb'); "
        "m = mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ); print(len(m[:4096]))",
        str(mount / STATUS)])
    assert page.strip() == "4096"
