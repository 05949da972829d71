"""``tracefs-fuse run -- CMD``: private namespace, exit status, teardown."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.uses_fuse

RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]


def host_fuse_tracefs_mounts() -> list[str]:
    """Our mounts where run puts them, as seen from outside its namespace."""
    with open("/proc/self/mounts") as f:
        return [line for line in f if "fuse.tracefs" in line
                and line.split()[1] in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")]


def test_run_mounts_privately_and_returns_the_status() -> None:
    result = subprocess.run(
        [*RUN, "sh", "-c", "grep -E ' /sys/kernel/(debug/)?tracing ' /proc/mounts; exit 7"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 7, result.stderr
    lines = result.stdout.splitlines()
    tracing = [line.split()[2] for line in lines if line.split()[1] == "/sys/kernel/tracing"]
    # A real tracefs beneath ours: libtracefs takes the first 'tracefs' line.
    assert tracing == ["tracefs", "fuse.tracefs"]
    assert any(line.split()[1:3] == ["/sys/kernel/debug/tracing", "fuse.tracefs"]
               for line in lines)
    assert host_fuse_tracefs_mounts() == []


def test_run_serves_user_events(c_client) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run([*RUN, str(c_client("ue_flow")), "/sys/kernel/tracing"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "after close: deleted"


def test_run_reports_a_killed_command_like_a_shell() -> None:
    result = subprocess.run([*RUN, "sh", "-c", "kill -KILL $$"], timeout=60)
    assert result.returncode == 128 + signal.SIGKILL


def test_run_missing_command_is_127() -> None:
    result = subprocess.run([*RUN, "/nonexistent/command"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 127
    assert result.stderr == ("tracefs-fuse run: /nonexistent/command: "
                             "No such file or directory\n")


#: What ``run_start_state`` checks, in order (each "ok <check>"; a wrong one fails the client).
START_STATE_CHECKS = [
    "no signal blocked (run's SIGINT block is not inherited)", "SIGINT default",
    "SIGPIPE default", "SIGXFSZ default", "the caller's ignored signal still ignored",
    "PR_SET_PDEATHSIG is SIGKILL", "RLIMIT_NOFILE soft limit restored",
    "under a seccomp filter", "no descriptor beyond 0, 1 and 2"]


def test_run_starts_the_command_as_popen_with_its_set_up_did(c_client) -> None:  # type: ignore[no-untyped-def]
    # run raises its own RLIMIT_NOFILE to the hard limit and blocks SIGINT;
    # the command gets neither, and keeps what our caller ignored.
    soft = 1000
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def caller_state() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)

    result = subprocess.run(
        [*RUN, str(c_client("run_start_state")), str(soft), str(int(signal.SIGUSR1))],
        capture_output=True, text=True, timeout=60, preexec_fn=caller_state)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"ok {check}" for check in START_STATE_CHECKS]


def test_run_inside_run_runs_the_command_without_its_own_filter() -> None:
    # The outer run's filter has a listener, and seccomp refuses a second in
    # one task's chain (EBUSY, kernel/seccomp.c has_duplicate_listener): the
    # inner run's child reports that errno, the command runs unfiltered
    # beneath the outer filter, and the inner run says so in one line.
    result = subprocess.run(
        [*RUN, *RUN, "sh", "-c", "grep Seccomp: /proc/self/status; exit 5"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 5, result.stderr
    assert result.stdout == "Seccomp:\t2\n"
    assert result.stderr.splitlines() == [
        "tracefs-fuse run: perf_event_open is not emulated (the seccomp filter could not be "
        "installed: Device or resource busy); perf sees the host kernel's events only"]


def test_run_passes_sigterm_on_and_tears_down() -> None:
    # The command tells us (through a pipe) when it is running, then waits.
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([*RUN, "bash", "-c", f"echo up >&{write_fd}; exec sleep 60"],
                            pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        assert ready.readline() == "up\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert host_fuse_tracefs_mounts() == []


def test_run_ctrl_c_reaches_the_command_and_tears_down() -> None:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([*RUN, "bash", "-c", f"echo up >&{write_fd}; exec sleep 60"],
                            pass_fds=(write_fd,), start_new_session=True)
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        assert ready.readline() == "up\n"
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    assert proc.wait(timeout=30) == 128 + signal.SIGINT


def test_killed_runner_leaves_nothing_behind() -> None:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([*RUN, "bash", "-c", f"echo $$ >&{write_fd}; exec sleep 60"],
                            pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        child = int(ready.readline())
    proc.kill()
    proc.wait(timeout=30)
    # PR_SET_PDEATHSIG: the command dies with us, and the namespace with it.
    pidfd = os.pidfd_open(child)
    try:
        import select

        assert select.select([pidfd], [], [], 10)[0], "command survived its runner"
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)
    assert host_fuse_tracefs_mounts() == []


def test_sigterm_to_a_mount_daemon_unmounts_cleanly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import start_mount

    mount = start_mount(tmp_path / "t", tmp_path / "log")
    assert os.path.ismount(mount.path)
    mount.proc.send_signal(signal.SIGTERM)
    assert mount.proc.wait(timeout=30) == 0, mount.log_text()
    assert not os.path.ismount(mount.path)


def test_run_beside_a_tracefs_at_a_path_with_a_space(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # mountinfo writes the space as \040: the tracefs must still be found and
    # detached inside run's namespace (issue 13, fidelity 4).
    spaced = tmp_path / "a b"
    spaced.mkdir()
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
         'mount -t tracefs nodev "$0" && exec "$@"', str(spaced), *RUN,
         "sh", "-c", "grep -c ' tracefs ' /proc/mounts"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"  # only the one beneath ours at /sys/kernel/tracing


def test_mount_at_a_path_with_a_space(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import start_mount, stop_mount

    mount = start_mount(tmp_path / "a b", tmp_path / "log")
    try:
        assert mount.read("user_events_status") == "\nActive: 0\nBusy: 0\n"
    finally:
        stop_mount(mount)


# A refused write while the command runs makes the daemon log a line (at info).
REFUSED_THEN_MORE = ("echo before >&2; echo bogus >> /sys/kernel/tracing/dynamic_events; "
                     "echo after >&2")
REFUSAL = "write dynamic_events from pid"


def test_run_holds_the_daemon_log_back_until_the_command_exits() -> None:
    result = subprocess.run([*RUN[:-1], "--log-level", "info", "--", "sh", "-c",
                             REFUSED_THEN_MORE], capture_output=True, text=True, timeout=60)
    lines = result.stderr.splitlines()
    assert lines[:3] == ["before", "sh: 1: echo: echo: I/O error", "after"]
    assert any(REFUSAL in line for line in lines[3:]), result.stderr


def test_run_log_dash_interleaves_as_asked() -> None:
    result = subprocess.run([*RUN[:-1], "--log-level", "info", "--log", "-", "--", "sh", "-c",
                             REFUSED_THEN_MORE], capture_output=True, text=True, timeout=60)
    lines = result.stderr.splitlines()
    refusal = next(i for i, line in enumerate(lines) if REFUSAL in line)
    assert lines.index("before") < refusal < lines.index("after")


def test_run_log_file_keeps_stderr_the_command_s(  # type: ignore[no-untyped-def]
        tmp_path, c_client) -> None:
    log = tmp_path / "daemon.log"
    result = subprocess.run([*RUN[:-1], "--log-level", "info", "--log", str(log), "--",
                             str(c_client("ue_cases")), "/sys/kernel/tracing"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = log.read_text()
    # One line per refused request, naming it and its caller; no libfuse dump.
    assert re.search(r"^tracefs-fuse\[\d+\] INFO tracefs_fuse\.fuse\._errno: ioctl DIAG_IOCSREG "
                     r"from pid \d+ \(ue_cases\): EADDRINUSE: \S+ exists with other fields$",
                     text, re.MULTILINE), text
    assert all(line.startswith("tracefs-fuse[") for line in text.splitlines()), text
    assert "unique:" not in text and "opcode" not in text


def test_run_passes_a_sigint_sent_to_it_alone_on() -> None:
    # kill -INT RUN_PID (not the terminal's Ctrl-C): passed on, as timeout(1) does.
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([*RUN, "bash", "-c", f"echo up >&{write_fd}; exec sleep 60"],
                            pass_fds=(write_fd,), start_new_session=True)
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        assert ready.readline() == "up\n"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 128 + signal.SIGINT
    assert host_fuse_tracefs_mounts() == []


def test_run_help_says_what_becomes_of_signals(capsys: pytest.CaptureFixture[str]) -> None:
    from tracefs_fuse.cli import _main as cli

    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert ("A SIGINT, SIGTERM or SIGHUP sent to tracefs-fuse run itself (kill -INT PID) "
            "is passed on to CMD, as timeout(1) does; Ctrl-C at the terminal reaches CMD "
            "directly, once.") in out


COUNT_SIGINTS = """
import os, signal, sys
out, stop = int(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGINT, lambda *_: os.write(out, b"got\\n"))
os.write(out, b"up\\n")
os.read(stop, 1)
"""


def test_run_ctrl_c_at_a_terminal_reaches_the_command_once() -> None:
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    out_r, out_w = os.pipe()
    stop_r, stop_w = os.pipe()

    def controlling_terminal() -> None:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*RUN, sys.executable, "-c", COUNT_SIGINTS, str(out_w), str(stop_r)],
                            pass_fds=(out_w, stop_r), stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=controlling_terminal)
    for fd in (slave, out_w, stop_r):
        os.close(fd)
    with os.fdopen(out_r, "rb") as said:
        assert said.readline() == b"up\n"
        os.write(master, b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground group
        assert said.readline() == b"got\n"
        os.close(stop_w)
        assert proc.wait(timeout=30) == 0
        assert said.read() == b""  # not a second time
    os.close(master)


def test_run_outlives_an_abort_of_its_connection() -> None:
    """Root aborts run's FUSE connection (fusectl) while the command runs: the
    command sees ENOTCONN, run returns its status and says why (it segfaulted
    ending a session that had already ended)."""
    if not os.path.ismount("/sys/fs/fuse/connections"):
        subprocess.run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"],
                       check=True)
    dev_r, dev_w = os.pipe()
    go_r, go_w = os.pipe()
    # tracing_on read first: the daemon serves (the command starts before it does).
    script = (f"cat /sys/kernel/tracing/tracing_on >/dev/null; "
              f"stat -c %d /sys/kernel/tracing >&{dev_w}; read go <&{go_r}; "
              "cat /sys/kernel/tracing/tracing_on; echo cat=$?; exit 5")
    proc = subprocess.Popen([*RUN, "bash", "-c", script], pass_fds=(dev_w, go_r),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(dev_w)
    os.close(go_r)
    with os.fdopen(dev_r) as f:  # run holds the pipe too: a line, not EOF
        connection = os.minor(int(f.readline()))
    with open(f"/sys/fs/fuse/connections/{connection}/abort", "w") as f:
        f.write("1")
    os.write(go_w, b"go\n")
    os.close(go_w)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err
    assert out.splitlines() == ["cat=1"]
    assert "Transport endpoint is not connected" in err
    assert "the mount ended before the command did" in err


def _unloadable(tmp_path: Path, trio_source: str) -> dict[str, str]:
    """An environment in which run's serving side cannot load: a ``trio`` of
    ``trio_source`` comes first (nothing of run imports trio before it
    starts the command)."""
    (tmp_path / "trio.py").write_text(trio_source)
    return dict(os.environ, PYTHONPATH=str(tmp_path))


def test_a_command_that_ends_before_the_daemon_is_loaded_needs_none(tmp_path: Path) -> None:
    """The command starts before the daemon is loaded (issue 21). One that ends
    first gets its status back, its leftovers ended and the summary, with no
    daemon at all: here the serving side never loads."""
    env = _unloadable(tmp_path, "import threading\nthreading.Event().wait()\n")
    pidfile = tmp_path / "leftover"
    result = subprocess.run(
        [*RUN[:-1], "--events", "user_events:nothing", "--",
         "sh", "-c", f"sleep 600 & echo $! > {pidfile}; exit 3"],
        env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert result.stderr == "tracefs-fuse: --events 'user_events:nothing' matched no user event\n"
    with pytest.raises(ProcessLookupError):  # ended and reaped: run's child until then
        os.kill(int(pidfile.read_text()), 0)


def test_a_serving_side_that_cannot_load_ends_the_command(tmp_path: Path) -> None:
    """A command waiting on the mount for a daemon that fails to load is ended,
    and run says why in one line."""
    env = _unloadable(tmp_path, "raise ImportError('no trio here')\n")
    result = subprocess.run([*RUN, "sh", "-c", "cat /sys/kernel/tracing/tracing_on; exit 3"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "tracefs-fuse run: no trio here\n"
