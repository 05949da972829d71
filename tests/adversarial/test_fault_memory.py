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

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.adversarial.fault_abort import FUSECTL, abort, connection
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
    """A client that prints lines and waits for ours, every step bounded.

    Its output is read unbuffered, lines kept here: two lines the client
    printed back to back arrive in one read, and a select() on the pipe for
    the second would wait for output that already came (a buffered reader
    hid it, and a loaded machine made that a "hang").
    """

    def __init__(self, mount: Mount, argv: list[str]) -> None:
        self.mount = mount
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     bufsize=0)
        self.pending = b""

    def line(self) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], STEP_TIMEOUT_S)
            if not ready:
                raise _hung(self.mount, " ".join(self.argv), self.proc)
            chunk = os.read(fd, 4096)
            if not chunk:
                break  # the client exited: what it left, then ""
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode().strip()

    def finish(self) -> list[str]:
        try:
            out, _ = self.proc.communicate(b"go\n", timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise _hung(self.mount, " ".join(self.argv), self.proc) from None
        assert self.proc.returncode == 0
        return (self.pending + out).decode().splitlines()


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


def _until(what: str, done: Callable[[], bool]) -> None:
    """Poll ``done`` (kernel state with no event to wait on), bounded."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {STEP_TIMEOUT_S} s"
        time.sleep(0.001)


def _stat_fields(task: Path) -> list[str]:
    """A task's ``stat`` from field 3 (state) on; the comm may hold ``)``."""
    return (task / "stat").read_text().rsplit(")", 1)[1].split()


def _stopped(pid: int) -> bool:
    """Every thread of ``pid`` is in group stop (state T)."""
    return all(_stat_fields(task)[0] == "T" for task in Path(f"/proc/{pid}/task").iterdir())


def _stop_and_send(mount: Mount, clients: list[Interactive]) -> None:
    """With the daemon stopped, release each client in turn and let its
    request queue in the kernel (FIFO) before the next; then resume."""
    if not FUSECTL.is_mount():
        subprocess.run(["mount", "-t", "fusectl", "none", str(FUSECTL)], check=True)
    waiting = FUSECTL / str(_connections[mount.path]) / "waiting"
    daemon = mount.proc.pid
    os.kill(daemon, signal.SIGSTOP)
    try:
        _until("the daemon stops", lambda: _stopped(daemon))
        for step, client in enumerate(clients, start=1):
            assert client.proc.stdin is not None
            client.proc.stdin.write(b"go\n")
            client.proc.stdin.flush()
            _until(f"request {step} queued", lambda step=step: int(waiting.read_text()) >= step)
    finally:
        os.kill(daemon, signal.SIGCONT)


@pytest.mark.parametrize("file", [RAW, STATUS])
def test_fault_on_a_page_another_client_is_filling(mount: Mount, c_client: CClient,
                                                   file: str) -> None:
    """The daemon's access reaches a page whose fill another process started.

    The toucher's fault locks the page and queues its read for the daemon's
    Python thread; the registrar's name lies on that very page. The order is
    made certain by stopping the daemon while both requests are sent (they
    queue in the kernel in order). When the name was read on the Python
    thread, the access waited for the lock, the lock for the read, the read
    for the access: every client hung, until the receiver's watchdog refused
    the fill after 100 ms (the toucher died of SIGBUS, the registrar got
    EFAULT). Now the name is read in the registrar's lane (issue 19 item 3):
    the Python thread serves the fill meanwhile, and the registration reads
    the mapped page, as the kernel's does.
    """
    fault_mem = str(c_client("fault_mem"))
    registrar = Interactive(mount, [fault_mem, "reg-late", str(mount), file])
    toucher = Interactive(mount, [fault_mem, "touch-late", str(mount), file])
    assert registrar.line() == "ready"
    assert toucher.line() == "ready"
    _stop_and_send(mount, [registrar, toucher])
    assert registrar.line() == "reg-late rc=0 errno=0"
    assert toucher.finish() == ["touch-late rc=0 errno=0"]
    registrar.finish()
    still_serving(mount)
    log = mount.log_text()
    assert "Traceback" not in log, log


def test_fault_enable_word_on_a_page_another_client_is_filling(mount: Mount,
                                                                c_client: CClient) -> None:
    """The same with the daemon's write of an enable bit (``echo 1 > enable``)
    into a word the file was mapped over: the write request queues first."""
    fault_mem = str(c_client("fault_mem"))
    holder = Interactive(mount, [fault_mem, "remap", str(mount), RAW, "fault_filling u32 a"])
    assert holder.line() == "reg rc=0 errno=0"
    assert holder.line() == "ready"
    enable = mount / "events/user_events/fault_filling/enable"
    enabler = Interactive(mount, ["sh", "-c", f'exec 3>"{enable}"; echo ready; read x; '
                                              'echo 1 >&3 && echo enabled'])
    toucher = Interactive(mount, [fault_mem, "touch-late", str(mount), RAW])
    assert enabler.line() == "ready"
    assert toucher.line() == "ready"
    _stop_and_send(mount, [enabler, toucher])
    # As in the kernel, the enable succeeds though the bit cannot be written.
    assert enabler.line() == "enabled"
    # The kernel queues both requests in order, but pyfuse3's workers may take the
    # fill before the write reaches the engine (the write path awaits first): then
    # the fill is served (exit 0); otherwise it waited behind the daemon's access
    # and the watchdog refused it (SIGBUS). Either way nothing hung, and the bit,
    # on a read-only shared mapping, is not written (the unregistration's EFAULT).
    try:
        toucher.proc.communicate(timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise _hung(mount, "the toucher's fault", toucher.proc) from None
    assert toucher.proc.returncode in (0, -signal.SIGBUS)
    assert enabler.finish() == []
    assert holder.finish() == ["unreg rc=-1 errno=EFAULT"]
    still_serving(mount)
    log = mount.log_text()
    assert "Traceback" not in log, log


@pytest.fixture
def stalling_file(tmp_path: Path, c_client: CClient) -> Iterator[tuple[Path, Interactive]]:
    """A file on a FUSE filesystem of the client's own whose reads never end."""
    where = tmp_path / "stall"
    where.mkdir()
    stall = subprocess.Popen([str(c_client("stall_fs")), str(where)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert stall.stdout is not None and stall.stdout.readline() == "ready\n"
        yield where / "page", stall
    finally:
        if stall.poll() is None:
            abort(connection(where))
        stall.communicate(timeout=STEP_TIMEOUT_S)
        # libfuse leaves an aborted connection's mount in place.
        subprocess.run(["fusermount3", "-u", "-z", str(where)], check=True)


def _aborted(stalling: tuple[Path, subprocess.Popen[str]], mount: Mount) -> None:
    """The stalling filesystem's connection was aborted (its server ends) and
    the daemon said why."""
    _, stall = stalling
    out, _ = stall.communicate(timeout=STEP_TIMEOUT_S)
    assert out == "ended\n"
    # The access that waited logs it once it returns, on its own thread: no
    # event tells when; the log is polled, bounded.
    said = "waited 1 s on another FUSE filesystem: that connection was aborted"
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while said not in mount.log_text() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert said in mount.log_text()


def test_fault_on_a_file_of_a_filesystem_that_never_answers(
        mount: Mount, c_client: CClient, stalling_file: tuple[Path, subprocess.Popen[str]]) -> None:
    """A name on a page of a client's own FUSE file whose reads never end.

    Nothing in the daemon can end that wait; before, every client hung with
    it. Now the connection is aborted after 1 s: the access fails (EFAULT)
    and the daemon serves on.
    """
    page, _ = stalling_file
    bystander = Bystander(mount)
    out = run_bounded(mount, [str(c_client("fault_mem")), "reg-name", str(mount), str(page)])
    assert out == "reg-name rc=-1 errno=EFAULT\n"
    bystander.check()
    _aborted(stalling_file, mount)
    still_serving(mount)


def test_fault_enable_word_on_a_file_of_a_filesystem_that_never_answers(
        mount: Mount, c_client: CClient, stalling_file: tuple[Path, subprocess.Popen[str]]) -> None:
    """``echo 1 > enable`` writing a bit into such a page (through the
    registered image, not the caller's request)."""
    page, _ = stalling_file
    holder = Interactive(mount, [str(c_client("fault_mem")), "remap", str(mount), str(page),
                                 "fault_stall u32 a"])
    assert holder.line() == "reg rc=0 errno=0"
    assert holder.line() == "ready"
    enable = mount / "events/user_events/fault_stall/enable"
    run_bounded(mount, ["sh", "-c", f'echo 1 > "{enable}"'])
    _aborted(stalling_file, mount)
    assert holder.finish() == ["unreg rc=-1 errno=EFAULT"]
    still_serving(mount)


@pytest.fixture
def answering_file(tmp_path: Path, c_client: CClient) -> Iterator[tuple[Path, Interactive]]:
    """A file on someone else's working FUSE filesystem (its reads are answered)."""
    where = tmp_path / "innocent"
    where.mkdir()
    fs = subprocess.Popen([str(c_client("stall_fs")), str(where), "answer"],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert fs.stdout is not None and fs.stdout.readline() == "ready\n"
        yield where / "page", fs
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(where)], check=True)
        fs.communicate(timeout=STEP_TIMEOUT_S)


def test_the_watchdog_aborts_only_the_connection_that_is_stuck(
        mount: Mount, c_client: CClient, stalling_file: tuple[Path, subprocess.Popen[str]],
        answering_file: tuple[Path, subprocess.Popen[str]]) -> None:
    """Issue 19 item 4: an access across a page of a working FUSE filesystem
    (read, answered) and a page of one that never answers. Before, every
    foreign connection mapped in the access's range was aborted, so anyone
    could have the root daemon kill another user's working mount."""
    page, _ = stalling_file
    innocent, innocent_fs = answering_file
    out = run_bounded(mount, [str(c_client("fault_mem")), "reg-struct-after", str(mount),
                              str(page), str(innocent)])
    assert out == "reg-struct-after rc=-1 errno=EFAULT\n"
    _aborted(stalling_file, mount)
    # The working filesystem still answers, its server still runs.
    assert innocent_fs.poll() is None
    assert (innocent.read_bytes()[:4]) == (28).to_bytes(4, "little")
    still_serving(mount)


def _thread_ticks(pid: int, comm: str) -> int:
    """utime + stime (clock ticks) of ``pid``'s thread named ``comm``."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == comm:
            fields = _stat_fields(task)
            return int(fields[14 - 3]) + int(fields[15 - 3])  # utime, stime
    raise AssertionError(f"no thread {comm} in {pid}")


def test_the_watchdog_sleeps(mount: Mount) -> None:
    """The watchdog wakes 4 times a second, not in a loop: over half a second
    of an idle mount it uses (almost) no CPU. (Its deadlines once went by the
    wrong clock, and it spun.)"""
    before = _thread_ticks(mount.proc.pid, "tracefs-watch")
    time.sleep(0.5)  # a window to measure, not an event to await
    assert _thread_ticks(mount.proc.pid, "tracefs-watch") - before <= 2
