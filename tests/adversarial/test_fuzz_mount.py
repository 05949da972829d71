"""Fuzzing user_events_data through a real mount (``tests/clients/adv_fuzz.c``).

Each seed is a deterministic run of registrations, unregistrations,
deletions, writes, unknown ioctls, reads, reopens and forked children; the
client reports what each class of input got, and every class is held to
what the kernel answers it (kernel/trace/trace_events_user.c:
``user_reg_get``, ``user_events_ioctl_reg/_unreg/_del``,
``user_events_write_core``). Then: the daemon is alive, serves others, logged
no error, and once the fuzzer's processes are gone every event can be
deleted (nothing leaked a reference).

Budget: ``TFUSE_FUZZ_SCALE`` seeds (1 in ``make test``; ``make fuzz`` sets
more) from ``TFUSE_FUZZ_SEED`` (default 1), OPS operations each.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

from ..integration.conftest import Mount
from .conftest import assert_serves, fuzz_budget, fuzz_report

pytestmark = pytest.mark.uses_fuse

OPS = 3000
#: Files the fuzzer reads (with random sizes and offsets) between the rest.
READ_FILES = ["tracing_on", "trace", "user_events_status", "dynamic_events", "available_events",
              "per_cpu/cpu0/trace_pipe_raw", "per_cpu/cpu0/stats", "events/enable",
              "error_log", "buffer_size_kb"]

#: Registration errors that come after the struct checks: the name
#: (strndup_user), the command (user_event_parse_cmd: EINVAL, EADDRINUSE for a
#: name registered with other fields, EMFILE past user_events_max).
_AFTER_STRUCT = {"EINVAL", "EADDRINUSE", "EMFILE"}
_BAD_NAME = {"EFAULT", "EADDRINUSE"}  # the address/bit check precedes the name
_DELETE = {"0", "ENOENT", "EBUSY"}
_WRITE = {"0", "EINVAL", "ENOENT", "EBADF", "EFAULT"}

#: (operation, input class) -> the outcomes the kernel can give it.
KERNEL: dict[tuple[str, str], set[str]] = {
    ("reg", "reg"): {"0", "EINVAL", "EADDRINUSE"},
    ("reg", "reg_size_small"): {"EINVAL"},
    ("reg", "reg_size_big"): {"E2BIG"},
    ("reg", "reg_trailing"): {"E2BIG"},  # copy_struct_from_user: non-zero bytes past the struct
    ("reg", "reg_flags"): {"EINVAL"},
    ("reg", "reg_enable_size"): {"EINVAL"},
    ("reg", "reg_unaligned"): {"EINVAL"},
    ("reg", "reg_bit"): {"EINVAL"},
    ("reg", "reg_struct_unmapped"): {"EFAULT"},
    ("reg", "reg_struct_straddles"): {"EFAULT", "EINVAL", "E2BIG"},  # as its size says
    # The 6.1 and 5.18 structs (--abi auto): their own rules, tested elsewhere.
    ("reg", "reg_old_abi"): {"0", "EFAULT", "ENOMEM"} | _AFTER_STRUCT,
    ("reg", "addr_kernel"): {"EFAULT"},  # access_ok
    # The first write of the bit fails: ENOMEM (user_event_enabler_create).
    ("reg", "addr_unmapped"): {"ENOMEM", "EFAULT"} | _AFTER_STRUCT,
    ("reg", "addr_none"): {"ENOMEM", "EFAULT"} | _AFTER_STRUCT,
    ("reg", "addr_readonly"): {"ENOMEM", "EFAULT"} | _AFTER_STRUCT,
    ("reg", "addr_null"): {"ENOMEM", "EFAULT"} | _AFTER_STRUCT,
    ("reg", "name_unmapped"): _BAD_NAME,
    ("reg", "name_null"): _BAD_NAME,
    ("reg", "name_unterminated"): _BAD_NAME,
    ("reg", "name_long"): {"0"} | _AFTER_STRUCT,  # strndup_user: EINVAL past 511
    ("reg", "name_bytes"): {"0"} | _AFTER_STRUCT,
    ("reg", "name_readonly"): {"0"} | _AFTER_STRUCT,
    ("unreg", "unreg"): {"0", "ENOENT"},
    ("unreg", "unreg_known"): {"0", "ENOENT"},
    ("unreg", "unreg_reserved"): {"EINVAL"},
    ("unreg", "unreg_size_small"): {"EINVAL"},
    ("unreg", "unreg_size_big"): {"E2BIG"},
    ("unreg", "unreg_struct_unmapped"): {"EFAULT"},
    ("del", "name"): _DELETE,
    ("del", "name_bytes"): _DELETE,
    ("del", "name_readonly"): _DELETE,
    ("del", "name_long"): _DELETE | {"EINVAL"},
    ("del", "name_unmapped"): {"EFAULT"},
    ("del", "name_null"): {"EFAULT"},
    ("del", "name_unterminated"): {"EFAULT"},
    ("write", "write"): _WRITE,
    ("write", "write_short_index"): _WRITE,  # the index may come from the next iovecs
    ("write", "write_index_unmapped"): {"EFAULT"},
    ("ioctl", "unknown"): {"ENOTTY"},
    ("fork", "child"): {"0"},
    ("read", "file"): {"0", "EAGAIN", "EINVAL", "ESPIPE", "EBUSY", "ENODEV"},
}

#: Where FUSE makes the kernel's answer impossible (docs/reliability.md): a
#: write whose later iovec is unmapped reaches the daemon cut short where the
#: fault is (fs/fuse/file.c fuse_get_user_pages: "if (err && !nbytes)" stops
#: only at the first page), so it is recorded short or refused as too short.
FUSE_FORCED: dict[tuple[str, str], set[str]] = {
    ("write", "write_payload_unmapped"): {"EFAULT", "ENOENT", "EBADF", "EINVAL", "0"},
}


def run_fuzzer(client: Path, mount: Mount, seed: int) -> Counter[tuple[str, str, str]]:
    """One seed's outcomes; fails on a hang (timeout) or a crashed client."""
    try:
        result = subprocess.run([str(client), str(mount), str(seed), str(OPS), *READ_FILES],
                                capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"seed {seed}: the fuzzer hung (a request never answered)")
    assert result.returncode == 0, (seed, result.stderr)
    *lines, tried = result.stdout.splitlines()
    assert tried == f"tried {sum(int(line.rsplit(' ', 1)[1]) for line in lines)}"
    outcomes: Counter[tuple[str, str, str]] = Counter()
    for line in lines:
        op, cls, outcome, count = line.split()
        outcomes[op, cls, outcome] += int(count)
    return outcomes


def release_everything(mount: Mount) -> None:
    """Delete every event once the fuzzer's enablers are gone (process exits
    reach the daemon asynchronously: bounded retries). O_TRUNC of
    dynamic_events is all-or-nothing: EBUSY while any event is in use."""
    deadline = time.monotonic() + 10
    while True:
        try:
            os.close(os.open(mount / "dynamic_events", os.O_WRONLY | os.O_TRUNC))
            break
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert mount.read("user_events_status").endswith("Active: 0\nBusy: 0\n")


def test_fuzz_user_events_data_through_a_mount(open_mount: Mount,
                                               c_client: Callable[[str], Path]) -> None:
    client = c_client("adv_fuzz")
    total: Counter[tuple[str, str, str]] = Counter()
    seeds = fuzz_budget()
    started = time.monotonic()
    for seed in seeds:
        total += run_fuzzer(client, open_mount, seed)
        assert open_mount.proc.poll() is None, f"seed {seed}: the daemon died"
    wrong = {key: n for key, n in total.items()
             if key[2] not in (KERNEL | FUSE_FORCED).get(key[:2], set())}
    fuzz_report("mount: user_events_data", seeds=len(seeds), tried=sum(total.values()),
                seconds=round(time.monotonic() - started, 1), crashes=0, hangs=0,
                wrong_errnos=sum(wrong.values()),
                fuse_forced=sum(n for key, n in total.items() if key[:2] in FUSE_FORCED),
                outcomes={" ".join(key): n for key, n in sorted(total.items())})
    assert not wrong, f"outcomes the kernel would not give: {wrong}"
    assert_serves(open_mount)
    release_everything(open_mount)
