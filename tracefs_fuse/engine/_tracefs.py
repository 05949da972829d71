"""The facade: one emulated tracefs, every engine part wired together, and its tree.

Rules:
  * This is the only module that knows every part; each part knows only what
    it is handed. The adapter talks to :class:`Tracefs` and the nodes of
    :attr:`Tracefs.root`.
  * Everything here is synchronous and free of I/O: process memory and clocks
    are injected, records go to the ring buffers, and what the adapter must
    do afterwards is published as state it can poll cheaply
    (:attr:`Tracefs.generation`, :meth:`Tracefs.take_page_updates`).

Kernel: kernel/trace/trace.c (``tracer_init_tracefs``, ``init_tracer_tracefs``).
"""

from __future__ import annotations

from typing import Callable, Iterator

import msgspec

from ._auto_enable import AutoEnable
from ._buffer_files import BufferFiles, cmdline_entries
from ._clock import TraceClocks
from ._control_files import render_available_events, set_event_node, tracing_on_node
from ._dynamic_events import DynamicEvents
from ._events import FIRST_ID_UNKNOWN_HOST, EventTable
from ._error_log import ErrorLog, error_log_node
from ._events_dir import EventsDir
from ._ftrace_events import (TRACE_PRINT, TRACE_RAW_DATA, mark_raw_write, mark_write,
                             print_event, raw_data_event)
from ._legacy_abi import LegacyRegistration
from ._memory import EnableBits, ProcessMemory
from ._output import MARKER_SYMBOL, OutputOptions, TraceOutput
from ._readme import README
from ._page import HEADER_EVENT, render_header_page
from ._perf_events import PERF_DIR, PerfEvents, PerfRoot
from ._probes import KprobeEvents
from ._ringbuf import MmapUpdate, RingBuffer
from ._synth import SynthEvents
from ._status_page import STATUS_PAGE_SIZE, StatusMapping, StatusPage, user_events_status_node
from ._task import Task
from ._trace_array import SavedCmdlines, TraceArray
from ._tree import Dir, File, Mappable, Node, text_file
from ._uapi import Abi
from ._user_events import (DEFAULT_USER_EVENTS_MAX, UserEvent, UserEventRegistry,
                           UserEventsProvider)
from ._user_events_data import UserEventsData
from ._user_events_files import user_events_data_node

#: The ``--abi`` choices and the eras each accepts.
ABI_MODES: dict[str, frozenset[Abi]] = {
    "auto": frozenset(Abi),
    "5.18": frozenset({Abi.V5_18}),
    "6.1": frozenset({Abi.V6_1}),
    "mainline": frozenset({Abi.MAINLINE}),
}
#: tracefs' root directory mode (``TRACEFS_DEFAULT_MODE`` 0700).
ROOT_MODE = 0o700
#: Marker files are write-only for their owner and group (0220).
MARKER_MODE = 0o220


class PageUpdate(msgspec.Struct, frozen=True):
    """Bytes the adapter must push into clients' mappings of a file."""

    path: tuple[str, ...]
    offset: int
    data: bytes


class Tracefs:
    """One user-space tracefs.

    Args:
        nr_cpus: per-CPU ring buffers (``per_cpu/cpu0`` ..).
        memory: access to processes' memory for enable bits.
        bits: where enable bits are written (default: through ``memory``;
            see :class:`~._memory.EnableBits`).
        clocks: the trace clocks' time sources.
        abi: a key of :data:`ABI_MODES`.
        user_events_max: ``kernel.user_events_max``.
        buffer_size_kb: ring buffer size per CPU.
        marker_ip: the address ``trace_marker`` records as its ``ip`` (the
            host's ``tracing_mark_write``, so that tools that resolve it with
            the host's kallsyms print the kernel's name), or what finds it,
            asked once, when a record or a line first needs it: the host's
            kallsyms takes 15 ms to reach the symbol, which a ``run`` that
            writes no marker never needs to pay (issue 21).
        auto_enable: patterns of user events to enable as they are created
            (:class:`~._auto_enable.EnablePattern`; an option the kernel lacks).
        first_event_id: the first id of dynamic events (the adapter passes
            :func:`~._events.first_dynamic_id` of the host's highest).
    """

    def __init__(self, *, nr_cpus: int, memory: ProcessMemory, clocks: TraceClocks,
                 bits: EnableBits | None = None, abi: str = "auto",
                 user_events_max: int = DEFAULT_USER_EVENTS_MAX,
                 buffer_size_kb: int = 1410, marker_ip: int | Callable[[], int] = 0,
                 auto_enable: tuple[str, ...] = (),
                 first_event_id: int = FIRST_ID_UNKNOWN_HOST) -> None:
        self.nr_cpus = nr_cpus
        self.clocks = clocks
        self._page_updates: list[PageUpdate] = []
        self._marker_ip = marker_ip
        self.events = EventTable(first_event_id)
        self.events.add(print_event(), fixed_id=TRACE_PRINT)
        self.events.add(raw_data_event(), fixed_id=TRACE_RAW_DATA)
        self.cmdlines = SavedCmdlines()
        self.buffer = RingBuffer(nr_cpus, clocks.default, trace_buf_size=buffer_size_kb * 1024)
        self.top = TraceArray(self.events, self.buffer, self.cmdlines, nr_cpus)
        self.output = TraceOutput(
            self.top, nr_cpus=nr_cpus, ksym=self._marker_symbol,
            options=lambda: OutputOptions(irq_info=self.top.options["irq-info"],
                                          record_tgid=self.top.options["record-tgid"]),
            buffer_percent=lambda: self.buffer_files.buffer_percent)
        self.buffer_files = BufferFiles(self.top, self.buffer, clocks, self.output, nr_cpus,
                                        self._publish_mmap)
        self.dynamic_events = DynamicEvents(on_release=self.top.reset_if_cleared)
        self.error_log = ErrorLog(now=clocks["local"].read)
        self.synth_events = SynthEvents(self.events, self.dynamic_events, self.error_log)
        self.kprobe_events = KprobeEvents(self.error_log)
        # dyn_event_ops_list order: synth and kprobe (core_initcall, in link
        # order), then user_events (fs_initcall).
        self.dynamic_events.providers += [self.synth_events, self.kprobe_events]
        self.abis = ABI_MODES[abi]
        #: The page mapped from user_events_status (None when pinned to mainline).
        self.status_page = (StatusPage(self.abis)
                            if any(era.has_status_page for era in self.abis) else None)
        self._status_version = 0
        self.auto_enable = AutoEnable(self.top, auto_enable)
        self.registry = UserEventRegistry(
            self.events, memory, bits=bits, status_page=self.status_page, max_events=user_events_max,
            era=next(iter(self.abis)) if len(self.abis) == 1 else None,
            on_created=self._user_event_created, on_destroyed=self.dynamic_events.remove)
        self.dynamic_events.providers.append(UserEventsProvider(self.registry))
        legacy = (LegacyRegistration(self.registry)
                  if self.status_page is not None else None)
        self.user_events_data = UserEventsData(self.registry, self.abis, legacy)
        self.events_dir = EventsDir(
            self.events, self.top,
            header_page=lambda: render_header_page(self.buffer.subbuf_size).decode("latin-1"),
            header_event=HEADER_EVENT.decode("latin-1"))
        self.perf = PerfEvents(clocks, self._publish_perf, self.top.enable_listeners)
        self.root = PerfRoot(self._root_entries, self.perf.node(), ROOT_MODE)

    def _user_event_created(self, event: UserEvent) -> None:
        self.dynamic_events.add(event)
        self.auto_enable.created(event)

    # -- what the adapter polls ---------------------------------------------------------

    @property
    def marker_ip(self) -> int:
        """``trace_marker``'s ``ip`` (found on first use when given as a callable)."""
        if callable(self._marker_ip):
            self._marker_ip = self._marker_ip()
        return self._marker_ip

    def _marker_symbol(self, ip: int) -> str | None:
        return MARKER_SYMBOL if ip == self.marker_ip else None

    @property
    def generation(self) -> int:
        """Moves whenever a record lands in a buffer (blocked readers may go on)."""
        return self.top.generation + self.perf.generation

    def _publish_mmap(self, path: tuple[str, ...], update: MmapUpdate) -> None:
        self._page_updates.extend(PageUpdate(path, offset, data)
                                  for offset, data in update.stores)

    def _publish_perf(self, path: tuple[str, ...], offset: int, data: bytes) -> None:
        self._page_updates.append(PageUpdate(path, offset, data))

    def take_page_updates(self) -> list[PageUpdate]:
        updates, self._page_updates = self._page_updates, []
        page = self.status_page
        if page is not None and page.version != self._status_version:
            self._status_version = page.version
            updates.append(PageUpdate(("user_events_status",), 0,
                                      page.mmap_read(0, STATUS_PAGE_SIZE)))
        return updates

    # -- the tree --------------------------------------------------------------------------

    def _root_entries(self) -> Iterator[Node]:
        # Roughly tracefs' getdents order: newest files first.
        tr = self.top
        yield from cmdline_entries(self.cmdlines)
        yield text_file("README", lambda: README)
        yield error_log_node(self.error_log)
        yield from self.buffer_files.top_entries()
        yield tracing_on_node(tr)
        yield text_file("trace_marker_raw", None, self._mark_raw_write, mode=MARKER_MODE)
        yield text_file("trace_marker", None, self._mark_write, mode=MARKER_MODE)
        yield tr.options.trace_options_node()
        yield tr.options.options_dir()
        yield self.events_dir.node()
        yield self.synth_events.node()
        yield self.kprobe_events.node()
        yield set_event_node(tr)
        yield text_file("dynamic_events", self.dynamic_events.render, self.dynamic_events.write,
                        on_truncate=self.dynamic_events.release_all)
        yield text_file("available_events", lambda: render_available_events(self.events))
        yield text_file("printk_formats", lambda: "")  # no trace_printk() in user space
        yield user_events_status_node(self.registry, self.status_page)
        yield user_events_data_node(self.user_events_data)

    def _mark_write(self, data: bytes, task: Task) -> int:
        return mark_write(self.top, data, task, self.marker_ip)

    def _mark_raw_write(self, data: bytes, task: Task) -> int:
        return mark_raw_write(self.top, data, task)

    def mappable(self, path: tuple[str, ...]) -> Mappable | None:
        """The mmap side of the file at ``path``, if clients can map it."""
        if len(path) == 3 and path[0] == "per_cpu" and path[2] == "trace_pipe_raw":
            cpu = path[1].removeprefix("cpu")
            if cpu.isdigit() and int(cpu) < self.nr_cpus:
                return self.buffer_files.mapping(int(cpu))
        if len(path) == 2 and path[0] == PERF_DIR:
            return self.perf.by_path(path[1])
        if path == ("user_events_status",) and self.status_page is not None:
            return StatusMapping(self.status_page)
        return None

    def lookup(self, path: str) -> Node | None:
        """The node at a ``/``-separated path, for tests and tools."""
        node: Node = self.root
        for name in filter(None, path.split("/")):
            if not isinstance(node, Dir):
                return None
            child = node.lookup(name)
            if child is None:
                return None
            node = child
        return node

    def file(self, path: str) -> File:
        node = self.lookup(path)
        assert isinstance(node, File), path
        return node
