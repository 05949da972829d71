"""The public in-process API (``tracefs_fuse.synth``): the kernel API's shape and rules.

The first tests port the kernel's own sample, kernel/trace/synth_event_gen_test.c,
step by step; the rest pin the rules the kernel API has (errnos, field
counting, command text, tracing styles, held files).
"""

from __future__ import annotations

import errno
import os
import threading

import pytest

from tests.engine.synth_oracle import new_tracefs
from tracefs_fuse import synth as S
from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._ringbuf import TraceIterator
from tracefs_fuse.engine._synth import ENOTSUPP
from tracefs_fuse.engine._task import Task
from tracefs_fuse.engine._tracefs import Tracefs

TASK = Task(pid=7, tgid=7, cpu=1, comm="gen")  # type: ignore[arg-type]

CREATE_SYNTH_TEST_FIELDS = [
    S.SynthFieldDesc("pid_t", "next_pid_field"),
    S.SynthFieldDesc("char[16]", "next_comm_field"),
    S.SynthFieldDesc("u64", "ts_ns"),
    S.SynthFieldDesc("char[]", "dynstring_field_1"),
    S.SynthFieldDesc("u64", "ts_ms"),
    S.SynthFieldDesc("unsigned int", "cpu"),
    S.SynthFieldDesc("char[64]", "my_string_field"),
    S.SynthFieldDesc("char[]", "dynstring_field_2"),
    S.SynthFieldDesc("int", "my_int_field"),
]


def lines(tfs: Tracefs) -> list[str]:
    """Every record in the buffers, as ``print_synth_event`` prints it."""
    out = []
    with TraceIterator(tfs.buffer.cpus) as records:
        for record in records:
            data = bytes(record.data)
            out.append(tfs.events.by_id(int.from_bytes(data[:2], "little")).print_trace(data))
    return out


def errno_of(call) -> int:  # noqa: ANN001
    with pytest.raises(TracefsError) as info:
        call()
    return info.value.errno


# -- kernel/trace/synth_event_gen_test.c, in Python --------------------------------------------


def test_synth_event_gen_test_sample() -> None:
    tfs = new_tracefs()

    # test_gen_synth_cmd(): start with four fields, add three, end.
    cmd = S.synth_event_cmd_init(tfs, S.MAX_DYNEVENT_CMD_LEN)
    S.synth_event_gen_cmd_start(cmd, "gen_synth_test",
                                ("pid_t", "next_pid_field"), ("char[16]", "next_comm_field"),
                                ("u64", "ts_ns"), ("u64", "ts_ms"))
    S.synth_event_add_field(cmd, "unsigned int", "cpu")
    S.synth_event_add_field(cmd, "char[64]", "my_string_field")
    S.synth_event_add_field(cmd, "int", "my_int_field")
    S.synth_event_gen_cmd_end(cmd)
    gen_synth_test = S.trace_get_event_file(tfs, None, "synthetic", "gen_synth_test")
    S.trace_array_set_clr_event(tfs, "synthetic", "gen_synth_test", True)
    S.synth_event_trace_array(gen_synth_test,
                              [777, "hula hoops", 1000000, 1000, 1, "thneed", 598], task=TASK)

    # test_create_synth_event(): one step from a field list, dynamic strings too.
    S.synth_event_create(tfs, "create_synth_test", CREATE_SYNTH_TEST_FIELDS)
    create_synth_test = S.trace_get_event_file(tfs, None, "synthetic", "create_synth_test")
    S.trace_array_set_clr_event(tfs, "synthetic", "create_synth_test", True)
    S.synth_event_trace_array(create_synth_test, [
        777, "tiddlywinks", 1000000, "xrayspecs", 1000, 1, "thneed", "kerplunk", 398], task=TASK)

    # test_add_next_synth_val() and test_add_synth_val(): piecewise.
    state = S.synth_event_trace_start(gen_synth_test, task=TASK)
    for value in (777, "slinky", 1000000, 1000, 1, "thneed_2.01", 395):
        S.synth_event_add_next_val(value, state)
    S.synth_event_trace_end(state)
    state = S.synth_event_trace_start(gen_synth_test, task=TASK)
    for name, value in (("ts_ns", 1000000), ("ts_ms", 1000), ("cpu", 1),
                        ("next_pid_field", 777), ("next_comm_field", "silly putty"),
                        ("my_string_field", "thneed_9"), ("my_int_field", 3999)):
        S.synth_event_add_val(name, value, state)
    S.synth_event_trace_end(state)

    # test_trace_synth_event(): all at once, positional.
    S.synth_event_trace(create_synth_test, 444, "clackers", 1000000, "viewmaster", 1000, 1,
                        "Thneed", "yoyos", 999, task=TASK)

    assert lines(tfs) == [
        "gen_synth_test: next_pid_field=777 next_comm_field=hula hoops ts_ns=1000000 "
        "ts_ms=1000 cpu=1 my_string_field=thneed my_int_field=598\n",
        "create_synth_test: next_pid_field=777 next_comm_field=tiddlywinks ts_ns=1000000 "
        "dynstring_field_1=xrayspecs ts_ms=1000 cpu=1 my_string_field=thneed "
        "dynstring_field_2=kerplunk my_int_field=398\n",
        "gen_synth_test: next_pid_field=777 next_comm_field=slinky ts_ns=1000000 "
        "ts_ms=1000 cpu=1 my_string_field=thneed_2.01 my_int_field=395\n",
        "gen_synth_test: next_pid_field=777 next_comm_field=silly putty ts_ns=1000000 "
        "ts_ms=1000 cpu=1 my_string_field=thneed_9 my_int_field=3999\n",
        "create_synth_test: next_pid_field=444 next_comm_field=clackers ts_ns=1000000 "
        "dynstring_field_1=viewmaster ts_ms=1000 cpu=1 my_string_field=Thneed "
        "dynstring_field_2=yoyos my_int_field=999\n",
    ]

    # synth_event_gen_test_exit(): disable, put, delete.
    for file, name in ((gen_synth_test, "gen_synth_test"),
                       (create_synth_test, "create_synth_test")):
        S.trace_array_set_clr_event(tfs, "synthetic", name, False)
        S.trace_put_event_file(file)
        S.synth_event_delete(tfs, name)
    assert tfs.dynamic_events.render() == ""


# -- building commands -----------------------------------------------------------------------------


def test_command_text_is_the_kernels() -> None:
    """dynevent_arg_add: " name " then " type name;" per field."""
    cmd = S.synth_event_cmd_init(new_tracefs())
    S.synth_event_gen_cmd_start(cmd, "e", ("u64", "a"))
    S.synth_event_add_field_str(cmd, "char b[8]")
    S.synth_event_add_fields(cmd, [("s32", "c")])
    assert cmd.text == " e  u64 a; char b[8]; s32 c;"
    assert cmd.n_fields == 4  # gen_cmd_start counts its fields twice


def test_gen_cmd_start_takes_32_fields() -> None:
    """Each field given to gen_cmd_start counts twice toward SYNTH_FIELDS_MAX (64)."""
    fields = [("u8", f"f{i}") for i in range(33)]
    cmd = S.synth_event_cmd_init(new_tracefs())
    S.synth_event_gen_cmd_start(cmd, "ok", *fields[:32])
    cmd = S.synth_event_cmd_init(new_tracefs())
    assert errno_of(lambda: S.synth_event_gen_cmd_start(cmd, "e", *fields)) == errno.EINVAL


@pytest.mark.parametrize(("count", "code"), [(64, None), (65, errno.EINVAL)])
def test_synth_event_create_field_limit(count: int, code: int | None) -> None:
    tfs = new_tracefs()
    fields = [("u8", f"f{i}") for i in range(count)]
    if code is None:
        S.synth_event_create(tfs, "e", fields)
        assert len(tfs.synth_events.find("e").synth_fields) == 64
    else:
        assert errno_of(lambda: S.synth_event_create(tfs, "e", fields)) == code


@pytest.mark.parametrize(("type_", "code"), [
    ("u64", None), ("char[16]", None), ("char[]", None), ("long[]", None),
    ("u64[3]", None),       # has a '[': passes here, fails when the command runs
    ("char[999]", None),    # a malformed char[N] is negative in the kernel: passes here
    ("short", errno.EINVAL), ("foo", errno.EINVAL), (None, errno.EINVAL),
])
def test_add_field_checks_type(type_: str | None, code: int | None) -> None:
    cmd = S.synth_event_cmd_init(new_tracefs())
    S.synth_event_gen_cmd_start(cmd, "e")
    call = lambda: S.synth_event_add_field(cmd, type_, "f")  # type: ignore[arg-type]  # noqa: E731
    if code is None:
        call()
    else:
        assert errno_of(call) == code


def test_failed_command_is_logged_with_the_generated_text() -> None:
    tfs = new_tracefs()
    cmd = S.synth_event_cmd_init(tfs)
    S.synth_event_gen_cmd_start(cmd, "e", ("u64", "a"), ("u64[3]", "b"))
    assert errno_of(lambda: S.synth_event_gen_cmd_end(cmd)) == errno.EINVAL
    log = tfs.error_log.render()
    # The caret is under the type as parsed (errpos("u64[3]")).
    assert log.endswith("synthetic_events: error: Invalid type\n"
                        "  Command: e  u64 a; u64[3] b;\n"
                        "                     ^\n")


def test_e2big_keeps_what_fitted_and_stays_full() -> None:
    cmd = S.synth_event_cmd_init(new_tracefs(), maxlen=16)
    S.synth_event_gen_cmd_start(cmd, "e")
    assert errno_of(lambda: S.synth_event_add_field(cmd, "u64", "abcdefgh")) == errno.E2BIG
    assert cmd.text == " e  u64 abcdefg"  # vsnprintf kept maxlen - 1 bytes
    assert errno_of(lambda: S.synth_event_add_field(cmd, "u8", "x")) == errno.E2BIG


def test_create_errors() -> None:
    tfs = new_tracefs()
    S.synth_event_create(tfs, "e", [("u64", "a")])
    assert errno_of(lambda: S.synth_event_create(tfs, "e", [("u64", "a")])) == errno.EEXIST
    assert errno_of(lambda: S.synth_event_create(tfs, "9e", [("u64", "a")])) == errno.EINVAL
    assert errno_of(lambda: S.synth_event_create(tfs, "x", [])) == errno.EINVAL
    assert errno_of(lambda: S.synth_event_create(tfs, "x", [("u64", None)])) == errno.EINVAL
    assert errno_of(lambda: S.synth_event_delete(tfs, "nosuch")) == errno.ENOENT


def test_command_types_do_not_mix() -> None:
    tfs = new_tracefs()
    kcmd = S.kprobe_event_cmd_init(tfs)
    scmd = S.synth_event_cmd_init(tfs)
    assert errno_of(lambda: S.synth_event_add_field(kcmd, "u64", "a")) == errno.EINVAL
    assert errno_of(lambda: S.synth_event_gen_cmd_start(kcmd, "e")) == errno.EINVAL
    assert errno_of(lambda: S.kprobe_event_add_field(scmd, "x=%ax")) == errno.EINVAL


# -- kprobe commands: built like the kernel's, refused like an unknown symbol ----------------------


def test_kprobe_command_is_refused_and_logged() -> None:
    tfs = new_tracefs()
    cmd = S.kprobe_event_cmd_init(tfs)
    S.kprobe_event_gen_cmd_start(cmd, "gen_kprobe_test", "do_sys_open", "dfd=%ax", "filename=%dx")
    S.kprobe_event_add_fields(cmd, "flags=%cx", "mode=+4($stack)")
    assert cmd.text == ("p:kprobes/gen_kprobe_test do_sys_open  dfd=%ax  filename=%dx "
                        " flags=%cx  mode=+4($stack) ")
    assert errno_of(lambda: S.kprobe_event_gen_cmd_end(cmd)) == errno.EINVAL
    assert tfs.error_log.render().splitlines()[1:] == [
        "  Command: p:kprobes/gen_kprobe_test do_sys_open dfd=%ax filename=%dx flags=%cx "
        "mode=+4($stack)",
        " " * len("  Command: p:kprobes/gen_kprobe_test ") + "^"]
    cmd = S.kprobe_event_cmd_init(tfs)
    S.kretprobe_event_gen_cmd_start(cmd, "gen_kretprobe_test", "do_sys_open", "$retval")
    assert cmd.text.startswith("r:kprobes/gen_kretprobe_test ")
    assert errno_of(lambda: S.kretprobe_event_gen_cmd_end(cmd)) == errno.EINVAL
    assert errno_of(lambda: S.kprobe_event_delete(tfs, "gen_kprobe_test")) == errno.ENOENT


def test_kprobe_command_limits() -> None:
    tfs = new_tracefs()
    cmd = S.kprobe_event_cmd_init(tfs)
    assert errno_of(lambda: S.kprobe_event_gen_cmd_start(cmd, "e", None)) == errno.EINVAL  # type: ignore[arg-type]
    cmd = S.kprobe_event_cmd_init(tfs)
    S.kprobe_event_gen_cmd_start(cmd, "n" * 100, "sym")
    assert cmd.text == "p:kprobes/" + "n" * 53 + " sym "  # snprintf(buf, 64, ...)
    S.kprobe_event_add_fields(cmd, *[f"a{i}=%ax" for i in range(128)])
    assert errno_of(lambda: S.kprobe_event_add_field(cmd, "x=%ax")) == errno.EINVAL


# -- event files, enabling, deleting -------------------------------------------------------------


def test_event_file_lookup_and_hold() -> None:
    tfs = new_tracefs()
    S.synth_event_create(tfs, "e", [("u64", "a")])
    assert errno_of(lambda: S.trace_get_event_file(tfs, "inst", "synthetic", "e")) == errno.ENOENT
    assert errno_of(lambda: S.trace_get_event_file(tfs, None, "synthetic", "x")) == errno.EINVAL
    with S.trace_get_event_file(tfs, None, "synthetic", "e") as file:
        assert errno_of(lambda: S.synth_event_delete(tfs, "e")) == errno.EBUSY
        assert errno_of(lambda: tfs.dynamic_events.write(b"-:e\n", TASK)) == errno.EBUSY
    assert errno_of(lambda: S.trace_put_event_file(file)) == errno.EINVAL
    S.trace_array_set_clr_event(tfs, "synthetic", "e", True)
    assert errno_of(lambda: S.synth_event_delete(tfs, "e")) == errno.EBUSY  # enabled
    S.trace_array_set_clr_event(tfs, None, "e", False)
    S.synth_event_delete(tfs, "e")
    assert errno_of(lambda: S.trace_array_set_clr_event(tfs, "synthetic", "e", True)) == errno.EINVAL


def test_tracing_rules() -> None:
    tfs = new_tracefs()
    S.synth_event_create(tfs, "e", [("u64", "a"), ("char[8]", "s")])
    S.synth_event_create(tfs, "d", [("u64", "a"), ("char[]", "s")])
    e = S.trace_get_event_file(tfs, None, "synthetic", "e")
    d = S.trace_get_event_file(tfs, None, "synthetic", "d")
    S.synth_event_trace(e, 1, "off", task=TASK)  # disabled: nothing, no error
    S.trace_array_set_clr_event(tfs, "synthetic", None, True)
    assert errno_of(lambda: S.synth_event_trace(e, 1, task=TASK)) == errno.EINVAL
    assert errno_of(lambda: S.synth_event_trace_start(d, task=TASK)) == ENOTSUPP
    with S.synth_event_trace_start(e, task=TASK) as state:
        S.synth_event_add_val("s", "\u00e9", state)  # str goes in as UTF-8
        assert errno_of(lambda: S.synth_event_add_next_val(5, state)) == errno.EINVAL
        with pytest.raises(TypeError):
            S.synth_event_add_val("a", None, state)
    S.synth_event_trace(d, 2, b"raw\xff", task=TASK)
    with pytest.raises(TypeError):
        S.synth_event_trace(e, "not a number", "x", task=TASK)
    assert lines(tfs) == [
        "e: a=0 s=\n",                           # the wrong count commits, unfilled
        "e: a=0 s=\u00c3\u00a9\n",               # bytes printed as Latin-1 text
        "d: a=2 s=raw\xff\n",
    ]


def test_records_carry_the_calling_thread() -> None:
    tfs = new_tracefs()
    S.synth_event_create(tfs, "e", [("u64", "a")])
    file = S.trace_get_event_file(tfs, None, "synthetic", "e")
    S.trace_array_set_clr_event(tfs, "synthetic", "e", True)
    S.synth_event_trace(file, 1)
    with TraceIterator(tfs.buffer.cpus) as records:
        (record,) = list(records)
    assert int.from_bytes(bytes(record.data)[4:8], "little") == threading.get_native_id()
    task = S.current_task(tfs.nr_cpus)
    assert task.tgid == os.getpid() and 0 <= task.cpu < tfs.nr_cpus and task.comm


def test_exports() -> None:
    for name in S.__all__:
        assert hasattr(S, name), name
