"""kprobe lines (``kprobe_events``, ``p:``/``r:`` in ``dynamic_events``): parsed, refused.

Pinned by the capture of a 6.12.117 kernel with CONFIG_KPROBE_EVENTS
("probes" variant of ``tests/data/synth-captures-6.12.117.json``). Every
unknown-symbol refusal must match it exactly; the cases where that kernel
accepted a probe we cannot have (an address, a module symbol) or reported an
error only reachable after accepting one are the documented deviations, and
get the unknown-symbol refusal instead.
"""

from __future__ import annotations

import errno
import os

import pytest

from tracefs_fuse.engine._clock import ManualClock
from tracefs_fuse.engine._error_log import ErrorLog
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._probes import KprobeEvents

from .synth_oracle import ROOT, golden, mask, replay

PROBES = golden("probes")
KP_CASES = [case for case in PROBES if case.startswith("kp-")]

#: Where the kernel accepted what we refuse (pending probes on an address or
#: a module symbol, and uprobes), or failed later than we do because of them.
DEVIATIONS = {
    "kp-args-128": "address probe accepted as pending",
    "kp-args-129": "E2BIG for fetch args, checked after the address",
    **{f"kp-{f}-11": "module symbol accepted as pending" for f in ("kprobe_events",
                                                                  "dynamic_events")},
    **{f"kp-{f}-{n}": "address probe: accepted, or an error only checked after it"
       for f in ("kprobe_events", "dynamic_events") for n in range(17, 27)},
    "kp-dynamic_events-33": "uprobe: that kernel has uprobe events, we have none",
}


def without_probes(text: str) -> str:
    """A listing without the probes the kernel accepted (we never have any)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith(("p:", "r:")))


def refusal(op: str) -> str:
    """Our answer to a kprobe line: the unknown-symbol error under the probe point."""
    argv = op.rstrip("\n").split(" ", 2)[2].split()
    return (f"[T] trace_kprobe: error: Invalid probed address or symbol\n"
            f"  Command: {' '.join(argv)}\n{' ' * (11 + len(argv[0]) + 1)}^\n")


@pytest.fixture(scope="module")
def probes_replay() -> dict:
    return replay("probes")


@pytest.mark.parametrize("case", KP_CASES)
def test_oracle_case(probes_replay: dict, case: str) -> None:
    got = probes_replay[case]
    op = PROBES[case]["op"]
    for part, (kernel, engine) in got.items():
        if part.startswith("file:") and part[5:] in ("kprobe_events", "dynamic_events"):
            kernel = without_probes(kernel)  # type: ignore[arg-type]
        if case in DEVIATIONS and part == "result":
            kernel = "write EINVAL\n"
        if case in DEVIATIONS and part == "error_log":
            kernel = "" if "/bin/sh" in op else refusal(op)
        assert engine == kernel, f"{case} {part}: {op!r} ({DEVIATIONS.get(case, 'exact')})"


def test_unknown_symbol_refusal_is_the_kernels(probes_replay: dict) -> None:
    """The plainest case, spelled out: errno and error_log line."""
    kernel = PROBES["kp-kprobe_events-1"]
    assert kernel["result"] == "write EINVAL\n"
    assert mask(kernel["error_log"]) == refusal(kernel["op"])
    assert probes_replay["kp-kprobe_events-1"]["error_log"][1] == refusal(kernel["op"])


# -- cases the capture does not have ------------------------------------------------------------


def kprobes() -> tuple[KprobeEvents, ErrorLog]:
    log = ErrorLog(now=ManualClock(0))
    return KprobeEvents(log), log


@pytest.mark.parametrize(("line", "code", "message", "caret"), [
    ("r4097:x sym", errno.EINVAL, "Maxactive is too big", 1),
    ("r4096:x sym", errno.EINVAL, "Invalid probed address or symbol", 8),
    ("r" + "1" * 64 + " sym", errno.EINVAL, "Invalid maxactive number", 1),
    ("r99999999999:x sym", errno.EINVAL, "Invalid maxactive number", 1),
    ("p:x sym+0x10", errno.EINVAL, "Invalid probed address or symbol", 4),
    ("p:x sym+99999999999", errno.EINVAL, "Invalid probed address or symbol", 4),
    ("p:x 0xffffffff81000000 a=%di", errno.EINVAL, "Invalid probed address or symbol", 4),
    ("p:x mod:sym%return", errno.EINVAL, "Invalid probed address or symbol", 4),
    ("p:x sym%r%return", errno.EINVAL, "Invalid probed address suffix", 7),
    ("p\tsym", errno.EINVAL, "Invalid probed address or symbol", 2),
])
def test_refusals(line: str, code: int, message: str, caret: int) -> None:
    kp, log = kprobes()
    with pytest.raises(TracefsError) as info:
        kp.write(line.encode(), ROOT)
    assert info.value.errno == code
    (entry,) = log.entries
    assert (entry.loc, entry.message, entry.pos) == ("trace_kprobe", message, caret)


@pytest.mark.parametrize(("line", "code"), [
    ("p", errno.EINVAL), ("p:x /bin/sh:0x10", errno.EINVAL), ("x:y z", errno.EINVAL),
    ("!p:x", errno.EINVAL), ("-:x", errno.ENOENT), ("-:kprobes/x", errno.ENOENT),
    ("-x", errno.EINVAL), ("-:", errno.EINVAL),
])
def test_not_logged(line: str, code: int) -> None:
    """Lines that are not kprobe definitions fail without an error_log entry."""
    kp, log = kprobes()
    with pytest.raises(TracefsError) as info:
        kp.write(line.encode(), ROOT)
    assert info.value.errno == code and not log.entries


def test_provider_passes_on_what_is_not_a_kprobe() -> None:
    kp, _ = kprobes()
    assert kp.create("s:foo u64 a", ROOT) is False
    assert kp.create("p", ROOT) is False
    assert kp.create("p:x /bin/sh:0x10", ROOT) is False
    assert kp.create("   ", ROOT) is True


def test_file() -> None:
    kp, _ = kprobes()
    node = kp.node()
    assert node.name == "kprobe_events" and node.mode & 0o777 == 0o640
    node.open(os.O_WRONLY | os.O_TRUNC, ROOT)  # deletes every kprobe: none
    handle = node.open(os.O_RDWR, ROOT)
    assert handle.write(b"\n# a comment\n", 0, ROOT) == 13
    assert handle.read(0, 100) == b""
