"""The six benchmarks of issue 7, each recording into a :class:`Recorder`.

Rules:
  * Everything compared is measured in the same run, side by side: inside one
    repetition every target is measured once, back to back, in an order that
    rotates from one repetition to the next, so that no target always runs
    first or always follows the same neighbour.
  * Ratios pair the values of one repetition (see :mod:`._results`).
  * Counts that prove something (syscalls in the disabled loop, enable bits
    not yet set) are recorded like any figure, and the run goes on; the
    report shows them.
"""

from __future__ import annotations

import contextlib
import functools
import errno
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from tracefs_fuse.decode import Event, RecordDecoder, encode_lines, parse_format

from ._results import Recorder, count
from ._servers import (LIBFUSE_FLOOR, OURS, PYFUSE3_FLOOR, Binaries, Server, clear_trace,
                       mounted, run_client, write_file)

#: trace_marker_raw has no write_iter, so writev() is one write, and one
#: record, per iovec: 2 records per call, the first a bare 4-byte id.
KERNEL_WRITEV = "kernel trace_marker_raw, writev (2 records per call)"
KERNEL_WRITE = "kernel trace_marker_raw, write (1 record)"
WRITE_TARGETS = (OURS, PYFUSE3_FLOOR, LIBFUSE_FLOOR, KERNEL_WRITEV, KERNEL_WRITE)
WRITERS = (1, 2, 4)
#: Where clients and servers may run. On a VM, a wakeup that crosses CPUs can
#: cost tens of µs (a halted vCPU), so latencies differ by placement.
PLACEMENTS: tuple[tuple[str, set[int] | None], ...] = (
    ("unpinned", None), ("everything pinned to CPU 0", {0}))
#: Enough iterations that one stray syscall per million would show.
DISABLED_CHECKS = 10_000_000
ENABLED_CHECKS = 1_000
ENABLE_PROCESSES = (1, 10, 100)
ENABLE_ROUNDS = 50
REGISTER_COUNT = 10_000
#: Registering 10,000 events takes seconds with tracefs-fuse: fewer repeats.
REGISTER_REPEATS = 3
#: Benchmark 4's row for a second process registering the same events.
KNOWN_EVENT = "ioctl latency of a known event (a second process), median"
#: Fits one CPU's default buffer (1410 KiB) in both: nothing is overwritten.
READ_EVENTS = 20_000
#: Upper bound for filling the buffer; the fill stops at READ_EVENTS.
FILL_TIMEOUT_S = 60
#: The 4 KiB reads tracefs-fuse's drain makes: a ``bench_write`` event takes
#: 28 bytes of a sub-buffer's 4080 (8-byte common fields, 16-byte payload,
#: 4-byte event header). The floors are read as many times.
DRAIN_READS = -(-READ_EVENTS * 28 // 4080)
#: Rows of benchmark 5 for tracefs_fuse.decode: the drained pages decoded into
#: Event Structs, and then also written as JSON Lines (what run --record does).
DECODED = "decoded into Events (tracefs_fuse.decode), events"
DECODED_JSON = "decoded and encoded as JSON Lines, events"


class ServerCost(msgspec.Struct, frozen=True, kw_only=True):
    """What one write cost a FUSE server, on average over a run."""

    #: User + system time of the whole server process.
    cpu_us: float
    #: Context switches of the serving thread: it waited for a request...
    slept: float
    #: ... or was put off the CPU while runnable (e.g. by the writer it woke).
    preempted: float


def _rotated(items: Sequence[str], rep: int) -> list[str]:
    shift = rep % len(items)
    return [*items[shift:], *items[:shift]]


class Suite:
    def __init__(self, binaries: Binaries, workdir: Path, recorder: Recorder, *, repeats: int,
                 seconds: float, ours: Server, pyfuse3_floor: Server, libfuse_floor: Server,
                 kernel: Path) -> None:
        self.binaries = binaries
        self.workdir = workdir
        self.rec = recorder
        self.repeats = repeats
        self.seconds = seconds
        self.ours = ours
        self.servers = {OURS: ours, PYFUSE3_FLOOR: pyfuse3_floor, LIBFUSE_FLOOR: libfuse_floor}
        self.kernel = kernel
        self.all_cpus = os.sched_getaffinity(0)

    @contextlib.contextmanager
    def _placed(self, cpus: set[int] | None) -> Iterator[None]:
        """Pin every server to ``cpus`` (None: anywhere) for the duration."""
        for server in self.servers.values():
            server.pin(cpus or self.all_cpus)
        try:
            yield
        finally:
            for server in self.servers.values():
                server.pin(self.all_cpus)

    def _event_enable(self, event: str) -> Path:
        return self.ours.mountpoint / "events" / "user_events" / event / "enable"

    def write_run(self, target: str, writers: int, seconds: float, *, count: int = 0,
                  cpus: set[int] | None = None) -> tuple[float, ServerCost | None]:
        """``writers`` processes writing to ``target``: records/s, and the server's cost."""
        server = self.servers.get(target)
        if target == OURS:
            path, mode = self.ours.data_file, "register"
        elif server is not None:
            path, mode = server.data_file, "rawv"
        else:
            path = self.kernel / "trace_marker_raw"
            mode = "raw1" if target == KERNEL_WRITE else "rawv"
        before = (0.0, 0, 0)

        def before_go() -> None:
            nonlocal before
            if target == OURS:  # every writer has registered: the event exists
                write_file(self._event_enable("bench_write"), "1")
            if server is not None:
                before = server.usage()

        out = run_client(self.binaries, "write", path, writers, seconds, count, mode,
                         before_go=before_go, cpus=cpus)
        rate, writes = float(out["rate"][0]), int(out["writes"][0])
        if server is None:
            return rate, None
        if target == OURS:
            # The fast path stages records; the engine takes them in on the
            # next request (or at half the staging ring). Make it happen now,
            # so that their cost is in the figure.
            (self.ours.mountpoint / "per_cpu" / "cpu0" / "stats").read_bytes()
        cpu_s, slept, preempted = (a - b for a, b in zip(server.usage(), before))
        return rate, ServerCost(cpu_us=cpu_s / writes * 1e6, slept=slept / writes,
                                preempted=preempted / writes)

    # -- 1 -----------------------------------------------------------------------------

    def write_throughput(self) -> None:
        for placement, cpus in PLACEMENTS:
            group = f"1. Enabled-event write throughput, {placement}"
            costs = f"1. FUSE server cost per write, {placement}"
            with self._placed(cpus):
                for rep in range(self.repeats):
                    for writers in WRITERS:
                        column = count(writers, "writer", "writers")
                        for target in _rotated(WRITE_TARGETS, rep):
                            rate, cost = self.write_run(target, writers, self.seconds,
                                                        cpus=cpus)
                            self.rec.add(group, target, column, "writes/s", rate)
                            if cost is not None:
                                self.rec.add(costs, f"{target}: CPU", column, "µs",
                                             cost.cpu_us)
                                self.rec.add(costs, f"{target}: sleeps", column, "per write",
                                             cost.slept)
                                self.rec.add(costs, f"{target}: preemptions", column,
                                             "per write", cost.preempted)
            for writers in WRITERS:
                column = count(writers, "writer", "writers")
                for numerator, denominator in ((OURS, KERNEL_WRITE), (OURS, LIBFUSE_FLOOR),
                                               (OURS, PYFUSE3_FLOOR),
                                               (LIBFUSE_FLOOR, KERNEL_WRITE)):
                    self.rec.add_ratio(group, f"{numerator} ÷ {denominator}", column,
                                       (numerator, column), (denominator, column))

    # -- 2 -----------------------------------------------------------------------------

    def disabled_event(self) -> None:
        group = "2. Disabled event: system calls made by the client's check"
        trace = self.workdir / "loop.strace"
        cases = ((f"{DISABLED_CHECKS:,} checks, event disabled", DISABLED_CHECKS, "0"),
                 (f"{ENABLED_CHECKS:,} checks, event enabled (control)", ENABLED_CHECKS, "1"))
        for _ in range(self.repeats):
            for column, iterations, state in cases:
                out = run_client(
                    self.binaries, "loop", self.ours.data_file, iterations,
                    before_go=functools.partial(write_file, self._event_enable("bench_loop"),
                                                state),
                    wrapper=["strace", "-f", "-qq", "-o", str(trace)])
                self.rec.add(group, "system calls inside the loop", column, "syscalls",
                             _syscalls_between_markers(trace))
                self.rec.add(group, "records written", column, "writes",
                             int(out["writes"][0]))

    # -- 3 -----------------------------------------------------------------------------

    def enable_propagation(self) -> None:
        latency = "write(enable) latency, median"
        reference = "reference: a write to the libfuse floor, median"
        for placement, cpus in PLACEMENTS:
            group = f"3. Enable propagation with N registered processes, {placement}"
            with self._placed(cpus):
                for _ in range(self.repeats):
                    for n in ENABLE_PROCESSES:
                        column = count(n, "process", "processes")
                        out = run_client(self.binaries, "enable", self.ours.mountpoint, n,
                                         ENABLE_ROUNDS, self.servers[LIBFUSE_FLOOR].data_file,
                                         cpus=cpus)
                        self.rec.add(group, latency, column, "µs",
                                     statistics.median(map(int, out["enable_ns"])) / 1e3)
                        self.rec.add(group, "enable bits not yet flipped when write() returned",
                                     column, "bits", int(out["missed"][0]))
                        self.rec.add(group, reference, column, "µs",
                                     statistics.median(map(int, out["ref_ns"])) / 1e3)
            for n in ENABLE_PROCESSES:
                column = count(n, "process", "processes")
                self.rec.add_ratio(group, "enable write ÷ reference write", column,
                                   (latency, column), (reference, column))

    # -- 4 -----------------------------------------------------------------------------

    def register(self) -> None:
        for placement, cpus in PLACEMENTS:
            group = (f"4. Register {REGISTER_COUNT:,} events (DIAG_IOCSREG) from one process, "
                     f"{placement}")
            with self._placed(cpus):
                for rep in range(min(REGISTER_REPEATS, self.repeats)):
                    self._register_once(group, cpus, self.workdir / f"register-{rep}")
            for row in ("ioctl latency, median", "median of the first 1,000",
                        "median of the last 1,000", "registrations per second"):
                self.rec.add_ratio(group, row, "tracefs-fuse ÷ floor", (row, OURS),
                                   (row, LIBFUSE_FLOOR))

    # -- the goals of issue 12 ------------------------------------------------------------

    def goals(self) -> None:
        """Issue 12's goal table, from the figures above (each ratio pairs one
        repetition's values; the register step has fewer repetitions)."""
        group = "Issue 12 goals"
        pinned, unpinned = "everything pinned to CPU 0", "unpinned"
        if not self.rec.has(f"1. Enabled-event write throughput, {pinned}", OURS,
                            count(1, "writer", "writers")):
            return  # --only without benchmark 1
        one, four = count(1, "writer", "writers"), count(4, "writer", "writers")
        rec = self.rec

        def ratio(row: str, top: list[float], bottom: list[float]) -> None:
            for a, b in zip(top, bottom):
                rec.add(group, row, "tracefs-fuse", "×", a / b if b else float("nan"))

        writes = f"1. Enabled-event write throughput, {pinned}"
        ratio("enabled writes/s, 1 writer, pinned, ÷ C libfuse floor",
              rec.runs(writes, OURS, one), rec.runs(writes, LIBFUSE_FLOOR, one))
        spread = f"1. Enabled-event write throughput, {unpinned}"
        ratio("4 writers ÷ 1 writer, unpinned (ours)",
              rec.runs(spread, OURS, four), rec.runs(spread, OURS, one))
        ratio("(the C floor's: 4 writers ÷ 1 writer, unpinned)",
              rec.runs(spread, LIBFUSE_FLOOR, four), rec.runs(spread, LIBFUSE_FLOOR, one))
        costs = f"1. FUSE server cost per write, {pinned}"
        ratio("server CPU per write, pinned, ÷ C floor's",
              rec.runs(costs, f"{OURS}: CPU", one),
              rec.runs(costs, f"{LIBFUSE_FLOOR}: CPU", one))
        registers = (f"4. Register {REGISTER_COUNT:,} events (DIAG_IOCSREG) from one process, "
                     f"{pinned}")
        if not rec.has(registers, "ioctl latency, median", OURS):
            return  # --only without benchmark 4
        write_rt = [1e6 / rate for rate in rec.runs(writes, OURS, one)]
        ratio("DIAG_IOCSREG round trip of a new event ÷ one enabled write round trip (pinned)",
              rec.runs(registers, "ioctl latency, median", OURS), write_rt)
        ratio("DIAG_IOCSREG round trip of a known event ÷ one enabled write round trip "
              "(pinned; issue 21 goal ≤ 2×)", rec.runs(registers, KNOWN_EVENT, OURS), write_rt)

    def _register_once(self, group: str, cpus: set[int] | None, mountpoint: Path) -> None:
        rss: list[int] = []
        known: dict[str, list[str]] = {}

        def holding() -> None:
            rss.append(fresh.rss_bytes())
            # A second process registers the same events while the first holds
            # them: each is known (every process of a program does this).
            known.update(run_client(self.binaries, "register", fresh.data_file,
                                    REGISTER_COUNT, before_go=lambda: None, cpus=cpus))

        # A fresh daemon: the count starts at 0 and RSS is not the main mount's.
        with mounted(OURS, mountpoint, self.binaries) as fresh:
            fresh.pin(cpus or self.all_cpus)
            rss.append(fresh.rss_bytes())
            ours = run_client(self.binaries, "register", fresh.data_file, REGISTER_COUNT,
                              before_go=holding, cpus=cpus)
        self.rec.add(group, KNOWN_EVENT, OURS, "µs",
                     statistics.median(int(v) for v in known["ns"]) / 1e3)
        theirs = run_client(self.binaries, "register", self.servers[LIBFUSE_FLOOR].data_file,
                            REGISTER_COUNT, before_go=lambda: None, cpus=cpus)
        for column, out in ((OURS, ours), (LIBFUSE_FLOOR, theirs)):
            ns = [int(v) for v in out["ns"]]
            total_s = int(out["total_ns"][0]) / 1e9
            self.rec.add(group, "ioctl latency, median", column, "µs",
                         statistics.median(ns) / 1e3)
            self.rec.add(group, "ioctl latency, p99", column, "µs",
                         statistics.quantiles(ns, n=100)[98] / 1e3)
            self.rec.add(group, "median of the first 1,000", column, "µs",
                         statistics.median(ns[:1000]) / 1e3)
            self.rec.add(group, "median of the last 1,000", column, "µs",
                         statistics.median(ns[-1000:]) / 1e3)
            self.rec.add(group, "all of them", column, "s", total_s)
            self.rec.add(group, "registrations per second", column, "/s",
                         REGISTER_COUNT / total_s)
        self.rec.add(group, "daemon RSS, fresh mount", OURS, "MiB", rss[0] / 2**20)
        self.rec.add(group, "daemon RSS, holding the events", OURS, "MiB", rss[1] / 2**20)
        self.rec.add(group, "RSS per event", OURS, "KiB",
                     (rss[1] - rss[0]) / REGISTER_COUNT / 1024)

    # -- 5 -----------------------------------------------------------------------------

    def read_rates(self) -> None:
        """``trace`` and a ``trace_pipe_raw`` drain, ours against the kernel's.

        The floors serve a 4 KiB read at once: what a drain through FUSE can
        reach at best, one round trip per page (a ``trace_pipe_raw`` read
        returns at most one sub-buffer). Beside the rates, what the reading
        cost in CPU (the reader's, which holds the kernel's own work, plus
        the server's): it does not depend on what else the machine runs.
        """
        group = f"5. Reading {READ_EVENTS:,} events back (one CPU's buffer)"
        kernel = "kernel"
        floors = (LIBFUSE_FLOOR, PYFUSE3_FLOOR)
        text_cpu = "trace (text), bytes per CPU second"
        drain = "trace_pipe_raw drain"
        read_cpu = f"{drain}, server CPU per 4 KiB read"
        for rep in range(self.repeats):
            for target in _rotated((OURS, kernel, *floors), rep):
                server = self.servers.get(target)
                if target in floors:
                    before = server.cpu_ns()
                    raw = run_client(self.binaries, "drain", server.data_file, DRAIN_READS)
                    self.rec.add(group, read_cpu, target, "µs",
                                 (server.cpu_ns() - before) / int(raw["reads"][0]) / 1e3)
                    seconds = int(raw["ns"][0]) / 1e9
                    self.rec.add(group, f"{drain}, bytes", target, "MB/s",
                                 int(raw["bytes"][0]) / seconds / 1e6)
                    continue
                directory = self.ours.mountpoint if target == OURS else self.kernel
                clear_trace(directory)
                # Pinned, so that every record lands in CPU 0's buffer.
                self.write_run(OURS if target == OURS else KERNEL_WRITE, 1, FILL_TIMEOUT_S,
                               count=READ_EVENTS, cpus={0})
                # The server's CPU for each read-back (the kernel has none apart).
                served = [server.cpu_ns() if server else 0]
                text = run_client(self.binaries, "cat", directory / "trace")
                if int(text["lines"][0]) < READ_EVENTS:
                    raise RuntimeError(f"{target}: only {text['lines'][0]} lines in trace "
                                       f"after {READ_EVENTS} writes")
                served.append(server.cpu_ns() if server else 0)
                raw = run_client(self.binaries, "drain",
                                 directory / "per_cpu" / "cpu0" / "trace_pipe_raw")
                served.append(server.cpu_ns() if server else 0)
                for what, out in (("trace (text)", text), (drain, raw)):
                    seconds = int(out["ns"][0]) / 1e9
                    self.rec.add(group, f"{what}, bytes", target, "MB/s",
                                 int(out["bytes"][0]) / seconds / 1e6)
                    self.rec.add(group, f"{what}, events", target, "events/s",
                                 READ_EVENTS / seconds)
                self.rec.add(group, text_cpu, target, "MB/s", int(text["bytes"][0]) / 1e6 / (
                    (int(text["cpu_ns"][0]) + served[1] - served[0]) / 1e9))
                if server:
                    self.rec.add(group, read_cpu, target, "µs",
                                 (served[2] - served[1]) / int(raw["reads"][0]) / 1e3)
            self._decode_rates(group, rep)
        for row in ("trace (text), bytes", "trace (text), events", text_cpu,
                    f"{drain}, bytes", f"{drain}, events"):
            self.rec.add_ratio(group, row, "tracefs-fuse ÷ kernel", (row, OURS), (row, kernel))
        for row in (DECODED, DECODED_JSON):
            self.rec.add_ratio(group, row, "decoded ÷ raw drain", (row, OURS),
                               (f"{drain}, events", OURS))
        row = f"{drain}, bytes"
        self.rec.add_ratio(group, row, "libfuse floor ÷ kernel", (row, LIBFUSE_FLOOR),
                           (row, kernel))
        for floor in floors:
            self.rec.add_ratio(group, row, f"tracefs-fuse ÷ {floor}", (row, OURS), (row, floor))

    def _decode_rates(self, group: str, rep: int) -> None:
        """Our buffer filled again, drained in Python, its pages decoded (issue 14)."""
        directory = self.ours.mountpoint
        clear_trace(directory)
        self.write_run(OURS, 1, FILL_TIMEOUT_S, count=READ_EVENTS, cpus={0})
        pages = _drain_pages(directory / "per_cpu" / "cpu0" / "trace_pipe_raw")
        fmt = parse_format((directory / "events/user_events/bench_write/format").read_text(),
                           "user_events")
        decoder = RecordDecoder({fmt.id: fmt}.get)
        started = time.perf_counter()
        records = [r for page in pages for r in decoder.decode_page(0, page)]
        decoded = time.perf_counter()
        encode_lines(records)
        encoded = time.perf_counter()
        events = sum(isinstance(r, Event) for r in records)
        if events != READ_EVENTS:
            raise RuntimeError(f"decoded {events} of {READ_EVENTS} events (rep {rep})")
        self.rec.add(group, DECODED, OURS, "events/s", events / (decoded - started))
        self.rec.add(group, DECODED_JSON, OURS, "events/s", events / (encoded - started))

    # -- 6 -----------------------------------------------------------------------------

    def mount_ready(self) -> None:
        group = "6. Mount-ready time"
        stat_row = "spawn → first stat of user_events_data"
        fd_row = "spawn → \"ok\" on --ready-fd"
        for rep in range(self.repeats):
            for name in _rotated((OURS, PYFUSE3_FLOOR, LIBFUSE_FLOOR), rep):
                slug = name.replace(" ", "-")
                with mounted(name, self.workdir / f"mount-{slug}-{rep}",
                             self.binaries) as server:
                    self.rec.add(group, stat_row, name, "ms", server.ready_s * 1e3)
                    if server.ready_fd_s is not None:
                        self.rec.add(group, fd_row, name, "ms", server.ready_fd_s * 1e3)
        for floor in (PYFUSE3_FLOOR, LIBFUSE_FLOOR):
            self.rec.add_ratio(group, stat_row, f"tracefs-fuse ÷ {floor}", (stat_row, OURS),
                               (stat_row, floor))


def _syscalls_between_markers(trace: Path) -> int:
    """System calls strace saw between the client's two getppid() markers."""
    lines = trace.read_text().splitlines()
    markers = [i for i, line in enumerate(lines) if "getppid()" in line]
    if len(markers) != 2:
        raise RuntimeError(f"{trace}: expected 2 getppid() markers, found {len(markers)}")
    return markers[1] - markers[0] - 1


def _drain_pages(path: Path) -> list[bytes]:
    """Every sub-buffer ``trace_pipe_raw`` has now (read until EAGAIN)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    pages = []
    try:
        while True:
            try:
                pages.append(os.read(fd, 4096))
            except OSError as exc:
                if exc.errno != errno.EAGAIN:
                    raise
                return pages
    finally:
        os.close(fd)
