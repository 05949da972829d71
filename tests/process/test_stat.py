"""``/proc/<pid>/stat`` split as the kernel writes it (fs/proc/array.c do_task_stat)."""

from __future__ import annotations

import os

import pytest

from tracefs_fuse.process._stat import field, split_stat

# 52 fields in all; field 39 (processor) is 1 in every line below.
TAIL = b" ".join([b"S", b"1"] + [b"0"] * 34 + [b"1"] + [b"0"] * 13) + b"\n"


@pytest.mark.parametrize(("line", "pid", "comm"), [
    (b"42 (cat) " + TAIL, 42, b"cat"),
    (b"7 (a b) " + TAIL, 7, b"a b"),
    (b"9 (x) (y)) " + TAIL, 9, b"x) (y)"),
    (b"3 () " + TAIL, 3, b""),
])
def test_comm_ends_at_the_last_parenthesis(line: bytes, pid: int, comm: bytes) -> None:
    got_pid, got_comm, fields = split_stat(line)
    assert (got_pid, got_comm) == (pid, comm)
    assert len(fields) == 50
    assert fields[field(3)] == b"S" and fields[field(4)] == b"1" and fields[field(39)] == b"1"


def test_split_as_far_as_a_field_keeps_the_rest_whole() -> None:
    _, _, fields = split_stat(b"5 (w) " + TAIL, 39)
    assert fields[field(39)] == b"1"
    assert len(fields) == field(39) + 2
    assert fields[-1].endswith(b"\n")


def test_our_own_line() -> None:
    with open("/proc/self/stat", "rb") as f:
        pid, comm, fields = split_stat(f.read())
    assert pid == os.getpid()
    assert comm
    assert int(fields[field(4)]) == os.getppid()
