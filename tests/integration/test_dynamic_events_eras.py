"""``dynamic_events`` lines of the 6.1 era in every mount mode (issue 13, fidelity 2).

A ``dynamic_events`` line carries no struct size to tell its era. The 6.1
kernel's own ``dyn_test`` creates ``u:__test_event <fields>`` and clears with
``!u:__test_event`` (name only), and sends ``name:BPF_ITER`` flags; mainline
refuses both meanings. Here, in a real mount: what the 6.1 kernel answers
(``make oracle-test`` runs that selftest itself, on 6.1 and here).
"""

from __future__ import annotations

import errno

import pytest

from .conftest import Mount

pytestmark = pytest.mark.uses_fuse

# The 6.1 dyn_test's own lines, in its order, with what Linux 6.1.192 answers.
DYN_TEST_6_1 = [
    ("!u:__test_event", errno.ENOENT),               # FIXTURE_SETUP: CLEAR()
    ("u:__test_event u64 a", 0),                      # basic_types
    ("!u:__test_event", 0),
    ("u:__test_event char[20] a", 0),
    ("!u:__test_event", 0),
    ("u:__test_event char[aa] a", errno.EINVAL),
    ("u:__test_event __rel_loc unsigned char[] a", 0),  # loc_types
    ("!u:__test_event", 0),
    ("u:__test_event struct custom a 20", 0),         # size_types
    ("!u:__test_event", 0),
    ("u:__test_event:BPF_ITER u32 a", 0),             # flags
    ("!u:__test_event", 0),
    ("u:__test_event:BPF_ITER,FLAG_FUTURE u32 a", 0),
    ("!u:__test_event", 0),
    ("u:__test_event u32 a; u32 b", 0),              # matching
    ("!u:__test_event u32 a", errno.ENOENT),
    ("!u:__test_event u32 a; u32 b;", 0),
    ("!u:__test_event", errno.ENOENT),
]


def answer(mount: Mount, line: str) -> int:
    try:
        with open(mount / "dynamic_events", "a") as f:
            f.write(line)
    except OSError as exc:
        return exc.errno or -1
    return 0


@pytest.mark.parametrize("mount_options", [(), ("--abi", "6.1")], ids=["auto", "6.1"])
def test_6_1_dyn_test_lines_answer_as_linux_6_1(tracefs: Mount) -> None:
    assert [(line, answer(tracefs, line)) for line, _ in DYN_TEST_6_1] == DYN_TEST_6_1
    assert tracefs.read("dynamic_events") == ""


def test_auto_mount_keeps_mainline_answers_elsewhere(tracefs: Mount) -> None:
    """Where mainline's meaning finds an event, or parses, auto gives it."""
    assert answer(tracefs, "u:e u32 a") == 0
    assert answer(tracefs, "u:e u64 a") == errno.EADDRINUSE  # 6.1 would return the event
    assert answer(tracefs, "!u:e u32 a") == 0
    assert answer(tracefs, "u:e") == 0
    assert answer(tracefs, "!u:e") == 0                      # the field-less event
    assert tracefs.read("dynamic_events") == ""
