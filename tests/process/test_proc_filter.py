"""The process connector's socket filter: what it passes, run as the kernel runs it.

``run`` is a classic BPF interpreter for the opcodes the filter uses
(net/core/filter.c semantics: absolute word loads in network byte order,
jumps relative to the next instruction); the messages are built as
``send_msg`` in cn_proc.c builds them.
"""

from __future__ import annotations

import struct

import pytest

from tests.process.test_proc_events import message
from tracefs_fuse.process._proc_events import (
    PROC_EVENT_EXEC,
    PROC_EVENT_EXIT,
    PROC_EVENT_FORK,
    PROC_EVENT_NONE,
)
from tracefs_fuse.process._proc_filter import MAX_PIDS, Insn, encode, program

PROC_EVENT_COMM = 0x200


def run(insns: list[Insn], packet: bytes) -> int:
    a = x = pc = 0
    for _ in range(len(insns) + 1):  # forward jumps only: at most one pass
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:
            a = struct.unpack_from(">I", packet, k)[0]
        elif code == 0x07:
            x = a
        elif code == 0x15:
            pc += jt if a == k else jf
        elif code == 0x1D:
            pc += jt if a == x else jf
        elif code == 0x05:
            pc += k
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"opcode {code:#x} not interpreted")
    raise AssertionError("ran off the program")


def fork(parent: int, child: int, thread: int | None = None) -> bytes:
    return message(PROC_EVENT_FORK,
                   struct.pack("=iiii", parent, parent, thread or child, child))


def exec_(pid: int) -> bytes:
    return message(PROC_EVENT_EXEC, struct.pack("=ii", pid, pid))


HOLDERS = {100, 4242, 70000}

CASES = [
    ("our ack (or anyone's)", message(PROC_EVENT_NONE, struct.pack("=I", 0), ack=7), True),
    ("a holder forks", fork(4242, 5000), True),
    ("a holder with a large pid forks", fork(70000, 70001), True),
    ("a stranger forks", fork(4243, 5001), False),
    ("a holder's thread is made", fork(100, 101, thread=5002), False),
    ("a holder execs", exec_(100), True),
    ("a stranger execs", exec_(101), False),
    ("a holder exits (pidfds tell)", message(PROC_EVENT_EXIT, struct.pack("=ii", 100, 100)),
     False),
    ("a holder renames itself", message(PROC_EVENT_COMM, struct.pack("=ii", 100, 100)), False),
]


@pytest.mark.parametrize(("packet", "passes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_filter_passes_acks_and_our_processes_forks_and_execs(packet: bytes,
                                                                   passes: bool) -> None:
    assert bool(run(program(HOLDERS, HOLDERS), packet)) == passes


def test_long_sets_span_blocks_of_short_jumps() -> None:
    holders = set(range(1000, 1000 + MAX_PIDS))
    insns = program(holders, set())
    assert all(insn.jt <= 255 and insn.jf <= 255 for insn in insns)
    assert len(encode(insns)) == 8 * len(insns) <= 8 * 4096  # BPF_MAXINSNS
    for pid in (999, 1000, 1249, 1250, 1251, 1000 + MAX_PIDS - 1, 1000 + MAX_PIDS):
        assert bool(run(insns, fork(pid, 9))) == (pid in holders), pid
    assert not run(insns, exec_(1000))


def test_beyond_the_bound_or_unbounded_a_kind_passes_whole() -> None:
    too_many = set(range(1, MAX_PIDS + 2))
    assert run(program(too_many, {1}), fork(10**6, 9))
    assert not run(program(too_many, {1}), exec_(2))
    assert run(program({1}, None), exec_(2))
    assert not run(program(None, None), fork(1, 9, thread=10))  # threads never
