"""``/proc/<pid>/stat``: one line split the way the kernel writes it.

Rules:
  * Field 2 (comm) is printed in parentheses and may itself hold spaces and
    ``)``; the kernel prints nothing after it that holds ``)``, so it ends at
    the line's last ``)``. Every other field is a number, separated by one space.
  * Fields are numbered from 1 as proc(5) numbers them; :func:`field` turns
    that number into an index into :func:`split_stat`'s list.

Kernel: fs/proc/array.c ``do_task_stat``.
"""

from __future__ import annotations


def field(number: int) -> int:
    """The index of proc(5)'s field ``number`` (3 or more) in :func:`split_stat`'s fields."""
    return number - 3


def split_stat(data: bytes, last: int | None = None) -> tuple[int, bytes, list[bytes]]:
    """(pid, comm, fields from 3 on) of one stat line.

    With ``last``, the line is split only as far as field ``last`` (what follows
    stays in one piece): a caller that needs an early field saves the rest.
    """
    close = data.rindex(b")")
    tail = data[close + 2:]
    fields = tail.split() if last is None else tail.split(b" ", field(last) + 1)
    return int(data[:data.index(b" ")]), data[data.index(b"(") + 1:close], fields
