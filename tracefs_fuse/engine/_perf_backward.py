"""A ``write_backward`` ring: the one circular-mode readers (TracepointSession) map.

Rules:
  * The head starts at 0 and moves down by each record's size
    (``__perf_output_begin``: ``head -= size``); the record is written at
    the new head, upwards, so it lies whole before the previous one.
    ``data_head`` is that head as an unsigned long: 2^64 minus the bytes
    written.
  * A reader therefore walks forward from ``data_head`` (modulo the ring),
    newest record first, for at most one ring's worth of bytes; records are
    never split, so where the walk meets zeroed space or a record that was
    partly overwritten (size beyond what remains), the older ones are gone.
  * A read-only mapping overwrites. A writable one respects the reader's
    ``data_tail`` the other way round: space is ``CIRC_SPACE(tail, head)``
    (``ring_buffer_has_space`` with ``backward``).
  * The watermark counts bytes written, as forward (``head = -head`` before
    the check).
  * A backward event and a forward one never share a ring
    (``perf_event_set_output``: EINVAL).

Kernel: kernel/events/ring_buffer.c (``ring_buffer_has_space``,
``__perf_output_begin``, ``perf_output_begin_backward``),
kernel/events/core.c (``perf_event_set_output``, ``is_write_backward``).
"""

from __future__ import annotations

from ._perf_buffer import PerfBuffer


class BackwardBuffer(PerfBuffer):
    """A ring written from its end towards its start."""

    def _fits(self, size: int) -> bool:
        # CIRC_SPACE(tail, head, size) = (head - tail - 1) & (size - 1)
        return (self.head - self.tail - 1) % self.size >= size

    def _claim(self, size: int) -> int:
        self.head -= size
        return self.head
