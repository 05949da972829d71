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
        elif code == 0x25:
            pc += jt if a > k else jf
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
    ("a stranger whose tgid word sorts among ours execs", exec_(4241), False),
    ("a holder exits (pidfds tell)", message(PROC_EVENT_EXIT, struct.pack("=ii", 100, 100)),
     False),
    ("a holder renames itself", message(PROC_EVENT_COMM, struct.pack("=ii", 100, 100)), False),
]


@pytest.mark.parametrize(("packet", "passes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_filter_passes_acks_and_our_processes_forks_and_execs(packet: bytes,
                                                                   passes: bool) -> None:
    assert bool(run(program(HOLDERS), packet)) == passes


@pytest.mark.parametrize("count", [1, 8, 9, 100, MAX_PIDS])
def test_the_search_finds_exactly_its_pids_in_few_steps(count: int) -> None:
    holders = set(range(1000, 1000 + 3 * count, 3))
    insns = program(holders)
    assert len(encode(insns)) == 8 * len(insns) <= 8 * 4096  # BPF_MAXINSNS
    for pid in [*range(990, 1000 + 3 * count + 3), 2**31 - 1, 1 << 24]:
        assert bool(run(insns, fork(pid, 9))) == (pid in holders), pid
        assert bool(run(insns, exec_(pid))) == (pid in holders), pid


def test_beyond_the_bound_or_unbounded_every_fork_and_exec_passes() -> None:
    too_many = set(range(1, MAX_PIDS + 2))
    assert run(program(too_many), fork(10**6, 9))
    assert run(program(None), exec_(2))
    assert not run(program(None), fork(1, 9, thread=10))  # threads never
