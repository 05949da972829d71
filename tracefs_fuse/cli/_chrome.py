"""A recording as Chrome's Trace Event Format: ``show --format chrome FILE``.

The JSON that Perfetto (ui.perfetto.dev) and ``chrome://tracing`` open: one
object, ``{"traceEvents": [...], "displayTimeUnit": "ns"}``.

Rules:
  * Every event is an instant event (``"ph": "i"``, thread scope) twice: on
    its thread's track (``pid`` the process when the recording knows it, else
    the thread; ``tid`` the thread) and on its CPU's track, so both views
    line up on one time axis.
  * CPU tracks belong to one made-up process, numbered :data:`CPU_PROCESS`
    (``PID_MAX_LIMIT``, above every real pid); CPU N is its thread
    ``CPU_PROCESS + 1 + N`` (viewers take thread ids as unique across
    processes). Metadata events (``"ph": "M"``) name the tracks.
  * ``name`` is what ``show`` prints (``Provider:EventName`` for EventHeader
    events, else ``system:name``), ``cat`` the system, ``ts`` microseconds
    (the format's unit; the nanoseconds are kept as fractions), ``args`` the
    fields; an event that could not be decoded adds its ``error``.
  * Lost events are instant events named ``lost events`` on their CPU's
    track, with ``count`` when the page said.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..decode import Event, Lost, Record

#: include/linux/threads.h PID_MAX_LIMIT (4 * 1024 * 1024 on 64-bit): no pid reaches it.
CPU_PROCESS = 4 * 1024 * 1024


def _microseconds(timestamp: int) -> float:
    return timestamp / 1000


def event_name(event: Event) -> str:
    info = event.eventheader
    if info is not None and info.event is not None:
        return f"{info.provider}:{info.event}"
    return event.full_name


def _cpu_thread(cpu: int) -> int:
    return CPU_PROCESS + 1 + cpu


def _metadata(name: str, pid: int, tid: int, value: str) -> dict[str, Any]:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": value}}


def chrome_trace(records: Iterable[Record]) -> dict[str, Any]:
    """The Trace Event Format object for ``records`` (in recording order)."""
    events: list[dict[str, Any]] = []
    cpus: set[int] = set()
    threads: dict[tuple[int, int], str | None] = {}
    for record in records:
        cpus.add(record.cpu)
        ts = _microseconds(record.timestamp)
        if isinstance(record, Lost):
            lost: dict[str, object] = {} if record.count is None else {"count": record.count}
            events.append({"name": "lost events", "cat": "tracefs-fuse", "ph": "i", "s": "t",
                           "ts": ts, "pid": CPU_PROCESS, "tid": _cpu_thread(record.cpu),
                           "args": lost})
            continue
        args = dict(record.fields)
        if record.error is not None:
            args["error"] = record.error
        process = record.tgid if record.tgid is not None else record.pid
        key = (process, record.pid)
        if threads.get(key) is None:
            threads[key] = record.comm
        common = {"name": event_name(record), "cat": record.system, "ph": "i", "s": "t",
                  "ts": ts, "args": args}
        events.append({**common, "pid": process, "tid": record.pid})
        events.append({**common, "pid": CPU_PROCESS, "tid": _cpu_thread(record.cpu)})
    metadata = [_metadata("process_name", CPU_PROCESS, _cpu_thread(0), "CPUs")]
    metadata += [_metadata("thread_name", CPU_PROCESS, _cpu_thread(cpu), f"CPU {cpu}")
                 for cpu in sorted(cpus)]
    metadata += [_metadata("thread_name", pid, tid, f"{comm or '<...>'}-{tid}")
                 for (pid, tid), comm in sorted(threads.items())]
    return {"traceEvents": metadata + events, "displayTimeUnit": "ns"}
