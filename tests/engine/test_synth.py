"""Synthetic events: type table, commands, layout, records, trace text, tracing rules.

The command, listing, format and error_log behaviour is pinned by replaying
the real kernel's capture (``tests/data/synth-captures-6.12.117.json``, see
:mod:`.synth_oracle`) case by case; the record layout and trace text by the
record the kernel's own synth path (a hist trigger) wrote.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._events import TRACE_EVENT_TYPE_MAX
from tracefs_fuse.engine._synth import (ENOTSUPP, STR_VAR_LEN_MAX, EventFileRef, SynthEvent,
                                        build_entry, dynamic_data, get_event_file, gfp_flag_names,
                                        is_good_name, synth_field_fmt, synth_field_signed,
                                        synth_field_size, synth_field_string_size, trace,
                                        trace_start)
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs

from .synth_oracle import (ROOT, golden, mask, new_tracefs, oracle_records, replay,
                           same_record)

# -- the type table (trace_events_synth.c: synth_field_size/_fmt/_signed) -------------------

TYPES = [
    # type, size, fmt, signed
    ("s64", 8, "%lld", True), ("u64", 8, "%llu", False),
    ("s32", 4, "%d", True), ("u32", 4, "%u", False),
    ("s16", 2, "%d", True), ("u16", 2, "%u", False),
    ("s8", 1, "%d", True), ("u8", 1, "%u", False),
    ("char", 1, "%d", True), ("unsigned char", 1, "%u", False),
    ("int", 4, "%d", True), ("unsigned int", 4, "%u", False),
    ("long", 8, "%ld", True), ("unsigned long", 8, "%lu", False),
    ("bool", 1, "%d", True), ("pid_t", 4, "%d", True), ("gfp_t", 4, "%x", False),
    ("char[16]", 16, "%s", True), ("unsigned char[8]", 8, "%s", False),
    ("char[]", 0, "%s", True), ("long[]", 0, "%s", True), ("unsigned long[]", 0, "%s", False),
    ("short", 0, "%llu", True), ("size_t", 0, "%llu", True), ("u64[3]", 0, "%llu", False),
]


@pytest.mark.parametrize(("type_", "size", "fmt", "signed"), TYPES)
def test_type_table(type_: str, size: int, fmt: str, signed: bool) -> None:
    assert synth_field_size(type_) == size
    assert synth_field_fmt(type_) == fmt
    assert synth_field_signed(type_) is signed


@pytest.mark.parametrize(("type_", "size"), [
    ("char[16]", 16), ("char[]", 0), ("char[0]", 0), ("char[1]", 1), ("char[256]", 256),
    ("char[257]", None), ("char[010]", 8), ("char[0x1]", 1), ("char[0x10]", None),
    ("char[1000]", None), ("char[abc]", None), ("char[-1]", None), ("char[5]x", None),
    ("char[+5]", 5), ("char[16][4]", None),
])
def test_string_size(type_: str, size: int | None) -> None:
    assert synth_field_string_size(type_) == size


@pytest.mark.parametrize(("name", "good"), [
    ("foo", True), ("_f9", True), ("9foo", False), ("fo-o", False), ("", False),
    ("\xe9t\xe9", True), ("a\xd7b", False),  # lib/ctype.c: Latin-1 letters, not x
])
def test_is_good_name(name: str, good: bool) -> None:
    assert is_good_name(name) is good


@pytest.mark.parametrize(("flags", "text"), [
    (0, ""), (0xCC0, "GFP_KERNEL"), (0x400CC0, "GFP_KERNEL_ACCOUNT"), (0x100, "__GFP_ZERO"),
    (0x200, "0x200"), (0x820, "GFP_ATOMIC"), (0x2800, "GFP_NOWAIT"), (0x1_000_000, "0x1000000"),
])
def test_gfp_flag_names(flags: int, text: str) -> None:
    assert gfp_flag_names(flags) == text


# -- the kernel's capture, replayed ----------------------------------------------------------

#: Both kernels ran the same sequence; kprobe and inject steps (only in
#: "probes") have their own tests (test_probes.py, test_inject.py).
_OWN_TESTS = ("hist-", "kp-", "inj", "uinj-", "unone-")
CASES = {variant: {case: parts for case, parts in golden(variant).items()
                   if "op" in parts and not case.startswith(_OWN_TESTS)}
         for variant in ("base", "probes")}


@pytest.fixture(scope="module")
def replays() -> dict:
    return {variant: replay(variant) for variant in CASES}


@pytest.mark.parametrize(("variant", "case"),
                         [(v, c) for v, cases in CASES.items() for c in cases])
def test_oracle_case(replays: dict, variant: str, case: str) -> None:
    """The engine answers each step of the capture as 6.12.117 did."""
    for part, (kernel, engine) in replays[variant][case].items():
        assert engine == kernel, f"{case} {part}: {CASES[variant][case]['op']!r}"


def test_oracle_replay_covers_capture(replays: dict) -> None:
    for variant, cases in CASES.items():
        assert set(cases) <= set(replays[variant])


# -- layout and text against the kernel's own synth path (hist trigger) -----------------------

HIST = golden("base")
HS_FIELDS = "hs u64 v; u32 id; char[16] name; s32 w; char[] dname; u16 small"
HS_VALUES = [0x7FFFFFFFFFFFFFFF, 7, b"hello", -2, b"hello", 0x1234]


def _hs(tfs: Tracefs) -> SynthEvent:
    tfs.synth_events.run_command(HS_FIELDS)
    event = tfs.synth_events.find("hs")
    assert event is not None
    return event


def test_format_matches_kernel() -> None:
    event = _hs(new_tracefs())
    assert mask(event.format_text()) == mask(HIST["hist-w2"]["file:events/synthetic/hs/format"])


def test_record_layout_matches_kernel() -> None:
    """Slots of 8 bytes, a 256-byte static string, dynamic data after the slots."""
    event = _hs(new_tracefs())
    (theirs,) = oracle_records(HIST["hist-w2"]["raw"])
    ours = build_entry(event, theirs[:8], HS_VALUES, dynamic_data(event, HS_VALUES))
    assert len(ours) == 8 + 8 * 37 + len(b"hello\0")
    assert same_record(ours, theirs, "")


@pytest.mark.parametrize(("part", "verbose"), [("file:trace", False), ("file:trace#2", True)])
def test_print_trace_matches_kernel(part: str, verbose: bool) -> None:
    event = _hs(new_tracefs())
    (theirs,) = oracle_records(HIST["hist-w2"]["raw"])
    line = HIST["hist-w2"][part].splitlines()[-1]
    assert event.print_trace(theirs, verbose=verbose) == line[line.index("hs: "):] + "\n"


@pytest.mark.parametrize(("fields", "values", "text"), [
    ("s8 a; s16 b; s32 c; s64 d", [-1, -1, -1, -1], "e: a=255 b=65535 c=-1 d=-1\n"),
    ("u8 a; bool b; gfp_t g", [300, 1, 0xCC0], "e: a=44 b=1 g=cc0 (GFP_KERNEL)\n"),
    ("char[4] s; char[] d", [b"toolong", b"x\0y"], "e: s=toolong d=x\n"),
    ("long[] st; u32 n", [[0xFFFFFFFF81000000, 0x10], 3],
     "e: st=STACK:\n=> 0xffffffff81000000\n=> 0x10\nn=3\n"),
])
def test_print_trace(fields: str, values: list, text: str) -> None:
    """1/2-byte values print unsigned (as_u8/as_u16), static strings use the whole slot."""
    tfs = new_tracefs()
    tfs.synth_events.run_command(f"e {fields}")
    event = tfs.synth_events.find("e")
    entry = build_entry(event, bytes(8), values, dynamic_data(event, values))
    assert event.print_trace(entry) == text


@pytest.mark.parametrize(("addrs", "longs", "reserved"), [
    # trace_stack(): [n, addrs...] up to a zero or 16 longs; n + 1 longs reserved.
    ([1, 2], [2, 1, 2], 24),
    ([], [], 8),
    ([1, 0, 3], [3, 1], 32),
    (list(range(1, 20)), [19, *range(1, 16)], 160),
])
def test_stack_layout(addrs: list[int], longs: list[int], reserved: int) -> None:
    tfs = new_tracefs()
    tfs.synth_events.run_command("e long[] st")
    event = tfs.synth_events.find("e")
    entry = build_entry(event, bytes(8), [addrs], dynamic_data(event, [addrs]))
    # {u16 offset; u16 len}: the data follows the one slot, len in bytes.
    assert int.from_bytes(entry[8:12], "little") == (8 * len(longs)) << 16 | 16
    data = entry[16:]
    assert len(data) == reserved
    assert [int.from_bytes(data[i:i + 8], "little") for i in range(0, 8 * len(longs), 8)] == longs
    assert not any(data[8 * len(longs):])


def test_static_string_keeps_255_bytes_and_a_nul() -> None:
    tfs = new_tracefs()
    tfs.synth_events.run_command("e char[16] s")
    event = tfs.synth_events.find("e")
    values = [b"x" * 300]
    entry = build_entry(event, bytes(8), values, dynamic_data(event, values))
    assert len(entry) == 8 + STR_VAR_LEN_MAX
    assert entry[8:8 + 255] == b"x" * 255 and entry[8 + 255] == 0


# -- tracing from code -----------------------------------------------------------------------


class Traced:
    """A tracefs with event ``e`` and its held file, recording what lands."""

    def __init__(self, fields: str = "u64 a; char[8] s; u16 w", *, enable: bool = True) -> None:
        self.tfs = new_tracefs()
        self.tfs.synth_events.run_command(f"e {fields}")
        self.event = self.tfs.synth_events.find("e")
        self.file = get_event_file(self.tfs.top, "synthetic", "e", nr_cpus=2)
        if enable:
            self.tfs.top.set_enabled(self.event, True)
        self.records: list[bytes] = []
        record = self.tfs.top.record
        self.tfs.top.record = lambda entry, task: (  # type: ignore[method-assign]
            self.records.append(bytes(entry)), record(entry, task))[1]

    def errno(self, call) -> int:  # noqa: ANN001
        with pytest.raises(TracefsError) as info:
            call()
        return info.value.errno


TASK = Task(pid=42, tgid=42, cpu=1)  # type: ignore[arg-type]


def test_trace_records_header_and_fields() -> None:
    t = Traced()
    trace(t.file, [5, b"hi", 0x12345], TASK)
    (entry,) = t.records
    assert entry[:8] == t.event.id.to_bytes(2, "little") + b"\0\0" + (42).to_bytes(4, "little")
    assert t.event.print_trace(entry) == "e: a=5 s=hi w=9029\n"


def test_trace_disabled_records_nothing() -> None:
    t = Traced(enable=False)
    trace(t.file, [1, b"", 2], TASK)
    assert t.records == []


def test_trace_wrong_count_commits_a_zeroed_record_then_einval() -> None:
    """synth_event_trace() checks n_vals after reserving, and commits anyway."""
    t = Traced()
    assert t.errno(lambda: trace(t.file, [1, b"x"], TASK)) == errno.EINVAL
    (entry,) = t.records
    assert len(entry) == t.event.fixed_size and not any(entry[8:])


@pytest.mark.parametrize("setup", ["tracing_off", "too_big", "cpumask"])
def test_trace_unreservable_is_einval(setup: str) -> None:
    t = Traced("char[] d")
    value = b"x" * 5000 if setup == "too_big" else b"x"
    if setup == "tracing_off":
        t.tfs.top.set_tracing_on(False)
    elif setup == "cpumask":
        t.tfs.top.cpumask = 0b01  # TASK runs on CPU 1
    assert t.errno(lambda: trace(t.file, [value], TASK)) == errno.EINVAL
    assert t.records == []


def test_trace_type_errors_are_python_errors() -> None:
    t = Traced()
    with pytest.raises(TypeError):
        trace(t.file, ["not bytes", b"", 0], TASK)


PIECEWISE_ERRORS = [
    # (adds as (name or None, value), the errno of the last add)
    ([(None, 1), ("s", b"x")], errno.EINVAL),       # next then by name
    ([("a", 1), (None, 2)], errno.EINVAL),          # by name then next
    ([(None, 1), (None, b""), (None, 3), (None, 4)], errno.EINVAL),  # past the last field
    ([("nosuch", 1)], errno.EINVAL),                # unknown name (deviation: kernel writes last)
    ([("s", None)], errno.EINVAL),                  # no string
]


@pytest.mark.parametrize(("adds", "code"), PIECEWISE_ERRORS)
def test_piecewise_errors(adds: list, code: int) -> None:
    t = Traced()
    state = trace_start(t.file, TASK)
    for name, value in adds[:-1]:
        state.add_val(name, value)
    name, value = adds[-1]
    assert t.errno(lambda: state.add_val(name, value)) == code
    state.end()  # closing is still required, and commits what was added
    assert len(t.records) == 1


def test_piecewise_style_is_fixed_by_a_failed_add() -> None:
    t = Traced()
    state = trace_start(t.file, TASK)
    assert t.errno(lambda: state.add_val("nosuch", 1)) == errno.EINVAL
    assert t.errno(lambda: state.add_val(None, 1)) == errno.EINVAL
    state.end()


def test_piecewise_by_name_and_unclosed_records_nothing() -> None:
    t = Traced()
    state = trace_start(t.file, TASK)
    state.add_val("w", 7)
    state.add_val("s", b"abc")
    assert t.records == []
    state.end()
    assert t.event.print_trace(t.records[0]) == "e: a=0 s=abc w=7\n"
    assert t.errno(state.end) == errno.EINVAL
    assert t.errno(lambda: state.add_val("a", 1)) == errno.EINVAL


def test_piecewise_disabled_checks_style_only() -> None:
    t = Traced(enable=False)
    with trace_start(t.file, TASK) as state:
        state.add_val("nosuch", 1)  # the kernel returns before looking
        assert t.errno(lambda: state.add_val(None, 1)) == errno.EINVAL
    assert t.records == []


def test_piecewise_refuses_dynamic_fields() -> None:
    t = Traced("u64 a; char[] d")
    assert t.errno(lambda: trace_start(t.file, TASK)) == ENOTSUPP


def test_piecewise_tracing_off_is_einval() -> None:
    t = Traced()
    t.tfs.top.set_tracing_on(False)
    assert t.errno(lambda: trace_start(t.file, TASK)) == errno.EINVAL


def test_context_manager_ends_even_after_error() -> None:
    t = Traced()
    with pytest.raises(TracefsError), trace_start(t.file, TASK) as state:
        state.add_val(None, 1)
        state.add_val("a", 2)
    assert len(t.records) == 1


# -- held files and deletion -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["delete", "dynamic_events", "synthetic_events", "trunc"])
def test_held_file_makes_delete_ebusy(how: str) -> None:
    t = Traced(enable=False)
    synth = t.tfs.synth_events
    attempts = {
        "delete": lambda: synth.delete("e"),
        "dynamic_events": lambda: t.tfs.dynamic_events.write(b"-:e", ROOT),
        "synthetic_events": lambda: synth.write(b"!e", ROOT),
        "trunc": lambda: synth.release_all(ROOT),
    }
    assert t.errno(attempts[how]) == errno.EBUSY
    t.file.put()
    attempts[how]()
    assert synth.find("e") is None


def test_enabled_event_delete_is_ebusy() -> None:
    t = Traced()
    t.file.put()
    assert t.errno(lambda: t.tfs.synth_events.delete("e")) == errno.EBUSY
    t.tfs.top.set_enabled(t.event, False)
    t.tfs.synth_events.delete("e")


def test_event_file_rules() -> None:
    t = Traced()
    t.file.put()
    assert t.errno(t.file.put) == errno.EINVAL
    assert t.errno(lambda: trace(t.file, [1, b"", 2], TASK)) == errno.EINVAL
    with get_event_file(t.tfs.top, "synthetic", "e") as held:
        assert isinstance(held, EventFileRef) and held.held
    assert not held.held
    assert t.errno(lambda: get_event_file(t.tfs.top, "synthetic", "nosuch")) == errno.EINVAL
    assert t.errno(lambda: get_event_file(t.tfs.top, "ftrace", "print")) == errno.EINVAL


def test_ids_exhausted_is_enodev() -> None:
    tfs = new_tracefs()
    # Every id up to TRACE_EVENT_TYPE_MAX handed out (common_type is a u16).
    tfs.events._next_id = TRACE_EVENT_TYPE_MAX + 1  # type: ignore[attr-defined]
    with pytest.raises(TracefsError) as info:
        tfs.synth_events.run_command("e u64 a")
    assert info.value.errno == errno.ENODEV


# -- any bytes either work or are a TracefsError (house style invariant) ------------------------


@settings(max_examples=300)
@given(st.binary(max_size=200) | st.text(
    alphabet=" \t;!:/-_[]s0123456789abcdefghijklmnopqrstuvwxyzunsigedchar", max_size=80)
       .map(lambda s: s.encode()))
def test_any_command_succeeds_or_raises_tracefs_error(data: bytes) -> None:
    tfs = new_tracefs()
    for write in (tfs.synth_events.write, tfs.dynamic_events.write):
        try:
            write(data, ROOT)
        except TracefsError:
            pass


# -- an independent decoder: libtraceevent, as trace-cmd uses it --------------------------------

_TEP = ctypes.util.find_library("traceevent")


class _TraceSeq(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_char_p), ("buffer_size", ctypes.c_uint),
                ("len", ctypes.c_uint), ("readpos", ctypes.c_uint), ("state", ctypes.c_int)]


class _TepRecord(ctypes.Structure):
    _fields_ = [("ts", ctypes.c_ulonglong), ("offset", ctypes.c_ulonglong),
                ("missed_events", ctypes.c_longlong), ("record_size", ctypes.c_int),
                ("size", ctypes.c_int), ("data", ctypes.c_void_p), ("cpu", ctypes.c_int),
                ("ref_count", ctypes.c_int), ("locked", ctypes.c_int), ("priv", ctypes.c_void_p)]


def tep_print(format_text: str, entry: bytes) -> str:
    """libtraceevent's text for one record, given the event's ``format``."""
    assert _TEP is not None, "libtraceevent is missing (make setup installs libtraceevent-dev)"
    lib = ctypes.CDLL(_TEP)
    lib.tep_alloc.restype = ctypes.c_void_p
    tep = ctypes.c_void_p(lib.tep_alloc())
    lib.tep_set_long_size(tep, 8)
    fmt = format_text.encode("latin-1")
    assert lib.tep_parse_event(tep, fmt, len(fmt), b"synthetic") == 0
    data = ctypes.create_string_buffer(entry, len(entry))
    record = _TepRecord(size=len(entry), record_size=len(entry),
                        data=ctypes.cast(data, ctypes.c_void_p))
    seq = _TraceSeq()
    lib.trace_seq_init(ctypes.byref(seq))
    lib.tep_print_event(tep, ctypes.byref(seq), ctypes.byref(record), b"%s", b"INFO")
    text = ctypes.string_at(seq.buffer, seq.len).decode("latin-1")
    lib.trace_seq_destroy(ctypes.byref(seq))
    lib.tep_free(tep)
    return text


def test_libtraceevent_decodes_ours_as_the_kernels() -> None:
    """Our format and record read by libtraceevent = the kernel's record read by it."""
    event = _hs(new_tracefs())
    (theirs,) = oracle_records(HIST["hist-w2"]["raw"])
    ours = build_entry(event, event.id.to_bytes(2, "little") + theirs[2:8], HS_VALUES,
                       dynamic_data(event, HS_VALUES))
    theirs = event.id.to_bytes(2, "little") + theirs[2:]  # their id, ours in the format
    expected = "v=9223372036854775807, id=7, name=hello, w=-2, dname=hello, small=4660"
    assert tep_print(event.format_text(), ours) == expected
    assert tep_print(event.format_text(), theirs) == expected
