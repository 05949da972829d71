"""The user_events command grammar against what the real kernel answered.

Rows come from what Linux 6.12.117 with CONFIG_USER_EVENTS answered, booted by
the project's oracle (``tests/oracle/kernel``, docs/oracle.md): each command
either registers or gets EINVAL.
"""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracefs_fuse.engine._errors import TracefsError
from tracefs_fuse.engine._field import render_format
from tracefs_fuse.engine._kstrto import kstrtoll, kstrtou32, kstrtoul_from_user, kstrtoull
from tracefs_fuse.engine._user_command import (fields_match, parse_fields, print_fmt, show_fields,
                                               split_command, split_match_args)

# (command, accepted by the kernel's parser)
ORACLE_ROWS = [
    ("m01 u32 a", True),
    ("m02  u32 a", True),
    ("m03 u32  a", False),
    ("m04 u32 a;  u32 b", True),
    ("m05 u32 a ", False),
    ("m06 u32 a;", True),
    ("m07 u32 a; ", True),
    ("m08 u32 a;; u32 b", True),
    ("m09 u32 a;u32 b", True),
    ("m10\tu32 a", False),
    ("m11 u33 a", False),
    ("m12 long a", False),
    ("m13 char[0] a", False),
    ("m14 char[1] a", True),
    ("m15 char[1024] a", True),
    ("m16 char[1025] a", False),
    ("m17 char[] a", False),
    ("m18 char[0x10] a", True),
    ("m19 char[-1] a", False),
    ("m26", True),
    ("m27 ", True),
    ("m28 u32", False),
    ("m29 struct foo bar", False),
    ("m30 struct foo bar 0", False),
    ("m31 struct foo bar 16", True),
    ("m32 char a 20", False),
    ("m33 struct foo bar 0x10", False),
    ("m34 u32 a; u32 a", True),
    ("m35 __data_loc char[] s", True),
    ("m36 __data_loc char s", True),
    ("m37 __data_loc u32[] s", True),
    ("m38 __rel_loc char[20] s", True),
    ("m-39 u32 a", True),
    ("m.40 u32 a", True),
    ("42m u32 a", True),
    ("", True),
    (" ", True),
    (" u32 a", True),
]


@pytest.mark.parametrize(("command", "accepted"), ORACLE_ROWS)
def test_parse_fields_matches_kernel(command: str, accepted: bool) -> None:
    cmd = split_command(command)
    if accepted:
        parse_fields(cmd.args)
    else:
        with pytest.raises(TracefsError) as info:
            parse_fields(cmd.args)
        assert info.value.errno == errno.EINVAL


@pytest.mark.parametrize("command", ["m20:BPF_ITER u32 a", "m21:FOO u32 a", "m22: u32 a"])
def test_split_command_keeps_text_flags(command: str) -> None:
    assert split_command(command).flags is not None


LAYOUT_ROWS = [
    # (fields, [(type, name, offset, size, signed)])
    ("u8 a; u64 b", [("u8", "a", 8, 1, False), ("u64", "b", 9, 8, False)]),
    ("unsigned int x; short y", [("unsigned int", "x", 8, 4, False), ("short", "y", 12, 2, True)]),
    ("__data_loc unsigned char[] q; __rel_loc unsigned char[] r",
     [("__data_loc unsigned char[]", "q", 8, 4, True), ("__rel_loc unsigned char[]", "r", 12, 4, True)]),
    ("struct foo bar 16; char c", [("struct foo", "bar", 8, 16, True), ("char", "c", 24, 1, True)]),
    ("char[010] o", [("char[010]", "o", 8, 8, True)]),  # base 0: leading 0 is octal
    ("unsigned char[4]xyz o", [("unsigned char[4]xyz", "o", 8, 4, False)]),  # after ']' unchecked
    ("u32 ", [("u32", "", 8, 4, False)]),  # an empty name passes the kernel's check
]


@pytest.mark.parametrize(("args", "expected"), LAYOUT_ROWS)
def test_parse_fields_layout(args: str, expected: list[tuple[str, str, int, int, bool]]) -> None:
    fields = parse_fields(args)
    assert [(f.type, f.name, f.offset, f.size, f.is_signed) for f in fields] == expected


EINVAL, ERANGE = errno.EINVAL, errno.ERANGE


@pytest.mark.parametrize(("text", "base", "value", "error"), [
    ("16", 10, 16, None), ("+16", 10, 16, None), ("16\n", 10, 16, None),
    ("0x10", 0, 16, None), ("0X1f", 0, 31, None), ("010", 0, 8, None), ("0", 0, 0, None),
    ("0x10", 16, 16, None), ("9", 0, 9, None), ("18446744073709551615", 10, 2**64 - 1, None),
    ("0x", 0, None, EINVAL), ("", 10, None, EINVAL), ("1 ", 10, None, EINVAL),
    ("-1", 10, None, EINVAL), ("0x10", 10, None, EINVAL), ("08", 0, None, EINVAL),
    ("1\n\n", 10, None, EINVAL), ("++1", 10, None, EINVAL),
    # _parse_integer reads every digit first: overflow wins over junk.
    ("18446744073709551616", 10, None, ERANGE), ("18446744073709551616x", 10, None, ERANGE),
    ("0x10000000000000000", 0, None, ERANGE),
])
def test_kstrtoull(text: str, base: int, value: int | None, error: int | None) -> None:
    if error is not None:
        with pytest.raises(TracefsError) as info:
            kstrtoull(text, base)
        assert info.value.errno == error
    else:
        assert kstrtoull(text, base) == value


@pytest.mark.parametrize(("text", "value", "error"), [
    ("-1", -1, None), ("+1", 1, None), ("-0x10", -16, None), ("9223372036854775807", 2**63 - 1, None),
    ("-9223372036854775808", -2**63, None), ("9223372036854775808", None, ERANGE),
    ("-9223372036854775809", None, ERANGE), ("--1", None, EINVAL), ("-+1", None, EINVAL),
    ("-", None, EINVAL),
])
def test_kstrtoll(text: str, value: int | None, error: int | None) -> None:
    if error is not None:
        with pytest.raises(TracefsError) as info:
            kstrtoll(text, 0)
        assert info.value.errno == error
    else:
        assert kstrtoll(text, 0) == value


@pytest.mark.parametrize(("text", "error"), [("4294967295", None), ("4294967296", ERANGE),
                                             ("99999999999999999999", ERANGE), ("4x", EINVAL)])
def test_kstrtou32(text: str, error: int | None) -> None:
    if error is None:
        assert kstrtou32(text, 10) == int(text)
    else:
        with pytest.raises(TracefsError) as info:
            kstrtou32(text, 10)
        assert info.value.errno == error


@pytest.mark.parametrize(("data", "value"), [
    (b"1", 1), (b"0\n", 0), (b"2", 2), (b"abc", None), (b" 1 ", None), (b"-1", None), (b"", None),
    (b"1\0junk", 1), (b"0" * 65 + b"1junk", 1),  # only 66 bytes are looked at
])
def test_kstrtoul_from_user(data: bytes, value: int | None) -> None:
    if value is None:
        with pytest.raises(TracefsError):
            kstrtoul_from_user(data)
    else:
        assert kstrtoul_from_user(data) == value


# Golden `format` files from the oracle (Linux 6.12.117); the kernel prints
# uninitialised memory inside the [] of arrays, we print nothing there.
GOLDEN_FORMATS = {
    ("test", 318, "u32 count; char[20] msg"): """\
name: test
ID: 318
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u32 count;\toffset:8;\tsize:4;\tsigned:0;
\tfield:char msg[];\toffset:12;\tsize:20;\tsigned:1;

print fmt: "count=%u msg=%s", REC->count, REC->msg
""",
    ("test_dl", 319, "__data_loc char[] s"): """\
name: test_dl
ID: 319
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] s;\toffset:8;\tsize:4;\tsigned:1;

print fmt: "s=%s", __get_str(s)
""",
    ("test_rl", 320, "__rel_loc char[] s"): """\
name: test_rl
ID: 320
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__rel_loc char s[];\toffset:8;\tsize:4;\tsigned:1;

print fmt: "s=%s", __get_rel_str(s)
""",
    ("test_struct", 321, "struct foo bar 16"): """\
name: test_struct
ID: 321
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:struct foo bar;\toffset:8;\tsize:16;\tsigned:1;

print fmt: "bar=%llu", REC->bar
""",
    ("test_empty", 322, None): """\
name: test_empty
ID: 322
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;


print fmt: ""
""",
}


@pytest.mark.parametrize(("key", "golden"), list(GOLDEN_FORMATS.items()),
                         ids=[k[0] for k in GOLDEN_FORMATS])
def test_format_matches_kernel(key: tuple[str, int, str | None], golden: str) -> None:
    name, event_id, args = key
    fields = parse_fields(args)
    assert render_format(name, event_id, fields, print_fmt(fields)) == golden


def test_print_fmt_of_every_type_matches_kernel() -> None:
    args = ("s8 a; u8 b; s16 c; u16 d; s32 e; u32 f; s64 g; u64 h; char i; unsigned char j; "
            "short k; unsigned short l; int m; unsigned int n; unsigned char[4] o; char[0x8] p; "
            "__data_loc unsigned char[] q; __rel_loc unsigned char[] r")
    assert print_fmt(parse_fields(args)) == (
        '"a=%d b=%u c=%d d=%u e=%d f=%u g=%lld h=%llu i=%d j=%u k=%d l=%u m=%d n=%u o=%s p=%s '
        'q=%s r=%s", REC->a, REC->b, REC->c, REC->d, REC->e, REC->f, REC->g, REC->h, REC->i, '
        'REC->j, REC->k, REC->l, REC->m, REC->n, REC->o, REC->p, __get_str(q), __get_rel_str(r)')
    assert show_fields(parse_fields(args)) == " " + args


@pytest.mark.parametrize(("registered", "again", "match"), [
    ("u32 a; u32 b", "u32 a; u32 b", True),
    ("u32 a; u32 b", "u32 a;u32 b", True),
    ("u32 a; u32 b", "u32 a; u32 b;", True),
    ("u32 a; u32 b", "u32  a;\tu32 b", True),  # runs of white space collapse
    ("u32 a; u32 b", "u32 a; u32 c", False),
    ("u32 a; u32 b", "u32 a", False),
    ("u32 a", "u32 a; u32 b", False),
    ("u32 a", "", False),
    ("", "", True),
    ("struct foo bar 16", "struct foo bar 16", True),
    ("struct foo bar 16", "struct foo bar 0x10", False),
    ("__data_loc char[] s", "__data_loc char[] s", True),
])
def test_fields_match(registered: str, again: str, match: bool) -> None:
    assert fields_match(parse_fields(registered or None), split_match_args(again)) is match


@given(st.binary(max_size=600))
def test_parser_accepts_or_raises_einval(raw: bytes) -> None:
    cmd = split_command(raw.decode("latin-1"))
    try:
        fields = parse_fields(cmd.args)
    except TracefsError as exc:
        assert exc.errno == errno.EINVAL
    else:
        offset = 8
        for field in fields:
            assert field.offset == offset and field.size > 0
            offset += field.size
        fields_match(fields, split_match_args(cmd.args or ""))
