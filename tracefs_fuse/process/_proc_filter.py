"""A classic BPF socket filter for the process connector: only our clients' events wake us.

The connector multicasts every fork, exec, exit, uid, gid, sid, ptrace, comm
and coredump on the machine. A filter attached to the socket
(``SO_ATTACH_FILTER``, :meth:`ProcConnector.set_filter`) runs in
``do_one_broadcast`` (net/netlink/af_netlink.c: ``sk_filter``) before the
message is queued, so a dropped event costs a few instructions in the forking
task and never wakes the daemon.

What passes (the rest is dropped):
  * ``PROC_EVENT_NONE``: acks (our LISTEN's among them).
  * ``PROC_EVENT_FORK`` of a new process (``child_pid == child_tgid``; a new
    thread reports its process's parent, never its creator) whose
    ``parent_tgid`` is one of ``pids``.
  * ``PROC_EVENT_EXEC`` whose ``process_tgid`` is one of ``pids``.
``pids`` given as None passes every fork and exec; so does a set larger
than ``MAX_PIDS`` (a binary search of compares, bounded in length).

Why not the 6.6+ event-type filter of ``PROC_CN_MCAST_LISTEN`` (``struct
proc_input``, drivers/connector/cn_proc.c ``cn_filter``): it selects kinds
only, so every fork still wakes us, and older kernels ignore an 8-byte
LISTEN. A socket filter works since 2.6.15 and selects by pid too.

Offsets: ``sk_filter`` sees the datagram from its ``nlmsghdr`` (16 bytes),
then ``cn_msg`` (20), then ``proc_event``. Absolute word loads read in network
byte order (``bpf_internal_load_pointer`` + ``get_unaligned_be32``), so every
host-order constant is compared byte-swapped.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Collection
from typing import NamedTuple

from ._proc_events import PROC_EVENT_EXEC, PROC_EVENT_FORK, PROC_EVENT_NONE

#: Pids the search holds before every fork and exec passes: at most 3,337
#: instructions (include/uapi/linux/filter.h BPF_MAXINSNS is 4096; the
#: program is charged to net.core.optmem_max, refused with ENOMEM beyond
#: it: then too everything passes), and 4 compares per halving a message.
MAX_PIDS = 2048

# include/uapi/linux/bpf_common.h, filter.h
_BPF_LD_W_ABS = 0x00 | 0x00 | 0x20   # BPF_LD | BPF_W | BPF_ABS
_BPF_JEQ_K = 0x05 | 0x10 | 0x00      # BPF_JMP | BPF_JEQ | BPF_K
_BPF_JEQ_X = 0x05 | 0x10 | 0x08      # BPF_JMP | BPF_JEQ | BPF_X
_BPF_JGT_K = 0x05 | 0x20 | 0x00      # BPF_JMP | BPF_JGT | BPF_K
_BPF_JA = 0x05 | 0x00                # BPF_JMP | BPF_JA
_BPF_RET_K = 0x06 | 0x00             # BPF_RET | BPF_K
_BPF_TAX = 0x07 | 0x00               # BPF_MISC | BPF_TAX
#: A return value is the number of bytes kept; 0 drops.
_ACCEPT = 0xFFFFFFFF
_DROP = 0

# Offsets in the datagram: nlmsghdr (16) + cn_msg (20) = 36 = proc_event.
#: struct proc_event { enum proc_cn_event what; __u32 cpu; __u64 timestamp_ns;
#:                     union { ... } event_data; }  -- event_data at 16.
_WHAT = 36
#: struct fork_proc_event { parent_pid; parent_tgid; child_pid; child_tgid; }
#: struct exec_proc_event { process_pid; process_tgid; }
#: parent_tgid and process_tgid: the second word of either.
_TGID = 36 + 16 + 4
_FORK_CHILD_PID = 36 + 16 + 8
_FORK_CHILD_TGID = 36 + 16 + 12
#: Keys a leaf of the search compares one by one.
_LEAF = 8

#: struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; };
_SOCK_FILTER = struct.Struct("=HBBI")


class Insn(NamedTuple):
    code: int
    jt: int
    jf: int
    k: int


def _be(value: int) -> int:
    """A host-order word as an absolute load sees it."""
    return int.from_bytes((value & 0xFFFFFFFF).to_bytes(4, sys.byteorder), "big")


def _one_of(pids: Collection[int] | None) -> list[Insn]:
    """Accept if the loaded word is one of ``pids``, else drop."""
    if pids is None or len(pids) > MAX_PIDS:
        return [Insn(_BPF_RET_K, 0, 0, _ACCEPT)]
    return _search(sorted(_be(pid) for pid in pids))


def _search(keys: list[int]) -> list[Insn]:
    """A binary search over sorted ``keys``: a few compares per message
    however many pids, every branch short (``ja`` carries the long ones)."""
    if len(keys) <= _LEAF:
        # compare i jumps n - i ahead: past the rest and the drop, to the accept
        return [*(Insn(_BPF_JEQ_K, len(keys) - i, 0, key) for i, key in enumerate(keys)),
                Insn(_BPF_RET_K, 0, 0, _DROP), Insn(_BPF_RET_K, 0, 0, _ACCEPT)]
    mid = len(keys) // 2
    below, above = _search(keys[:mid]), _search(keys[mid + 1:])
    return [Insn(_BPF_JEQ_K, 0, 1, keys[mid]), Insn(_BPF_RET_K, 0, 0, _ACCEPT),
            Insn(_BPF_JGT_K, 0, 1, keys[mid]), Insn(_BPF_JA, 0, 0, len(below)),
            *below, *above]


def program(pids: Collection[int] | None) -> list[Insn]:
    """The filter passing acks, and forks by and execs of ``pids``.

    ``parent_tgid`` of a fork and ``process_tgid`` of an exec sit at the
    same offset, so one search serves both.
    """
    return [Insn(_BPF_LD_W_ABS, 0, 0, _WHAT),
            Insn(_BPF_JEQ_K, 0, 1, _be(PROC_EVENT_NONE)), Insn(_BPF_RET_K, 0, 0, _ACCEPT),
            Insn(_BPF_JEQ_K, 7, 0, _be(PROC_EVENT_EXEC)),
            Insn(_BPF_JEQ_K, 1, 0, _be(PROC_EVENT_FORK)), Insn(_BPF_RET_K, 0, 0, _DROP),
            Insn(_BPF_LD_W_ABS, 0, 0, _FORK_CHILD_PID), Insn(_BPF_TAX, 0, 0, 0),
            Insn(_BPF_LD_W_ABS, 0, 0, _FORK_CHILD_TGID),
            Insn(_BPF_JEQ_X, 1, 0, 0), Insn(_BPF_RET_K, 0, 0, _DROP),  # a thread
            Insn(_BPF_LD_W_ABS, 0, 0, _TGID), *_one_of(pids)]


def encode(insns: list[Insn]) -> bytes:
    """The program as the ``struct sock_filter`` array ``SO_ATTACH_FILTER`` takes."""
    return b"".join(_SOCK_FILTER.pack(*insn) for insn in insns)
