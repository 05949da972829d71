"""Mounted tests of the native bridge (tracefs_fuse.fuse._bridge, _session).

Each test drives tests/fuse/bridge_testfs.py, run as its own process, with a
C client from tests/clients/bridge_*.c and asserts on the client's output.
The daemon reports what it did on an events pipe; tests wait on that pipe
(with a bound) instead of sleeping.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.uses_fuse

TESTFS = Path(__file__).with_name("bridge_testfs.py")
MOUNT_TIMEOUT_S = 30.0
EVENT_TIMEOUT_S = 10.0
# Bounds on a hang, never speed claims (those live in bench/): a loaded 2-CPU machine
# can take seconds to spawn or schedule a client.
EXIT_TIMEOUT_S = 10.0
CClient = Callable[[str], Path]


class Events:
    """Line reader over the daemon's events pipe, with deadlines."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = b""
        self._unclaimed: list[str] = []  # read, not yet matched by wait_for

    def wait_for(self, prefix: str, timeout: float = EVENT_TIMEOUT_S) -> str:
        """Claim the oldest unclaimed line starting with `prefix`.

        Lines are claimed, not skipped: concurrent clients' events arrive in
        any order.
        """
        deadline = time.monotonic() + timeout
        while True:
            for i, line in enumerate(self._unclaimed):
                if line.startswith(prefix):
                    return self._unclaimed.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._fd], [], [],
                                                   remaining)[0]:
                raise TimeoutError(f"no {prefix!r} event; unclaimed: "
                                   f"{self._unclaimed}")
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise EOFError(f"daemon exited before {prefix!r}; unclaimed: "
                               f"{self._unclaimed}")
            *lines, self._buf = (self._buf + chunk).split(b"\n")
            self._unclaimed += [line.decode() for line in lines]

    def close(self) -> None:
        os.close(self._fd)


class MountedFs:
    """A running bridge_testfs: process, mount point, events, log."""

    def __init__(self, mnt: Path, log: Path, *extra: str) -> None:
        self.mnt = mnt
        self.log = log
        read_fd, write_fd = os.pipe()
        with open(log, "wb") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, str(TESTFS), str(mnt), "--events-fd",
                 str(write_fd), *extra],
                pass_fds=[write_fd], stdin=subprocess.DEVNULL,
                stdout=log_file, stderr=subprocess.STDOUT)
        os.close(write_fd)  # EOF on read_fd now means the daemon is gone
        self.events = Events(read_fd)
        self._clients: list[subprocess.Popen[str]] = []

    def path(self, name: str) -> str:
        return str(self.mnt / name)

    def status(self) -> dict[str, int]:
        with open(self.path("status"), "rb") as f:
            return json.loads(f.read())

    def spawn(self, *argv: str) -> subprocess.Popen[str]:
        """Start a client that may block on the mount.

        A client stuck in a FUSE request cannot be reaped until the daemon
        answers or dies, so unmount()/cleanup() reap it, not the test.
        """
        client = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self._clients.append(client)
        return client

    def _reap_clients(self, timeout: float | None) -> None:
        while self._clients:
            client = self._clients[-1]
            client.kill()
            client.communicate(timeout=timeout)
            self._clients.pop()

    def wait_ready(self) -> None:
        """Bounded wait for 'ready' (sent after the live bridge check)."""
        self.events.wait_for("ready", MOUNT_TIMEOUT_S)
        assert os.path.ismount(self.mnt)

    def unmount(self) -> None:
        """The normal way out: fusermount3 -u, then a clean daemon exit."""
        self._reap_clients(EXIT_TIMEOUT_S)
        subprocess.run(["fusermount3", "-u", str(self.mnt)], check=True)
        assert self.proc.wait(EXIT_TIMEOUT_S) == 0, self.log.read_text()
        assert not os.path.ismount(self.mnt)

    def cleanup(self) -> None:
        """After a failure: lazy unmount, kill, reap; never hangs."""
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)],
                           check=False)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        # The daemon's death aborted the connection: stuck clients are free.
        self._reap_clients(None)
        self.events.close()


def start_testfs(tmp: Path, *extra: str) -> MountedFs:
    mnt = tmp / "mnt"
    mnt.mkdir()
    return MountedFs(mnt, tmp / "daemon.log", *extra)


@pytest.fixture(scope="module")
def testfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MountedFs]:
    fs = start_testfs(tmp_path_factory.mktemp("bridge"))
    try:
        fs.wait_ready()
        yield fs
        fs.unmount()
    finally:
        fs.cleanup()


def run_client(c_client: CClient, name: str, *args: str) -> dict[str, str]:
    """Run a client to completion; its key=value output as a dict."""
    out = subprocess.run([str(c_client(name)), *args], check=True,
                         capture_output=True, text=True,
                         timeout=EVENT_TIMEOUT_S).stdout
    return dict(pair.split("=", 1) for pair in out.split())


def test_mount_check_reports_bridge_active(testfs: MountedFs) -> None:
    status = testfs.status()
    assert status["session_hooked"] and status["custom_io"]
    assert status["init_seen"]
    assert status["kernel_minor"] >= 39  # 6.18 offers 7.45
    assert status["allow_mmap_offered"] and status["allow_mmap_granted"]
    assert status["reply_flags2"] & 1 << 4  # FUSE_DIRECT_IO_ALLOW_MMAP
    assert status["ioctls"] >= 1  # the live check's probe


def test_ioctl_restricted_copy_in_and_reply_without_data(
        testfs: MountedFs, c_client: CClient) -> None:
    out = run_client(c_client, "bridge_ioctl", "reg", testfs.path("ioctl"))
    assert out["ret"] == "7"
    assert out["size"] == "24"  # untouched: nothing was copied back
    # Written by the daemon with process_vm_writev inside the 8 copied-in
    # bytes; a copy-back would have clobbered it.
    assert out["marker"] == "0xfeedface"
    assert int(out["result"], 16) == 0x11111111 + 24  # from in_data
    assert out["tid_seen"] == out["gettid"] == out["getpid"]


def test_ioctl_from_thread_reports_its_tid(testfs: MountedFs,
                                           c_client: CClient) -> None:
    out = run_client(c_client, "bridge_ioctl", "thread", testfs.path("ioctl"))
    assert out["ret"] == "7"
    assert out["tid_seen"] == out["gettid"] != out["getpid"]


def test_ioctl_reply_data_is_copied_to_caller(testfs: MountedFs,
                                              c_client: CClient) -> None:
    out = run_client(c_client, "bridge_ioctl", "data", testfs.path("ioctl"))
    assert (out["ret"], out["v0"], out["v1"]) == ("0", "42", "100")


def test_ioctl_unknown_is_enotty(testfs: MountedFs, c_client: CClient) -> None:
    out = run_client(c_client, "bridge_ioctl", "unknown", testfs.path("ioctl"))
    assert out == {"ret": "-1", "errno": "ENOTTY"}


def test_dual_read_text_mmap_binary_and_notify_store(
        testfs: MountedFs, c_client: CClient) -> None:
    out = run_client(c_client, "bridge_mmap", str(testfs.mnt))
    text = "dual-text-for-read(2)"
    assert out["read_before_mmap"] == text
    assert out["mapped"] == "ab" * 8  # page-cache fill: lock_owner == 0
    assert out["read_while_mapped"] == text
    assert out["after_store_open"] == "c0ffee01"
    assert out["after_store_closed"] == "0badf00d"  # fd closed, still live
    assert out["read_new_fd"] == text
    assert out["mapped_after_reopen"] == "c0ffee01abababab0badf00d"
    assert out["after_queued_batches"] == "33333333"
    assert len(out) == 8


def test_blocked_read_ends_on_sigkill(testfs: MountedFs, c_client: CClient) -> None:
    client = testfs.spawn(str(c_client("bridge_block")), "wait",
                          testfs.path("block"))
    testfs.events.wait_for(f"blocked {client.pid}")
    client.kill()
    assert client.wait(EXIT_TIMEOUT_S) == -signal.SIGKILL
    testfs.events.wait_for(f"interrupted {client.pid}")


def test_blocked_read_returns_eintr_on_sigint(testfs: MountedFs,
                                              c_client: CClient) -> None:
    client = testfs.spawn(str(c_client("bridge_block")), "wait",
                          testfs.path("block"))
    testfs.events.wait_for(f"blocked {client.pid}")
    client.send_signal(signal.SIGINT)
    out, _ = client.communicate(timeout=EXIT_TIMEOUT_S)
    assert client.returncode == 0
    assert out == "read=-1 errno=EINTR\n"
    # The handler's attempt to reply inside interrupted() was refused.
    testfs.events.wait_for(f"reply-refused {client.pid}")


def test_interrupt_before_watch_is_reported_by_watch_interrupts(
        testfs: MountedFs, c_client: CClient) -> None:
    client = testfs.spawn(str(c_client("bridge_block")), "wait",
                          testfs.path("late"))
    testfs.events.wait_for(f"late-blocked {client.pid}")
    received = testfs.status()["interrupts_received"]
    client.send_signal(signal.SIGINT)
    # No event exists for an INTERRUPT nobody watches: poll the counter.
    deadline = time.monotonic() + EVENT_TIMEOUT_S
    while testfs.status()["interrupts_received"] == received:
        assert time.monotonic() < deadline, "FUSE_INTERRUPT never arrived"
        time.sleep(0.01)
    fd = os.open(testfs.path("ctl"), os.O_WRONLY)
    try:
        os.write(fd, f"late {client.pid}".encode())
    finally:
        os.close(fd)
    assert testfs.events.wait_for("late-watch") == f"late-watch {client.pid} True"
    out, _ = client.communicate(timeout=EXIT_TIMEOUT_S)
    assert out == "read=-1 errno=EINTR\n"


def test_blocked_readers_do_not_starve_other_requests(
        testfs: MountedFs, c_client: CClient) -> None:
    """Twice as many blocked readers as pyfuse3 workers (MAX_TASKS = 4): a starved ioctl
    would wait for as long as they block, past run_client's bound."""
    clients = [testfs.spawn(str(c_client("bridge_block")), "wait",
                            testfs.path("block")) for _ in range(8)]
    for client in clients:
        testfs.events.wait_for(f"blocked {client.pid}")
    out = run_client(c_client, "bridge_ioctl", "data", testfs.path("ioctl"))
    assert out["v0"] == "42"
    assert testfs.status()["reads"] > 0
    for client in clients:
        client.kill()
    for client in clients:
        assert client.wait(EXIT_TIMEOUT_S) == -signal.SIGKILL


def test_fcntl_nonblock_shows_in_per_read_flags(testfs: MountedFs,
                                                c_client: CClient) -> None:
    out = run_client(c_client, "bridge_block", "nonblock",
                     testfs.path("block"))
    assert out == {"read": "-1", "errno": "EAGAIN"}
    flags = int(testfs.events.wait_for("nonblock").split()[1], 16)
    assert flags & os.O_NONBLOCK


def test_open_reply_carries_parallel_direct_writes(
        testfs: MountedFs, c_client: CClient) -> None:
    fixups = testfs.status()["open_fixups"]
    out = run_client(c_client, "bridge_pwrite", "parallel", testfs.path("par"),
                     "2")
    assert out["done"] == "2"
    # Both writes reached the daemon before either was answered: the kernel
    # took the inode lock shared, which it does only with the flag.
    assert testfs.events.wait_for("writes par") == "writes par 2"
    assert testfs.status()["open_fixups"] >= fixups + 2


@pytest.mark.slow
def test_without_parallel_flag_writes_are_serialized(
        testfs: MountedFs, c_client: CClient) -> None:
    """Negative control for the test above (waits out SERIAL_TIMEOUT_S)."""
    run_client(c_client, "bridge_pwrite", "parallel", testfs.path("serial"),
               "2")
    assert testfs.events.wait_for("writes serial") == "writes serial 1"
    assert testfs.events.wait_for("writes serial") == "writes serial 1"


def test_handler_exception_replies_eio_and_is_logged(testfs: MountedFs) -> None:
    errors = testfs.status()["handler_errors"]
    fd = os.open(testfs.path("ctl"), os.O_WRONLY)
    try:
        with pytest.raises(OSError) as exc_info:
            os.write(fd, b"not a command")
    finally:
        os.close(fd)
    assert exc_info.value.errno == errno.EIO
    assert testfs.status()["handler_errors"] == errors + 1
    assert "write handler raised for request" in testfs.log.read_text()


def test_unanswered_request_is_answered_eio_when_collected(
        testfs: MountedFs) -> None:
    orphaned = testfs.status()["orphaned"]
    fd = os.open(testfs.path("sink"), os.O_WRONLY)
    try:
        with pytest.raises(OSError) as exc_info:
            os.write(fd, b"drop")
    finally:
        os.close(fd)
    assert exc_info.value.errno == errno.EIO
    assert testfs.status()["orphaned"] == orphaned + 1
    assert "dropped without a reply; replied EIO" in testfs.log.read_text()


def test_second_reply_raises(testfs: MountedFs) -> None:
    fd = os.open(testfs.path("ctl"), os.O_WRONLY)
    try:
        assert os.write(fd, b"double") == 6
    finally:
        os.close(fd)
    event = testfs.events.wait_for("double-reply")
    assert "was already replied" in event


def test_check_fails_when_pyfuse3_imported_first(tmp_path: Path) -> None:
    fs = start_testfs(tmp_path, "--import-pyfuse3-first")
    try:
        with pytest.raises(EOFError):
            fs.events.wait_for("ready", MOUNT_TIMEOUT_S)
        assert fs.proc.wait(EXIT_TIMEOUT_S) != 0
        log = fs.log.read_text()
        assert ("bridge inactive: pyfuse3 was imported before tracefs-fuse loaded "
                "its FUSE bridge") in log
        # The advice names the public API, never a private module.
        assert "import tracefs_fuse.serve (from tracefs_fuse import serve)" in log
        assert "._session" not in log
        assert not os.path.ismount(fs.mnt)  # the failed check unmounted
    finally:
        fs.cleanup()


def test_fixture_cleanup_unmounts_and_kills(tmp_path: Path) -> None:
    """The failure path of the fixture: lazy unmount, kill, no hang."""
    fs = start_testfs(tmp_path)
    fs.wait_ready()
    fs.cleanup()
    assert not os.path.ismount(fs.mnt)
    assert fs.proc.returncode is not None
