"""Ring-buffer readers through a real mount, driven by C clients.

1. A reader built on Debian's libtracefs/libtraceevent (``tep_reader.c``)
   decodes our user events, every field type included, and markers.
2. The same reader, on markers written the same way, gives byte-identical
   output on the machine's real tracefs (a private instance) and on ours:
   page boundaries, commit words, record offsets and lengths, padding,
   TIME_EXTENDs, missed-event counts, decoded text. Time stamps and pids are
   reduced to what the format fixes (see ``tep_reader.c``), nothing else is
   masked. The kernel's side is a golden captured on Linux 6.18 (always
   compared) and, where the machine's tracefs can be mounted and runs the
   same kernel series, the live kernel too (the ``live`` and ``kernel``
   cases: always collected; elsewhere skipped with the reason, except in CI,
   where they run and a machine that cannot run them fails them).
3. Reader semantics: consuming reads, blocking, O_NONBLOCK, poll/select and
   buffer_percent, ``ioctl(fd, 0)``, signals, text pipes, clearing.
4. splice(): what FUSE lets us do (docs/readers.md), and what it cannot.

Regenerate the golden (as root, on Linux 6.18):
``python -m tests.integration.test_readers capture``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from .. import real_tracefs
from .conftest import Mount, start_mount, stop_mount

pytestmark = pytest.mark.uses_fuse

DATA = Path(__file__).parent.parent / "data"
#: The kernel the golden was captured on.
GOLDEN_KERNEL = "6.18.44"
GOLDEN = DATA / f"readers.linux-{GOLDEN_KERNEL}.json"
#: reader_marks and reader_ue_writer exit with this when a stall could have
#: added a TIME_EXTEND.
EX_TEMPFAIL = 75

#: User events the writer registers (keep in sync with reader_ue_writer.c).
EVENTS = [
    "rd_scalars u8 a; s8 b; u16 c; s16 d; u32 e; s32 f; u64 g; s64 h; "
    "char i; unsigned char j; short k; unsigned short l; int m; unsigned int n",
    "rd_strings char[8] fixed; __data_loc char[] dyn; __rel_loc char[] rel; u32 tail",
    "rd_blob struct rd_pair pair 8; unsigned char[4] raw",
    "rd_none",
]
LONG = ("a long dynamic string that makes the record longer than 112 bytes, "
        "so it is written with type_len 0")
#: What libtraceevent prints for reader_ue_writer's records, in order: (record
#: length, text). Its print fmt arguments read 1- and 2-byte fields unsigned
#: (b, d, i, k): that is libtraceevent, the same on a kernel.
DECODED = [
    (56, "..... rd_scalars: a=255 b=128 c=65535 d=32768 e=4294967295 f=-2147483648 "
         "g=18446744073709551615 h=-9223372036854775808 i=255 j=200 k=65534 l=65534 m=-3 "
         "n=4000000000"),
    (56, "..... rd_scalars: a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14"),
    (44, "..... rd_strings: fixed=fixed01 dyn=dynamic rel=rel tail=3735879680"),
    (36, "..... rd_strings: fixed=8charsX dyn= rel= tail=3735879681"),
    (140, f"..... rd_strings: fixed=8charsX dyn={LONG} rel=rel tail=3735879682"),
    (24, "..... rd_blob: pair=72623859790382856 raw=abc"),
    (16, "..... rd_none: "),
    (36, "...1. print: tracing_mark_write: hello marker\\n"),
    (32, "...1. print: tracing_mark_write: no newline\\n"),
    (20, "...1. raw_data: id:1234 00000041"),
    (24, "...1. raw_data: id:0042 00000001"),
]


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # latin-1: trace text is bytes (the kernel prints chars >= 0xa0 as they are).
    return subprocess.run(argv, capture_output=True, encoding="latin-1", timeout=timeout)


def run_writer(argv: list[str]) -> tuple[int, int, str]:
    """Run a writer client: its pid (the reader masks it), exit status, output."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        out, _ = proc.communicate(timeout=60)
    return proc.pid, proc.returncode, out


def truncate(path: Path) -> None:
    """Open for writing with O_TRUNC, as ``echo > trace`` does: clears the buffer."""
    os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))


def write_file(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def make_user_events(mount: Mount, commands: list[str]) -> None:
    """Create and enable user events the way a tracer does before the program runs."""
    for command in commands:
        with open(mount / "dynamic_events", "a") as f:
            f.write(f"u:{command}\n")
    write_file(mount / "events/user_events/enable", "1")


# -- 1. libtraceevent decodes user events and markers ---------------------------------------


def write_user_events(mount: Mount, client: Callable[[str], Path]) -> int:
    """reader_ue_writer's records, with no stall between them; the writer's pid."""
    for _ in range(3):
        pid, status, out = run_writer([str(client("reader_ue_writer")), str(mount)])
        if status != EX_TEMPFAIL:
            break
        truncate(mount / "trace")  # a stall: start over
    assert (status, out) == (0, "wrote 11\n")
    return pid


@pytest.mark.slow
def test_libtraceevent_decodes_user_events_and_markers(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    make_user_events(tracefs, EVENTS)
    for mode in ("pages", "iterate"):
        pid = write_user_events(tracefs, c_client)
        result = run([str(c_client("tep_reader")), str(tracefs), mode, "-p", str(pid)])
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "header_page subbuf=4096 long=8"
        if mode == "iterate":  # tracefs_iterate_raw_events: splice, then read
            assert lines[1:] == [f"cpu0 pid=W {text}" for _, text in DECODED]
            continue
        # One sub-buffer, records back to back from offset 16, the first at
        # the page's time stamp, every later one strictly after it.
        size = sum(length for length, _ in DECODED)
        assert lines[1] == f"cpu0 page0 commit={size:#x} size={size} missed=0 tail=zero"
        offsets = [16 + sum(length for length, _ in DECODED[:i]) for i in range(len(DECODED))]
        assert lines[2:] == [
            f"  @{offset} len={length} ts={'page' if i == 0 else 'later'} pid=W {text}"
            for i, (offset, (length, text)) in enumerate(zip(offsets, DECODED))]



# -- 2. The same layout as the kernel ---------------------------------------------------------


class Target:
    """Where a layout step writes and reads: a kernel instance or our mount."""

    def __init__(self, root: Path, instance: str | None = None) -> None:
        self.root = root
        self.instance = instance
        #: The directory holding the buffer's files (trace, trace_marker, ...).
        self.dir = root / "instances" / instance if instance else root

    def reader(self, mode: str) -> list[str]:
        return [str(self.root), mode, *(["-i", self.instance] if self.instance else [])]


#: The sequence both sides run, in one buffer, in order (state carries over):
#: (step, files to write first, reader_marks scenario, tep_reader mode).
LAYOUT_STEPS: list[tuple[str, list[tuple[str, str]], str, str]] = [
    ("layout", [], "layout", "pages"),
    # The writer goes on in the page the last read left: missed events, and
    # a first record that is not at the page's time stamp.
    ("overflow-continued", [("buffer_size_kb", "7")], "overflow", "pages"),
    ("overflow-after-reset", [("trace", "")], "overflow", "pages"),
    ("iterate", [("buffer_size_kb", "1410"), ("trace", "")], "layout", "iterate"),
]


def run_layout_steps(target: Target, client: Callable[[str], Path]) -> dict[str, str]:
    """Each step's reader output.

    Raises:
        _Stalled: a writer stalled; the caller starts over on a fresh buffer.
    """
    outputs = {}
    for step, writes, scenario, mode in LAYOUT_STEPS:
        for name, text in writes:
            if name == "trace":
                truncate(target.dir / name)
            else:
                write_file(target.dir / name, text)
        pid, status, out = run_writer([str(client("reader_marks")), str(target.dir), scenario])
        if status == EX_TEMPFAIL:
            raise _Stalled(out)
        assert status == 0, out
        result = run([str(client("tep_reader")), *target.reader(mode), "-p", str(pid)])
        assert result.returncode == 0, result.stdout + result.stderr
        outputs[step] = result.stdout
    return outputs


class _Stalled(Exception):
    """A write came late enough to add a TIME_EXTEND the other side lacks."""


def with_retries(attempt: Callable[[], dict[str, str]], tries: int = 3) -> dict[str, str]:
    for _ in range(tries - 1):
        with contextlib.suppress(_Stalled):
            return attempt()
    return attempt()


def header_files(root: Path) -> dict[str, str]:
    return {name: (root / "events" / name).read_bytes().decode("latin-1")
            for name in ("header_page", "header_event")}


def capture_kernel(root: Path, client: Callable[[str], Path]) -> dict[str, object]:
    """The kernel's side: the steps in a fresh private instance of ``root``."""
    def attempt() -> dict[str, str]:
        with kernel_instance(root) as name:
            return run_layout_steps(Target(root, name), client)

    return {"kernel": platform.release(), **header_files(root),
            "steps": with_retries(attempt)}


@contextlib.contextmanager
def kernel_instance(root: Path) -> Iterator[str]:
    name = f"tracefs-fuse-readers-{os.getpid()}"
    (root / "instances" / name).mkdir()
    try:
        yield name
    finally:
        (root / "instances" / name).rmdir()


def live_kernel_unavailable_reason() -> str | None:
    """Why the live kernel cannot be compared (root, tracefs, the golden's kernel series)."""
    reason = real_tracefs.unavailable_reason()
    golden_series = ".".join(GOLDEN_KERNEL.split(".")[:2])
    if reason is None and not platform.release().startswith(golden_series + "."):
        reason = (f"the live kernel is {platform.release()}; the transcripts are Linux "
                  f"{golden_series}'s")
    return reason


def require_live_kernel() -> None:
    """Skip a live-kernel case that cannot run here, with the reason; in CI, fail it."""
    reason = live_kernel_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the live-kernel cases, but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory,
         c_client: Callable[[str], Path]) -> dict[str, object]:
    """Our side of the steps, each attempt on a fresh mount."""
    def attempt() -> dict[str, str]:
        tmp = tmp_path_factory.mktemp("layout")
        mount = start_mount(tmp / "tracing", tmp / "daemon.log")
        try:
            # libtracefs loads formats only if some event system has an
            # "enable" file; a kernel always has one, a fresh mount has none.
            make_user_events(mount, ["rd_present u32 x"])
            return run_layout_steps(Target(mount.path), c_client)
        finally:
            stop_mount(mount)

    tmp = tmp_path_factory.mktemp("headers")
    mount = start_mount(tmp / "tracing", tmp / "daemon.log")
    try:
        headers = header_files(mount.path)
    finally:
        stop_mount(mount)
    return {**headers, "steps": with_retries(attempt)}


@pytest.fixture(scope="module", params=["golden", "live"])
def kernel(request: pytest.FixtureRequest,
           c_client: Callable[[str], Path]) -> dict[str, object]:
    if request.param == "golden":
        return json.loads(GOLDEN.read_text())  # type: ignore[no-any-return]
    require_live_kernel()
    with real_tracefs.real_tracefs() as root:
        return capture_kernel(root, c_client)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["header_page", "header_event"])
def test_header_files_are_the_kernels(kernel: dict[str, object], ours: dict[str, object],
                                      name: str) -> None:
    assert ours[name] == kernel[name]


@pytest.mark.slow
@pytest.mark.parametrize("step", [step for step, *_ in LAYOUT_STEPS])
def test_reader_sees_the_kernels_layout(kernel: dict[str, object], ours: dict[str, object],
                                        step: str) -> None:
    assert ours["steps"][step] == kernel["steps"][step]  # type: ignore[index]


if __name__ == "__main__" and sys.argv[1:] == ["capture"]:
    from tests.conftest import CLIENTS, _header_flags

    def build(name: str) -> Path:
        src, exe = CLIENTS / f"{name}.c", Path(tempfile.mkdtemp()) / name
        subprocess.run(["cc", "-O1", "-D_GNU_SOURCE", *_header_flags(src, "cflags"), "-o",
                        str(exe), str(src), *_header_flags(src, "link")], check=True)
        return exe

    with real_tracefs.real_tracefs() as root:
        golden = capture_kernel(root, build)
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {GOLDEN} ({golden['kernel']})")


# -- 3. Reader semantics ------------------------------------------------------------------------

#: x86_64 syscall numbers a blocked client may sit in (/proc/<pid>/syscall).
SYS_READ, SYS_SELECT, SYS_POLL, SYS_PSELECT6, SYS_PPOLL, SYS_SPLICE = 0, 23, 7, 270, 271, 275


class Buffer:
    """One ring buffer the semantics tests run on: a mount, or a kernel instance."""

    def __init__(self, dir: Path, client: Callable[[str], Path]) -> None:
        self.dir = dir
        self.client = client

    def write(self, rel: str, text: str) -> None:
        write_file(self.dir / rel, text)

    def raw(self, count: int, length: int = 100, cpu: int = 0) -> None:
        """``count`` raw records (ids 0x1000...) of ``length`` payload bytes on ``cpu``."""
        env = {**os.environ, "RM_CPU": str(cpu)}
        result = subprocess.run([str(self.client("reader_marks")), str(self.dir), "raw",
                                 str(count), str(length)], capture_output=True, text=True,
                                env=env, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr

    def steps(self, *steps: str) -> list[str]:
        """Run reader_block with these steps to the end; its transcript."""
        result = run([str(self.client("reader_block")), str(self.dir), *steps])
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.splitlines()

    def start(self, *steps: str) -> subprocess.Popen[str]:
        return subprocess.Popen([str(self.client("reader_block")), str(self.dir), *steps],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_blocked(proc: subprocess.Popen[str], *syscalls: int) -> None:
    """Until the client sleeps in one of ``syscalls`` (bounded: 10 s).

    Sleeping there means the kernel's reader found nothing, or our read
    request is queued ahead of anything the test does next (the daemon takes
    requests in order).
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            nr = Path(f"/proc/{proc.pid}/syscall").read_text().split()[0]
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            nr = state = ""
        if state == "S" and nr in {str(s) for s in syscalls}:
            return
        assert proc.poll() is None, f"client ended: {proc.communicate()[0]}"
        time.sleep(0.001)  # a state, not an event: nothing to wait on
    raise AssertionError("the client never blocked")


def finish(proc: subprocess.Popen[str], timeout: float = 10) -> list[str]:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out.splitlines()


@pytest.fixture(params=["ours", "kernel"])
def buffer(request: pytest.FixtureRequest, tmp_path: Path,
           c_client: Callable[[str], Path]) -> Iterator[Buffer]:
    """A fresh ring buffer: our mount, and where it mounts, a real kernel instance."""
    if request.param == "ours":
        mount = start_mount(tmp_path / "tracing", tmp_path / "daemon.log")
        try:
            yield Buffer(mount.path, c_client)
        finally:
            stop_mount(mount)
        return
    require_live_kernel()
    with real_tracefs.real_tracefs() as root, kernel_instance(root) as name:
        yield Buffer(root / "instances" / name, c_client)


RAW = "per_cpu/cpu0/trace_pipe_raw"
#: (case, raw records written first, reader_block steps, transcript) — the
#: transcripts are what Linux 6.18 gives (and gives again in the kernel case).
CONSUMING_READS = [
    ("one sub-buffer per read", 80,
     ["open", RAW, "nb", "read", "8192", "read", "8192", "read", "8192", "read", "8192"],
     ["read 8192: 4096 commit=4060 flags=-- first=0x1000",
      "read 8192: 4096 commit=4060 flags=-- first=0x1023",
      "read 8192: 4096 commit=1160 flags=-- first=0x1046",  # the partial page
      "read 8192: EAGAIN"]),
    ("reads smaller than a sub-buffer", 10,
     ["open", RAW, "nb", *["read", "512"] * 9, "read", "0", "read", "4096", "read", "4096"],
     ["read 512: 512 commit=464 flags=-- first=0x1000",  # what fits 512 - 16 bytes
      *["read 512: 512 zeros"] * 7,
      "read 512: 512 commit=464 flags=-- first=0x1004",
      "read 0: 0",
      "read 4096: 3584 zeros",  # the rest of the page handed out
      "read 4096: 4096 commit=232 flags=-- first=0x1008"]),
    ("empty, O_NONBLOCK at open", 0, ["open", RAW, "nb", "read", "4096"],
     ["read 4096: EAGAIN"]),
    ("empty, O_NONBLOCK set later", 0, ["open", RAW, "nonblock", "read", "4096"],
     ["read 4096: EAGAIN"]),
    ("trace_pipe empty, O_NONBLOCK at open", 0, ["open", "trace_pipe", "nb", "read", "4096"],
     ["read 4096: EAGAIN"]),
    ("trace_pipe empty, O_NONBLOCK set later", 0,
     ["open", "trace_pipe", "nonblock", "read", "4096"], ["read 4096: EAGAIN"]),
]


@pytest.mark.parametrize("records, steps, transcript",
                         [case[1:] for case in CONSUMING_READS],
                         ids=[case[0] for case in CONSUMING_READS])
def test_consuming_reads(buffer: Buffer, records: int, steps: list[str],
                         transcript: list[str]) -> None:
    if records:
        buffer.raw(records)
    assert buffer.steps(*steps) == transcript


def test_a_partial_page_is_consumed(buffer: Buffer) -> None:
    # The counter clock: on a busy machine the two writers can be more than
    # 2**27 ns apart, which would add a TIME_EXTEND to the second read.
    buffer.write("trace_clock", "counter")
    buffer.raw(5)
    assert buffer.steps("open", RAW, "nb", "read", "4096") == [
        "read 4096: 4096 commit=580 flags=-- first=0x1000"]
    buffer.raw(3)  # the writer is still on that page: only the new records come
    assert buffer.steps("open", RAW, "nb", "read", "4096", "read", "4096") == [
        "read 4096: 4096 commit=348 flags=-- first=0x1000", "read 4096: EAGAIN"]


@pytest.mark.parametrize("path, woken", [
    (RAW, r"read 4096: 4096 commit=20 flags=-- first=0x1000"),
    # (the kernel may show need-resched set: the scheduler's state, not the event's)
    ("trace_pipe", r"read 4096: \d+ +\S+-\d+ +\[000\] \.\S\.1\. +[\d.]+: # 1000 buf: 00 00 00 00\\n"),
])
def test_a_blocked_read_wakes_on_data(buffer: Buffer, path: str, woken: str) -> None:
    reader = buffer.start("open", path, "read", "4096")
    wait_blocked(reader, SYS_READ)
    buffer.raw(1, 4)
    transcript = finish(reader)
    assert len(transcript) == 1 and re.fullmatch(woken, transcript[0]), transcript


#: (case, buffer_percent, raw records, file, readable?) with 8 KiB per CPU
#: (3 sub-buffers). trace_pipe_raw waits for buffer_percent of the ring, and
#: never counts the page the writer is on; trace_pipe wants any data.
POLL_CASES = [
    ("empty", "0", 0, RAW, False),
    ("one record, buffer_percent 0", "0", 1, RAW, True),
    ("one record, buffer_percent 50", "50", 1, RAW, False),
    ("a page filled to the brim, 50", "50", 35, RAW, False),
    ("the writer on the second page, 50", "50", 36, RAW, True),
    ("the writer on the second page, 100", "100", 36, RAW, False),
    ("trace_pipe, one record, 100", "100", 1, "trace_pipe", True),
]


@pytest.mark.parametrize("percent, records, path, readable",
                         [case[1:] for case in POLL_CASES], ids=[case[0] for case in POLL_CASES])
def test_poll_and_select_honour_buffer_percent(buffer: Buffer, percent: str, records: int,
                                               path: str, readable: bool) -> None:
    buffer.write("buffer_size_kb", "8")
    buffer.write("buffer_percent", percent)
    if records:
        buffer.raw(records)
    answer = ["select: readable", "poll: 0x1"] if readable else ["select: timeout",
                                                                 "poll: timeout"]
    assert buffer.steps("open", path, "select", "0", "poll", "0") == answer


@pytest.mark.parametrize("path", [RAW, "trace_pipe"])
def test_a_blocked_select_wakes_at_the_watermark(buffer: Buffer, path: str) -> None:
    buffer.write("buffer_size_kb", "8")  # buffer_percent 50: past the first page
    poller = buffer.start("open", path, "select", "20000")
    wait_blocked(poller, SYS_SELECT, SYS_PSELECT6)
    buffer.raw(36 if path == RAW else 1)
    assert finish(poller) == ["select: readable"]


def test_ioctl_0_wakes_a_blocked_reader(buffer: Buffer) -> None:
    # What tracefs_cpu_stop does (O_NONBLOCK and ioctl(fd, 0)), to a read
    # asleep on an empty buffer.
    assert buffer.steps("open", RAW, "wake", "nb", "read", "4096") == [
        "wake: 0", "read 4096: EAGAIN"]


def test_ioctl_0_alone_ends_the_blocked_read(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    """Caveat (fuse/_requests.py): a read woken by ioctl(fd, 0) without
    O_NONBLOCK set returns EAGAIN; the kernel's would block again (FUSE shows
    us no fcntl() made while the read is in flight)."""
    assert Buffer(tracefs.path, c_client).steps("open", RAW, "wake", "read", "4096") == [
        "wake: 0", "read 4096: EAGAIN"]


@pytest.mark.parametrize("path", [RAW, "trace_pipe"])
@pytest.mark.parametrize("signal_name", ["SIGUSR1", "SIGKILL"])
def test_a_signal_ends_a_blocked_read_at_once(buffer: Buffer, path: str,
                                              signal_name: str) -> None:
    reader = buffer.start("handler", "open", path, "read", "4096")
    wait_blocked(reader, SYS_READ)
    reader.send_signal(getattr(signal, signal_name))
    out, _ = reader.communicate(timeout=5)  # "at once": long before a test timeout
    if signal_name == "SIGKILL":
        assert reader.returncode == -signal.SIGKILL
    else:
        assert (reader.returncode, out) == (0, "read 4096: EINTR\n")
    # The buffer is still served: the next reader gets the next record.
    buffer.raw(1, 4)
    assert buffer.steps("open", RAW, "nb", "read", "4096") == [
        "read 4096: 4096 commit=20 flags=-- first=0x1000"]


def test_trace_pipe_reports_lost_events(buffer: Buffer) -> None:
    buffer.write("buffer_size_kb", "7")
    buffer.raw(200)  # 3 sub-buffers hold 105 of them
    assert buffer.steps("open", "trace_pipe", "nb", "read", "24") == [
        "read 24: 24 CPU:0 [LOST 140 EVENTS]\\n"]


def test_opening_trace_with_o_trunc_clears(buffer: Buffer) -> None:
    buffer.raw(5, cpu=0)
    buffer.raw(3, cpu=1)
    header = re.compile(r"entries-in-buffer/entries-written: (\d+/\d+) ")
    assert buffer.steps("trunc", "per_cpu/cpu0/trace", "open", RAW, "nb", "read", "4096") == [
        "trunc per_cpu/cpu0/trace: 0", "read 4096: EAGAIN"]  # that CPU only
    assert header.findall(buffer.steps("open", "trace", "read", "4096")[0]) == ["3/3"]
    assert buffer.steps("trunc", "trace", "open", "per_cpu/cpu1/trace_pipe_raw", "nb",
                        "read", "4096") == ["trunc trace: 0", "read 4096: EAGAIN"]
    assert header.findall(buffer.steps("open", "trace", "read", "4096")[0]) == ["0/0"]


#: What trace and trace_pipe print for reader_ue_writer's records after
#: "<comm>-<pid> [000] <flags> <time>: " (the kernel's print_fields, 6.18).
TEXT = [
    "..... rd_scalars: a='\xff'(255) b=(128) c=0xffff (65535) d=0x8000 (32768) "
    "e=0xffffffff (-1) f=0x80000000 (-2147483648) g=0xffffffffffffffff (-1) "
    "h=0x8000000000000000 (-9223372036854775808) i='\xff'(255) j='\xc8'(200) "
    "k=0xfffe (65534) l=0xfffe (65534) m=0xfffffffd (-3) n=0xee6b2800 (-294967296)",
    "..... rd_scalars: a=(1) b=(2) c=0x3 (3) d=0x4 (4) e=0x5 (5) f=0x6 (6) g=0x7 (7) "
    "h=0x8 (8) i=(9) j=(10) k=0xb (11) l=0xc (12) m=0xd (13) n=0xe (14)",
    "..... rd_strings: fixed=fixed01 dyn=dynamic rel=rel tail=0xdead0000 (-559087616)",
    "..... rd_strings: fixed=8charsX dyn= rel= tail=0xdead0001 (-559087615)",
    f"..... rd_strings: fixed=8charsX dyn={LONG} rel=rel tail=0xdead0002 (-559087614)",
    "..... rd_blob: pair=0x102030405060708 (72623859790382856) raw=abc",
    "..... rd_none:No fields found",
    "...1. tracing_mark_write: hello marker",
    "...1. tracing_mark_write: no newline",
    "...1. # 1234 buf: 41 42 43 44",
    "...1. # 42 buf: 01 02 03 04 05 00 00 00",
]
_LINE = re.compile(r" *reader_ue_write-(\d+) +\[000\] (\S{5}) +\d+\.\d{6}: (.*)")


@pytest.mark.slow
def test_trace_and_trace_pipe_print_user_events_and_markers(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    make_user_events(tracefs, EVENTS)
    pid = write_user_events(tracefs, c_client)
    buffer = Buffer(tracefs.path, c_client)

    def events(steps: list[str]) -> list[str]:
        # "read N: <count> <text>" per read
        text = "".join(line.split(": ", 1)[1].split(" ", 1)[1] for line in buffer.steps(*steps))
        lines = [m.groups() for m in map(_LINE.fullmatch, text.split("\\n")) if m]
        assert {int(p) for p, _, _ in lines} <= {pid}
        return [f"{flags} {event}" for _, flags, event in lines]

    trace = ["open", "trace", "read", "65536"]
    assert events(trace) == TEXT
    assert events(trace) == TEXT  # trace does not consume
    assert events(["open", "trace_pipe", "nb", "read", "65536"]) == TEXT
    assert events(trace) == []  # trace_pipe did


# -- 4. splice() --------------------------------------------------------------------------------


def splice(buffer: Buffer, *args: str) -> list[str]:
    """reader_splice on CPU 0: each splice's result and the sub-buffers it moved."""
    result = run([str(buffer.client("reader_splice")), str(buffer.dir), "0", *args])
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


#: (case, buffer_size_kb, raw records, reader_splice arguments, transcript): the
#: same on Linux 6.18 and through FUSE.
SPLICES = [
    ("whole sub-buffers only", "1410", 80, ["65536", "nonblock", "repeat", "2"],
     ["splice 0: 8192",
      "  page ts=set commit=4060 flags=-- first_id=0x1000",
      "  page ts=set commit=4060 flags=-- first_id=0x1023",
      "splice 1: EAGAIN"]),  # the partial page is left to read()
    ("lost events flagged and counted", "7", 200, ["65536", "nonblock", "repeat", "2"],
     ["splice 0: 4096",
      "  page ts=set commit=4060 flags=MS first_id=0x108c",
      "splice 1: EAGAIN"]),
    ("nothing whole yet", "1410", 30, ["65536", "nonblock"], ["splice 0: EAGAIN"]),
]


@pytest.mark.parametrize("size_kb, records, args, transcript", [c[1:] for c in SPLICES],
                         ids=[c[0] for c in SPLICES])
def test_splice(buffer: Buffer, size_kb: str, records: int, args: list[str],
                transcript: list[str]) -> None:
    buffer.write("buffer_size_kb", size_kb)
    buffer.raw(records)
    assert splice(buffer, *args) == transcript


def test_a_new_open_does_not_see_what_a_splice_took(buffer: Buffer) -> None:
    """FUSE splices from the page cache, at the file position: what one open
    spliced at offsets 0.. stays cached, and a later open starts at 0 again."""
    buffer.raw(80)
    assert splice(buffer, "65536", "nonblock")[0] == "splice 0: 8192"
    buffer.raw(40)  # the partial page fills up: one more whole sub-buffer
    assert splice(buffer, "65536", "nonblock") == [
        "splice 0: 4096", "  page ts=set commit=4060 flags=-- first_id=0x1046"]


#: What FUSE cannot do the kernel's way (docs/readers.md), proven on our mount.
FUSE_SPLICES = [
    # The kernel waits for buffer_percent; a page-cache fill cannot wait
    # safely (readahead fills are not interruptible), so the splice ends with
    # EINTR at once, which tools retry (after select(), which does wait).
    ("a blocking splice does not wait", 0, ["65536"], ["splice 0: EINTR"]),
    # The kernel refuses a length below a sub-buffer (EINVAL); the page
    # cache hands out any length, the rest of the page to the next splice.
    ("a length below a page is accepted", 36, ["100", "nonblock", "repeat", "2"],
     ["splice 0: 100", "  tail 100 bytes", "splice 1: 100", "  tail 100 bytes"]),
]


@pytest.mark.parametrize("records, args, transcript", [c[1:] for c in FUSE_SPLICES],
                         ids=[c[0] for c in FUSE_SPLICES])
def test_splice_through_fuse(tracefs: Mount, c_client, records: int, args: list[str],  # type: ignore[no-untyped-def]
                             transcript: list[str]) -> None:
    buffer = Buffer(tracefs.path, c_client)
    if records:
        buffer.raw(records)
    assert splice(buffer, *args) == transcript


def test_splice_after_a_mapping_of_a_small_ring(tracefs: Mount, c_client) -> None:  # type: ignore[no-untyped-def]
    """A fault's read-around reaches past a small ring; a short answer would
    shrink the file to it (fuse_short_read) and splice() would see EOF there."""
    buffer = Buffer(tracefs.path, c_client)
    buffer.write("buffer_size_kb", "8")  # 3 sub-buffers: 16 KiB mapped with the meta page
    mapped = run([str(c_client("rb_mmap")), str(tracefs), "0", "10"])
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    buffer.write("buffer_size_kb", "100")
    buffer.raw(300)  # 8 whole sub-buffers
    assert splice(buffer, "65536", "nonblock")[0] == "splice 0: 32768"
    assert (tracefs / RAW).stat().st_size > 1 << 30


RUN = [sys.executable, "-m", "tracefs_fuse", "run", "--"]
_REPORTED = re.compile(r" *reader_marks-(\d+) +\[(\d{3})\] +[\d.]+: +raw_data: +# ([0-9a-f]+) ")


@pytest.mark.slow
def test_trace_cmd_record_splices_an_overflowing_buffer(tmp_path: Path, c_client) -> None:  # type: ignore[no-untyped-def]
    """trace-cmd's default record (select, then splice into a pipe; read()
    for the last partial pages) over a buffer that overflows: every record
    is either in trace.dat, once and in order, or counted as lost."""
    writers, count = 4, 2000
    marks = c_client("reader_marks")
    workload = " ".join(f"RM_CPU={i % 2} {marks} /sys/kernel/tracing raw {count} 1000 &"
                        for i in range(writers))
    # 8 KiB per CPU holds 12 of these records, and buffer_percent 100 makes
    # the recorder wake only when the ring is full: the writers lap it.
    script = ("echo 'u:rd_present u32 x' >> /sys/kernel/tracing/dynamic_events && "
              "echo 100 > /sys/kernel/tracing/buffer_percent && "
              f"trace-cmd record -b 8 -e user_events sh -c '{workload} wait'")
    for _ in range(3):  # until a run really overflowed
        record = subprocess.run([*RUN, "sh", "-c", script], cwd=tmp_path, capture_output=True,
                                text=True, timeout=300)
        assert record.returncode == 0, record.stdout + record.stderr
        lost = sum(int(n) for n in re.findall(r"CPU \d+: (\d+) events lost", record.stdout))
        if lost:
            break
    assert lost, "the buffer never overflowed"
    report = subprocess.run(["trace-cmd", "report"], cwd=tmp_path, capture_output=True,
                            encoding="latin-1", timeout=120)
    assert report.returncode == 0, report.stderr
    seen: dict[int, list[int]] = {}
    for pid, _cpu, ident in (m.groups() for m in map(_REPORTED.match, report.stdout.splitlines())
                             if m):
        seen.setdefault(int(pid), []).append(int(ident, 16))
    assert len(seen) == writers
    for ids in seen.values():
        assert ids == sorted(set(ids)) and ids[-1] < 0x1000 + count  # once each, in order
    assert sum(map(len, seen.values())) + lost == writers * count
    assert "EVENTS DROPPED" in report.stdout
