"""Fuzzing the engine directly: raw structs, raw names, raw writes, every ABI era.

Where ``tests/engine/test_atomicity.py`` drives well-formed commands to check
that failures change nothing, this machine feeds the engine what a hostile
client can put in its memory: ``struct user_reg`` of any size with any
trailing bytes (including the 5.18 and 6.1 sizes, ``--abi auto``), fields
at random, names of random bytes, addresses that are unmapped, read-only or
run off their page, writes of random bytes. After every step:

* nothing but ``TracefsError`` escaped, with an errno the kernel's function
  can return (kernel/trace/trace_events_user.c);
* every enable bit the engine holds a registration for says what its event
  says (set while enabled, clear while not), in the process's memory;
* every event's files and the listings render.

Budget: EXAMPLES × ``TFUSE_FUZZ_SCALE`` examples (see conftest).
"""

from __future__ import annotations

import errno
import os
import struct
import time

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tracefs_fuse.engine import _uapi as uapi
from tracefs_fuse.engine._clock import ManualClock, TraceClocks
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._memory import Tgid
from tracefs_fuse.engine._tracefs import Tracefs
from tracefs_fuse.engine._user_events_files import UserEventsDataFile

from ..engine.fakes import PAGE, Client, FakeMemory
from .conftest import fuzz_report, fuzz_settings

EXAMPLES = 40

#: Errnos each entry point can return (the kernel functions it mirrors);
#: ENOMEM is the failed first write of an enable bit.
REGISTER = {errno.EFAULT, errno.E2BIG, errno.EINVAL, errno.EADDRINUSE, errno.EMFILE,
            errno.ENOMEM, errno.EPERM}
UNREGISTER = {errno.EFAULT, errno.E2BIG, errno.EINVAL, errno.ENOENT}
DELETE = {errno.EFAULT, errno.EINVAL, errno.ENOENT, errno.EBUSY, errno.EPERM}
WRITE = {errno.EFAULT, errno.EINVAL, errno.ENOENT, errno.EBADF, errno.E2BIG}

#: Where a client's pointers may point: its scratch pages, a page it does not
#: have, a read-only one, the last bytes before an unmapped page.
READ_ONLY = 0x40000
EDGE = Client.NAMES + PAGE - 6
ADDRESSES = st.sampled_from([Client.WORDS, Client.WORDS + 4, Client.WORDS + 8, Client.WORDS + 1,
                             Client.WORDS + PAGE - 4, Client.NAMES, EDGE, READ_ONLY, 0,
                             0x90000, 0xFFFF_8880_0000_0000, 2**64 - 8])
NAMES = st.one_of(st.binary(max_size=40), st.sampled_from([
    b"a u32 x", b"a u64 x", b"b", b"b char[8] s; u32 n", b"c __data_loc char[] s",
    b"c __rel_loc char[] s", b"d:BPF u32 x", b"e struct s v 16", b"a u32 x;", b"a  u32 x",
    b"f u8 a; u16 b", b"x" * 600, b"g:a,b u32 x", b"h s64 v"]))
SIZES = st.sampled_from([0, 4, 19, 20, 24, 27, 28, 29, 32, 64, PAGE, PAGE + 1])


class HostileClients(RuleBasedStateMachine):
    #: Engine calls made, over every example (for the figures).
    calls = 0

    def __init__(self) -> None:
        super().__init__()
        self.memory = FakeMemory()
        self.fs = Tracefs(nr_cpus=2, memory=self.memory,
                          clocks=TraceClocks.from_source(ManualClock(1)), user_events_max=8)
        self.clients = {100: Client(self.memory, 100),
                        200: Client(self.memory, 200, perfmon=False)}
        for tgid in self.clients:
            self.memory.map(tgid, READ_ONLY, writable=False)
        self.files = [self._open(100), self._open(200)]

    def _open(self, tgid: int) -> UserEventsDataFile:
        file = self.fs.file("user_events_data").open(os.O_RDWR, self.clients[tgid].task)
        assert isinstance(file, UserEventsDataFile)
        return file

    def call(self, allowed: set[int], fn, *args) -> None:  # type: ignore[no-untyped-def]
        HostileClients.calls += 1
        try:
            fn(*args)
        except TracefsError as exc:
            assert exc.errno in allowed, (fn, exc)

    @rule(client=st.sampled_from([100, 200]), file=st.integers(0, 1), size=SIZES,
          bit=st.integers(0, 70), esize=st.sampled_from([4, 8, 0, 2, 16]),
          flags=st.integers(0, 7), addr=ADDRESSES, name=NAMES, at=ADDRESSES,
          trailing=st.binary(max_size=8))
    def register(self, client: int, file: int, size: int, bit: int, esize: int, flags: int,
                 addr: int, name: bytes, at: int, trailing: bytes) -> None:
        c = self.clients[client]
        name_args = c.name(name) if at in (Client.NAMES, EDGE) else at
        if at == EDGE:  # a name running off its page: no NUL readable
            self.memory.put(c.tgid, EDGE, b"zzzzzz")
        raw = struct.pack("<IBBHQQI", size, bit, esize, flags, addr, name_args, 0) + trailing
        self.memory.put(c.tgid, Client.REG, raw)
        self.call(REGISTER, self.files[file].ioctl, uapi.DIAG_IOCSREG, Client.REG, c.task)

    @rule(client=st.sampled_from([100, 200]), size=st.sampled_from([0, 8, 16, 17, PAGE + 1]),
          bit=st.integers(0, 70), reserved=st.sampled_from([0, 0, 1, 0x100]), addr=ADDRESSES)
    def unregister(self, client: int, size: int, bit: int, reserved: int, addr: int) -> None:
        c = self.clients[client]
        self.memory.put(c.tgid, Client.REG, struct.pack("<IBBHQ", size, bit, reserved & 0xFF,
                                                        reserved >> 8, addr))
        self.call(UNREGISTER, self.files[0].ioctl, uapi.DIAG_IOCSUNREG, Client.REG, c.task)

    @rule(client=st.sampled_from([100, 200]), name=NAMES, at=ADDRESSES)
    def delete(self, client: int, name: bytes, at: int) -> None:
        c = self.clients[client]
        arg = c.name(name.split(b" ")[0]) if at in (Client.NAMES, EDGE) else at
        self.call(DELETE, self.files[1].ioctl, uapi.DIAG_IOCSDEL, arg, c.task)

    @rule(file=st.integers(0, 1), data=st.binary(max_size=64))
    def write(self, file: int, data: bytes) -> None:
        self.call(WRITE, self.files[file].write, data, 0, self.clients[100].task)

    @rule(on=st.sampled_from([b"1", b"0", b"1\n", b"x"]), which=st.integers(0, 7))
    def enable(self, on: bytes, which: int) -> None:
        events = sorted((e.system, e.name) for e in self.fs.registry)
        if events:
            system, name = events[which % len(events)]
            node = self.fs.lookup(f"events/{system}/{name}/enable")
            if node is not None:  # names that cannot be a directory have none
                task = self.clients[100].task
                self.call({errno.EINVAL},
                          lambda: node.open(os.O_WRONLY, task).write(on, 0, task))  # type: ignore[attr-defined]

    @rule(file=st.integers(0, 1))
    def reopen(self, file: int) -> None:
        self.files[file].release()
        self.files[file] = self._open(100 if file == 0 else 200)

    @rule()
    def fork_and_exit(self) -> None:
        self.memory.fork(100, 101)
        self.fs.registry.fork(Tgid(100), Tgid(101))
        self.fs.registry.exit(Tgid(101))

    @invariant()
    def enable_bits_say_what_events_say(self) -> None:
        for tgid, mm in self.fs.registry.mms.items():
            for enabler in mm.enablers.values():
                byte = self.memory.read(tgid, enabler.addr + enabler.bit // 8, 1)
                if len(byte) == 1:
                    on = bool(byte[0] >> enabler.bit % 8 & 1)
                    assert on == self.fs.top.enabled(enabler.event), (tgid, enabler)

    @invariant()
    def everything_renders(self) -> None:
        task = self.clients[100].task
        for path in ("user_events_status", "dynamic_events", "available_events", "set_event"):
            self.fs.file(path).open(os.O_RDONLY, task).read(0, 1 << 20)
        for event in self.fs.registry:
            for name in ("format", "enable", "id"):
                node = self.fs.lookup(f"events/{event.system}/{event.name}/{name}")
                if node is not None:
                    node.open(os.O_RDONLY, task).read(0, 1 << 16)  # type: ignore[attr-defined]

    def teardown(self) -> None:
        for file in self.files:
            file.release()
        for tgid in list(self.fs.registry.mms):
            self.fs.registry.exit(tgid)
        # No descriptor, no process: what holds an event now is its own
        # reference (persistent) and its probe (enabled), nothing else.
        for event in self.fs.registry:
            assert event.refcnt == int(event.self_ref) + sum(event.probes.values()), event


def test_fuzz_the_engine_with_hostile_clients() -> None:
    started = time.monotonic()
    run_state_machine_as_test(HostileClients,
                              settings=fuzz_settings(EXAMPLES, stateful_step_count=25))
    fuzz_report("engine: hostile clients", tried=HostileClients.calls, wrong_errnos=0,
                crashes=0, seconds=round(time.monotonic() - started, 1))
