"""The engine's public names are re-exported from the package, and only those."""

from __future__ import annotations

import tracefs_fuse.engine as engine


def test_every_public_name_is_exported_and_real() -> None:
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    # "@py_builtins" and "@pytest_ar": pytest's, where it rewrites the package's
    # asserts (pytest 9.2 does for the package of an editable install's plugin).
    public = {n for n in vars(engine) if not n.startswith(("_", "@"))}
    assert public == set(engine.__all__)


def test_a_whole_tracefs_from_the_public_names() -> None:
    class NoMemory:
        def read(self, tgid: engine.Tgid, addr: int, size: int) -> bytes:
            return b""

        def write(self, tgid: engine.Tgid, addr: int, data: bytes) -> int:
            return 0

    fs = engine.Tracefs(nr_cpus=1, memory=NoMemory(),
                        clocks=engine.TraceClocks.from_source(engine.ManualClock(1)))
    task = engine.Task(pid=1, tgid=engine.Tgid(1))
    assert fs.file("user_events_status").open(0, task).read(0, 100) == b"\nActive: 0\nBusy: 0\n"
