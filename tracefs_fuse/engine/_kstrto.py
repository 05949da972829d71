"""The kernel's number parsers: ``kstrtoull`` and ``kstrtoul_from_user``.

Control files and command grammars accept exactly what these accept: an
optional ``+``, digits in the base (base 0 picks ``0x`` hex, leading-0 octal or
decimal), and one optional trailing newline; anything else is EINVAL.

Kernel: lib/kstrtox.c.
"""

from __future__ import annotations

import errno

from ._errors import TracefsError

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: kstrtoul_from_user() copies into ``char buf[1 + sizeof(long) * 8 + 1 + 1]``.
_FROM_USER_MAX = 66


def _invalid(message: str) -> TracefsError:
    return TracefsError(errno.EINVAL, message)


def kstrtoull(text: str, base: int) -> int:
    """``kstrtoull``.

    Raises:
        TracefsError: EINVAL for anything but a number (the kernel's
            EINVAL/ERANGE).
    """
    s = text[1:] if text.startswith("+") else text
    if base == 0:
        # _parse_integer_fixup_radix: "0x" needs a hex digit after it.
        if s.startswith("0"):
            base = 16 if s[1:2] in ("x", "X") and s[2:3] in _HEX_DIGITS else 8
        else:
            base = 10
    if base == 16 and s[:2].lower() == "0x":
        s = s[2:]
    if s.endswith("\n"):
        s = s[:-1]
    digits = "0123456789abcdef"[:base]
    if not s or any(c.lower() not in digits for c in s):
        raise _invalid(f"not a base-{base} number: {text!r}")
    value = int(s, base)
    if value >= 1 << 64:
        raise _invalid(f"out of range: {text!r}")
    return value


def kstrtou32(text: str, base: int) -> int:
    value = kstrtoull(text, base)
    if value >= 1 << 32:
        raise _invalid(f"out of range: {text!r}")
    return value


def kstrtoul_from_user(data: bytes, base: int = 10) -> int:
    """``kstrtoul_from_user``: parse what a control-file write carried.

    Only the first 66 bytes count, and the text ends at a NUL.
    """
    text = data[:_FROM_USER_MAX].split(b"\0", 1)[0].decode("latin-1")
    return kstrtoull(text, base)
