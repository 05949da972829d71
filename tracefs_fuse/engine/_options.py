"""``trace_options`` and ``options/``: the trace array's flags.

Rules:
  * The flags, their order and their defaults are those of this machine's
    6.18 kernel with only the ``nop`` tracer (tracer-private options such as
    ``blk_*`` are left out). ``trace_options`` lists them with ``no`` before
    the ones that are off; each has a file under ``options/`` reading 0 or 1.
  * Most flags change nothing we emulate and are only remembered; the ones
    that do are read live by their users (``irq-info`` and ``record-tgid`` by
    the text output, ``overwrite`` by the ring buffer, ``markers`` by the
    marker files, ``record-cmd`` by the saved comms).

Kernel: kernel/trace/trace.c (``trace_options[]``, ``trace_set_options``,
``trace_options_core_read/write``).
"""

from __future__ import annotations

import errno
from typing import Callable, Iterator

from ._errors import TracefsError
from ._field import KERNEL_SPACE
from ._kstrto import kstrtoul_from_user
from ._task import Task
from ._tree import PRIVATE_DIR_MODE, Dir, File, Node, text_file

#: ``TRACE_FLAGS`` in order, with the defaults ``trace_options`` showed here.
DEFAULT_OPTIONS: dict[str, bool] = {
    "print-parent": True, "sym-offset": False, "sym-addr": False, "verbose": False,
    "raw": False, "hex": False, "bin": False, "block": False, "fields": False,
    "trace_printk": True, "annotate": True, "userstacktrace": False, "sym-userobj": False,
    "printk-msg-only": False, "context-info": True, "latency-format": False,
    "record-cmd": True, "record-tgid": False, "overwrite": True, "disable_on_free": False,
    "irq-info": True, "markers": True, "event-fork": False, "trace_printk_dest": True,
    "copy_trace_marker": True, "pause-on-trace": False, "hash-ptr": True,
    "function-trace": True, "function-fork": False, "stacktrace": False,
}
#: ``trace_set_options`` copies at most 63 bytes.
_OPTION_WRITE_MAX = 64


class TraceOptions:
    """One trace array's option flags."""

    def __init__(self, on_change: Callable[[str, bool], None] = lambda name, value: None) -> None:
        self.values = dict(DEFAULT_OPTIONS)
        self._on_change = on_change

    def __getitem__(self, name: str) -> bool:
        return self.values[name]

    def set(self, name: str, value: bool) -> None:
        """Set one flag.

        Raises:
            TracefsError: EINVAL for an unknown flag.
        """
        if name not in self.values:
            raise TracefsError(errno.EINVAL, f"unknown trace option {name!r}")
        if self.values[name] != value:
            self.values[name] = value
            self._on_change(name, value)

    def render(self) -> str:
        return "".join(("" if on else "no") + f"{name}\n" for name, on in self.values.items())

    def write(self, data: bytes) -> int:
        """``tracing_trace_options_write``: ``name`` sets, ``noname`` clears."""
        if len(data) >= _OPTION_WRITE_MAX:
            raise TracefsError(errno.EINVAL, "option too long")
        text = data.split(b"\0", 1)[0].decode("latin-1").strip(KERNEL_SPACE)
        if text.startswith("no") and text[2:] in self.values:
            self.set(text[2:], False)
        else:
            self.set(text, True)
        return len(data)

    def file_read(self, name: str) -> Callable[[], str]:
        return lambda: f"{int(self.values[name])}\n"

    def file_write(self, name: str) -> Callable[[bytes, Task], int]:
        """``trace_options_core_write``: 0 or 1 only."""

        def write(data: bytes, task: Task) -> int:
            value = kstrtoul_from_user(data)
            if value not in (0, 1):
                raise TracefsError(errno.EINVAL, "option files take 0 or 1")
            self.set(name, bool(value))
            return len(data)

        return write

    def trace_options_node(self) -> File:
        return text_file("trace_options", self.render, lambda data, task: self.write(data))

    def options_dir(self) -> Dir:
        def entries() -> Iterator[Node]:
            # getdents lists the newest file first: the reverse of TRACE_FLAGS.
            for name in reversed(self.values):
                yield text_file(name, self.file_read(name), self.file_write(name))

        return Dir("options", entries, mode=PRIVATE_DIR_MODE)
