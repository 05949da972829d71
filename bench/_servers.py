"""What the suite builds, mounts and runs, and how all of it is put back.

Rules:
  * Every mount, server process and tracefs instance is entered into the
    caller's ``ExitStack`` as soon as it exists, so a failure or Ctrl-C
    still unmounts, stops and removes it.
  * The machine's real tracefs is used only through a private instance
    (``instances/tracefs-fuse-bench-<pid>``); the global buffer and every
    other instance are never touched. If no tracefs is mounted, one is
    mounted in a temporary directory and unmounted afterwards.
  * Mount-ready time means the same for every server: from spawning it to
    the first successful ``stat`` of ``user_events_data`` through the mount.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

BENCH_DIR = Path(__file__).parent
#: How often mount readiness is polled; below the ~100 ms a Python server takes.
READY_POLL_S = 0.001
READY_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 120.0
CLK_TCK = os.sysconf("SC_CLK_TCK")

#: The three FUSE servers, by the name the tables use.
OURS = "tracefs-fuse"
PYFUSE3_FLOOR = "pyfuse3 floor"
LIBFUSE_FLOOR = "libfuse floor"


def is_ours(name: str) -> bool:
    """``tracefs-fuse``, alone or followed by mount options."""
    return name.split()[0] == OURS


class Binaries:
    """The C client and the libfuse floor, compiled for this run."""

    def __init__(self, workdir: Path) -> None:
        cflags = ["-O2", "-Wall", "-Wextra", "-Werror"]
        fuse = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], check=True,
                              capture_output=True, text=True).stdout.split()
        self.client = workdir / "client"
        self.floor_fuse = workdir / "floor_fuse"
        subprocess.run(["gcc", *cflags, "-o", str(self.client), str(BENCH_DIR / "client.c")],
                       check=True)
        subprocess.run(["gcc", *cflags, "-o", str(self.floor_fuse),
                        str(BENCH_DIR / "floor_fuse.c"), *fuse], check=True)


#: tracefs-fuse's thread reading /dev/fuse (fuse/_native/receiver.h).
RECEIVER_THREAD = "tracefs-rx"


class Server:
    """A FUSE server process and its mountpoint."""

    def __init__(self, name: str, mountpoint: Path, proc: subprocess.Popen[bytes],
                 log: Path) -> None:
        self.name = name
        self.mountpoint = mountpoint
        self.proc = proc
        self.log = log
        #: Spawn to first successful stat of user_events_data, in seconds.
        self.ready_s = 0.0
        #: Spawn to "ok" on --ready-fd (tracefs-fuse only).
        self.ready_fd_s: float | None = None

    @property
    def data_file(self) -> Path:
        return self.mountpoint / "user_events_data"

    def _serving_thread(self) -> int:
        """The thread that reads /dev/fuse: tracefs-fuse's receiver, else the main one."""
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            with open(f"/proc/{self.proc.pid}/task/{tid}/comm") as f:
                if f.read().strip() == RECEIVER_THREAD:
                    return int(tid)
        return self.proc.pid

    def usage(self) -> tuple[float, int, int]:
        """(CPU seconds of all threads, times the serving thread slept, was preempted).

        The serving thread reads /dev/fuse (tracefs-fuse's receiver thread,
        the main thread of the floors); its voluntary context switches are
        sleeps (waiting for a request), the involuntary ones preemptions.
        """
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
        switches = {}
        with open(f"/proc/{self.proc.pid}/task/{self._serving_thread()}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.endswith("ctxt_switches"):
                    switches[key] = int(value)
        return cpu_s, switches["voluntary_ctxt_switches"], switches["nonvoluntary_ctxt_switches"]

    def cpu_ns(self) -> int:
        """CPU time of the server's threads in ns (``schedstat``: finer than ``usage``'s ticks)."""
        total = 0
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                with open(f"/proc/{self.proc.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        return total

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(f"{self.name}: no VmRSS")

    def pin(self, cpus: set[int]) -> None:
        """Set the CPU affinity of every thread the server has now."""
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            os.sched_setaffinity(int(tid), cpus)


def _command(name: str, mountpoint: Path, binaries: Binaries, ready_fd: int) -> list[str]:
    if is_ours(name):
        # "tracefs-fuse --option value": ours, mounted with those options.
        return [sys.executable, "-m", "tracefs_fuse", "mount", str(mountpoint),
                "--foreground", "--ready-fd", str(ready_fd), *name.split()[1:]]
    if name == PYFUSE3_FLOOR:
        return [sys.executable, str(BENCH_DIR / "floor_pyfuse3.py"), str(mountpoint)]
    return [str(binaries.floor_fuse), str(mountpoint)]


def start_server(name: str, mountpoint: Path, binaries: Binaries) -> Server:
    """Spawn a server and wait (bounded) until user_events_data answers a stat."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = mountpoint.with_suffix(".log")
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    start = time.perf_counter()
    with open(log, "ab") as logfile:
        proc = subprocess.Popen(_command(name, mountpoint, binaries, write_fd),
                                pass_fds=(write_fd,), stdin=subprocess.DEVNULL,
                                stdout=logfile, stderr=logfile)
    os.close(write_fd)
    server = Server(name, mountpoint, proc, log)
    answer = b""
    try:
        while not server.ready_s or (is_ours(name) and server.ready_fd_s is None):
            now = time.perf_counter()
            if proc.poll() is not None or now - start > READY_TIMEOUT_S:
                raise RuntimeError(f"{name} did not come up at {mountpoint}:\n"
                                   f"{log.read_text(errors='replace')}")
            if not server.ready_s:
                with contextlib.suppress(FileNotFoundError):
                    os.stat(server.data_file)
                    server.ready_s = time.perf_counter() - start
            if is_ours(name) and server.ready_fd_s is None:
                with contextlib.suppress(BlockingIOError):
                    answer += os.read(read_fd, 64)
                    if answer == b"ok":
                        server.ready_fd_s = time.perf_counter() - start
            time.sleep(READY_POLL_S)
    except BaseException:
        _force_stop(server)
        raise
    finally:
        os.close(read_fd)
    return server


def _force_stop(server: Server) -> None:
    subprocess.run(["fusermount3", "-u", "-z", str(server.mountpoint)], capture_output=True)
    server.proc.kill()
    server.proc.wait()


def stop_server(server: Server) -> None:
    """Unmount and wait for a clean exit; on any failure unmount lazily and kill."""
    result = subprocess.run(["fusermount3", "-u", str(server.mountpoint)], capture_output=True,
                            text=True)
    try:
        rc = server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _force_stop(server)
        raise RuntimeError(f"{server.name} did not exit after unmount") from None
    if result.returncode or rc:
        raise RuntimeError(f"{server.name}: fusermount3 -u: {result.stderr.strip()}, "
                           f"exit status {rc}:\n{server.log.read_text(errors='replace')}")


@contextlib.contextmanager
def mounted(name: str, mountpoint: Path, binaries: Binaries) -> Iterator[Server]:
    server = start_server(name, mountpoint, binaries)
    try:
        yield server
    except BaseException:
        _force_stop(server)
        raise
    stop_server(server)


@contextlib.contextmanager
def kernel_instance() -> Iterator[Path]:
    """A private instance of the real tracefs, removed (and unmounted) afterwards."""
    with contextlib.ExitStack() as stack:
        # A mount of our own: one found in /proc/mounts may be another run's
        # temporary mount, unmounted (and its directory gone) under us.
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tracefs-")))
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(root)], check=True)
        stack.callback(subprocess.run, ["umount", str(root)], check=True)
        instance = root / "instances" / f"tracefs-fuse-bench-{os.getpid()}"
        instance.mkdir()
        # rmdir of an instance frees its buffers; nothing else was changed.
        stack.callback(instance.rmdir)
        yield instance


def write_file(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def clear_trace(directory: Path) -> None:
    """``echo > trace``: empty every CPU's buffer (of that instance only)."""
    os.close(os.open(directory / "trace", os.O_WRONLY | os.O_TRUNC))


def _pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def run_client(binaries: Binaries, *args: object, before_go: Callable[[], None] | None = None,
               cpus: set[int] | None = None, wrapper: list[str] | None = None,
               ) -> dict[str, list[str]]:
    """Run the C client; returns its ``key=value`` lines as key -> values.

    Modes that print "ready" are held there while ``before_go`` runs (enable
    an event, take a snapshot), then released by a line on stdin.
    """
    argv = [*(wrapper or []), str(binaries.client), *map(str, args)]
    # Its own process group, so that the writers it forks go with it.
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_pinned(cpus),
                            process_group=0)
    assert proc.stdin is not None and proc.stdout is not None

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    # A hung server would hang the client's read or write: the watchdog kills
    # the client then, which ends any readline below with EOF.
    watchdog = threading.Timer(CLIENT_TIMEOUT_S, kill)
    watchdog.start()
    lines: list[str] = []
    try:
        if before_go is not None:
            while not lines or lines[-1] != "ready\n":
                lines.append(proc.stdout.readline())
                if not lines[-1]:
                    raise RuntimeError(f"client {args} ended before ready: "
                                       f"{proc.communicate()[1]}")
            before_go()
        out, err = proc.communicate("go\n")
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            kill()
            proc.wait()
    if proc.returncode:
        raise RuntimeError(f"client {args} failed ({proc.returncode}): {err}")
    values: dict[str, list[str]] = {}
    for line in "".join(lines).splitlines() + out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values.setdefault(key, []).append(value)
    return values
