"""``set_event``: one word per write, and what it selects; the engine against this kernel.

The live comparison writes the same words to a private instance of this
machine's tracefs and to an engine, each after an O_TRUNC, and compares the
errno, the bytes consumed and what ``set_event`` lists afterwards.
The engine has no ``sched`` system, so ``{sys}`` in a word stands for
``sched`` on the kernel and ``synthetic`` on the engine, whose synthetic
events ``sched_switch`` and ``sched_wakeup`` stand for the kernel's; every
other listed event is ``<other>``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._tracefs import Tracefs

from .synth_oracle import ROOT, new_tracefs

#: The events both sides have, by name.
NAMED = ("sched_switch", "sched_wakeup")


def _engine() -> Tracefs:
    tfs = new_tracefs()
    for name in (*NAMED, "filler"):
        tfs.synth_events.run_command(f"{name} u64 a")
    tfs.dynamic_events.write(b"u:uev u32 x", ROOT)
    return tfs


def _engine_write(tfs: Tracefs, data: bytes) -> tuple[int, int]:
    """(errno or 0, bytes consumed) of one write after an O_TRUNC open."""
    handle = tfs.file("set_event").open(os.O_WRONLY | os.O_TRUNC, ROOT)
    try:
        return 0, handle.write(data, 0, ROOT)
    except TracefsError as error:
        return error.errno, 0


def _engine_listing(tfs: Tracefs) -> str:
    return tfs.file("set_event").open(os.O_RDONLY, ROOT).read(0, 1 << 20).decode("latin-1")


@pytest.mark.parametrize(("data", "code", "consumed", "listing"), [
    (b"*", errno.EINVAL, 0, ""),  # a lone '*' is no wildcard
    (b"!*", errno.EINVAL, 0, ""),
    (b"*:*", 0, 3, "user_events:uev\nsynthetic:filler\nsynthetic:sched_wakeup\n"
                   "synthetic:sched_switch\n"),
    (b":", 0, 1, "user_events:uev\nsynthetic:filler\nsynthetic:sched_wakeup\n"
                 "synthetic:sched_switch\n"),
    (b"synthetic", 0, 9, "synthetic:filler\nsynthetic:sched_wakeup\nsynthetic:sched_switch\n"),
    (b"synthetic:", 0, 10, "synthetic:filler\nsynthetic:sched_wakeup\nsynthetic:sched_switch\n"),
    (b"*:uev", 0, 5, "user_events:uev\n"),
    (b"uev", 0, 3, "user_events:uev\n"),
    # trace_get_user(): a NUL ends the word and is consumed with it.
    (b"synthetic:sched_switch\0junk", 0, 23, "synthetic:sched_switch\n"),
    (b"uev\0", 0, 4, "user_events:uev\n"),
    (b"\0uev", 0, 1, ""),
    (b" \0uev", 0, 2, ""),
    (b"\xa0uev\xa0filler", 0, 5, "user_events:uev\n"),
    (b"uev filler", 0, 4, "user_events:uev\n"),
    (b"  ", 0, 2, ""),
    (b"", 0, 0, ""),
    (b"nosuch", errno.EINVAL, 0, ""),
    (b"synthetic:nosuch", errno.EINVAL, 0, ""),
    (b"*:mod:nosuch", errno.EINVAL, 0, ""),  # no modules
    (b"x" * 127, errno.EINVAL, 0, ""),  # fits EVENT_BUF_SIZE, matches nothing
    (b"x" * 128, errno.EINVAL, 0, ""),  # too long for the parser
])
def test_set_event_write(data: bytes, code: int, consumed: int, listing: str) -> None:
    tfs = _engine()
    assert _engine_write(tfs, data) == (code, consumed)
    assert _engine_listing(tfs) == listing


#: Words written to both sides; ``{sys}`` is the system that has NAMED.
WORDS = [
    b"*", b"!*", b"*:*", b"!*:*", b":", b"*:", b":*", b"!:", b"{sys}", b"{sys}:", b"{sys}:*",
    b"!{sys}", b"*:sched_switch", b":sched_switch", b"sched_switch", b"{sys}:sched_switch",
    b"!{sys}:sched_switch", b"{sys}:sched_switch:x", b"nosuch", b"nosuch:*", b"{sys}:nosuch",
    b"{sys}:sched_switch\0junk", b"\0{sys}:sched_switch", b" \0{sys}", b"sched_switch\0",
    b"  ", b"\t\n", b"\xa0sched_switch\xa0sched_wakeup", b"sched_switch sched_wakeup",
    b"sched_wakeup\n", b"!", b"!!sched_switch", b"x" * 127, b"x" * 128, b"*:mod:nosuch",
    b"{sys}:*:mod:nosuch",
]


def _normalise(listing: str, system: str) -> list[str]:
    seen = set()
    for line in listing.splitlines():
        sys_name, _, name = line.partition(":")
        seen.add(f"{{sys}}:{name}" if sys_name == system and name in NAMED else "<other>")
    return sorted(seen)


def _in_word(word: bytes, system: bytes, count: int) -> int:
    """How much of ``word`` the first ``count`` bytes written (``{sys}`` as ``system``) are."""
    at = done = 0
    while done < count:
        step = (5, len(system)) if word.startswith(b"{sys}", at) else (1, 1)
        at, done = at + step[0], done + step[1]
    return at


def _kernel_write(path: Path, data: bytes) -> tuple[int, int]:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        return 0, os.write(fd, data)
    except OSError as error:
        return error.errno, 0
    finally:
        os.close(fd)


def test_set_event_matches_this_kernel(real_tracefs_root: Path) -> None:
    tfs = _engine()
    instance = real_tracefs_root / "instances" / f"tracefs-fuse-set-event-{os.getpid()}"
    instance.mkdir()
    try:
        ours, theirs = [], []
        for word in WORDS:
            code, count = _kernel_write(instance / "set_event", word.replace(b"{sys}", b"sched"))
            theirs.append((word, errno.errorcode.get(code), _in_word(word, b"sched", count),
                           _normalise((instance / "set_event").read_text("latin-1"), "sched")))
            code, count = _engine_write(tfs, word.replace(b"{sys}", b"synthetic"))
            ours.append((word, errno.errorcode.get(code), _in_word(word, b"synthetic", count),
                         _normalise(_engine_listing(tfs), "synthetic")))
        _kernel_write(instance / "set_event", b"")
    finally:
        instance.rmdir()
    assert ours == theirs
