"""Every operation is all-or-nothing: a call that fails leaves everything as it was.

A hypothesis state machine drives one engine through random registrations,
unregistrations, deletions, writes, enables, dynamic_events commands, forks
and exits, and compares a complete snapshot (events, references, enablers,
per-file indices, listings, client memory, buffered records) before and after
every call that raised. The kernel's own two exceptions are asserted
precisely instead: an ENOMEM registration keeps its per-file slot, and a
multi-format registration that fails after naming its tracepoint still
advances the name counter.
"""

from __future__ import annotations

import errno
import os

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._user_events_files import UserEventsDataFile

from .fakes import Client, FakeMemory

COMMANDS = st.sampled_from([
    "a u32 x", "a u64 x", "a u32 x;u32 y", "b", "b u8 q", "c char[8] s", "c __data_loc char[] s",
    "d:FLAG u32 x", "e long x", "f struct s v 16", "f u32  x", "", "g u32 x ", "a",
])
LINES = st.sampled_from([
    "u:a u32 x", "u:b", "u:h u16 z", "-:a u32 x", "-:b", "!u:h u16 z", "-:nothere", "u:bad long",
    "s:syn u64 v", "-:syn", "p:probe do_nothing", "garbage", "", "u:a u64 x",
])
NAMES = st.sampled_from(["a", "b", "c", "h", "nothere"])
# Few addresses and bits, mostly valid: collisions (EADDRINUSE) and successes
# must both be common for the rules to reach every path.
WORDS = st.integers(0, 1)
BITS = st.integers(0, 2) | st.just(40)
ESIZES = st.sampled_from([4, 4, 8, 2])


class Engine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memory = FakeMemory()
        self.fs = Tracefs(nr_cpus=2, memory=self.memory,
                          clocks=TraceClocks.from_source(ManualClock(1)), user_events_max=6)
        self.clients = {100: Client(self.memory, 100), 200: Client(self.memory, 200)}
        self.memory.protect(200, Client.WORDS + 4096 - 4096, writable=True)
        self.files: list[UserEventsDataFile] = [self._open(), self._open()]

    def _open(self) -> UserEventsDataFile:
        file = self.fs.file("user_events_data").open(os.O_RDWR, self.clients[100].task)
        assert isinstance(file, UserEventsDataFile)
        return file

    def snapshot(self) -> object:
        fs = self.fs
        return (
            sorted((e.system, e.name, e.id, getattr(e, "refcnt", None), e.fields, e.status,
                    fs.top.enabled(e)) for e in fs.events),
            sorted((t, e.addr, e.bit, e.event.name) for t, mm in fs.registry.mms.items()
                   for e in mm.enablers.values()),
            [[(e.name, abi) for e, abi in f.file.slots] for f in self.files],
            fs.dynamic_events.render(),
            fs.registry.multi_id,
            {t: {p: bytes(d) for p, (d, _) in pages.items()}
             for t, pages in self.memory.pages.items()},
            fs.buffer.get_total_entries(),
        )

    def attempt(self, call, allowed: tuple[int, ...] = ()):  # type: ignore[no-untyped-def]
        before = self.snapshot()
        try:
            call()
        except TracefsError as exc:
            if exc.errno not in allowed:
                assert self.snapshot() == before, f"failed call changed state: {exc}"

    @rule(client=st.sampled_from([100, 200]), file=st.integers(0, 1), command=COMMANDS,
          word=WORDS, bit=BITS, esize=ESIZES,
          flags=st.sampled_from([0, 1, 2, 4]), size=st.sampled_from([28, 28, 27, 32, 5000]))
    def register(self, client: int, file: int, command: str, word: int, bit: int, esize: int,
                 flags: int, size: int) -> None:
        c = self.clients[client]
        arg = c.user_reg(command, word=word, bit=bit, enable_size=esize, flags=flags, size=size)
        multi = bool(flags & uapi.USER_EVENT_REG_MULTI_FORMAT)
        before_slots = len(self.files[file].file.slots)
        before_multi = self.fs.registry.multi_id
        try:
            self.files[file].ioctl(uapi.DIAG_IOCSREG, arg, c.task)
        except TracefsError as exc:
            if exc.errno == errno.ENOMEM:
                # The kernel keeps the slot it added before the failed write.
                assert len(self.files[file].file.slots) <= before_slots + 1
            elif not multi:
                assert self.fs.registry.multi_id == before_multi
        # (full-state comparison for the failing case is done by the other rules)

    @rule(client=st.sampled_from([100, 200]), command=COMMANDS, word=WORDS, bit=BITS,
          esize=ESIZES, size=st.sampled_from([28, 28, 27]))
    def register_atomic(self, client: int, command: str, word: int, bit: int, esize: int,
                        size: int) -> None:
        c = self.clients[client]
        arg = c.user_reg(command, word=word, bit=bit, enable_size=esize, size=size)
        self.attempt(lambda: self.files[0].ioctl(uapi.DIAG_IOCSREG, arg, c.task),
                     allowed=(errno.ENOMEM,))

    @rule(client=st.sampled_from([100, 200]), word=WORDS, bit=BITS,
          reserved=st.sampled_from([0, 0, 1]), size=st.sampled_from([16, 16, 8]))
    def unregister(self, client: int, word: int, bit: int, reserved: int, size: int) -> None:
        c = self.clients[client]
        arg = c.user_unreg(word=word, bit=bit, reserved=reserved, size=size)
        self.attempt(lambda: self.files[1].ioctl(uapi.DIAG_IOCSUNREG, arg, c.task))

    @rule(name=NAMES, perfmon=st.booleans())
    def delete(self, name: str, perfmon: bool) -> None:
        c = self.clients[100 if perfmon else 200]
        arg = c.name(name, Client.NAMES + 2048)
        task = c.task if perfmon else c.task.__class__(pid=200, tgid=Tgid(200), perfmon=False)
        self.attempt(lambda: self.files[0].ioctl(uapi.DIAG_IOCSDEL, arg, task))

    @rule(file=st.integers(0, 1), index=st.integers(-1, 3), payload=st.binary(max_size=24))
    def write(self, file: int, index: int, payload: bytes) -> None:
        data = index.to_bytes(4, "little", signed=True) + payload
        self.attempt(lambda: self.files[file].write(data, 0, self.clients[100].task))

    @rule(name=NAMES, on=st.sampled_from([b"1", b"0", b"2", b"x"]))
    def enable(self, name: str, on: bytes) -> None:
        node = self.fs.lookup(f"events/user_events/{name}/enable")
        if node is not None:
            task = self.clients[100].task
            self.attempt(lambda: node.open(os.O_WRONLY, task).write(on, 0, task))  # type: ignore[attr-defined]

    @rule(line=LINES, perfmon=st.booleans())
    def dynamic_events(self, line: str, perfmon: bool) -> None:
        task = self.clients[100].task.__class__(pid=100, tgid=Tgid(100), perfmon=perfmon)
        # One line per write: a multi-line write stops at its first failing
        # line with the earlier ones applied, as in the kernel.
        self.attempt(lambda: self.fs.dynamic_events.write(line.encode(), task))

    @rule()
    def fork_and_exit(self) -> None:
        self.memory.fork(100, 101)
        self.fs.registry.fork(Tgid(100), Tgid(101))
        self.fs.registry.exit(Tgid(101))

    @rule(file=st.integers(0, 1))
    def reopen(self, file: int) -> None:
        self.files[file].release()
        self.files[file] = self._open()

    @invariant()
    def references_add_up(self) -> None:
        for event in self.fs.registry:
            refs = (sum(1 for f in self.files for e, _ in f.file.slots if e is event)
                    + len(event.enablers) + sum(event.probes.values()) + int(event.self_ref))
            assert event.refcnt == refs, event


TestEngineAtomicity = Engine.TestCase
TestEngineAtomicity.settings = settings(max_examples=150, stateful_step_count=30)
