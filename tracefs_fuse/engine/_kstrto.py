"""The kernel's number parsers: ``kstrtoull``, ``kstrtoll``, ``kstrtou32`` and
``kstrtoul_from_user``.

Control files and command grammars accept exactly what these accept: an
optional ``+`` (``-`` for the signed one), digits in the base (base 0 picks
``0x`` hex, leading-0 octal or decimal), and one optional trailing newline.
A run of digits too large for the type is ERANGE, even with junk after it
(``_parse_integer`` reads every digit before anything else is looked at);
anything else is EINVAL.

Kernel: lib/kstrtox.c.
"""

from __future__ import annotations

import errno

from ._errors import TracefsError

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: kstrtoul_from_user() copies into ``char buf[1 + sizeof(long) * 8 + 1 + 1]``.
_FROM_USER_MAX = 66


def _unsigned(text: str, base: int) -> int:
    """``_kstrtoull``: no sign accepted."""
    s = text
    if base == 0:
        # _parse_integer_fixup_radix: "0x" needs a hex digit after it.
        if s.startswith("0"):
            base = 16 if s[1:2] in ("x", "X") and s[2:3] in _HEX_DIGITS else 8
        else:
            base = 10
    if base == 16 and s[:2].lower() == "0x":
        s = s[2:]
    digits = "0123456789abcdef"[:base]
    count = 0
    while count < len(s) and s[count].lower() in digits:
        count += 1
    value = int(s[:count], base) if count else 0
    if value >> 64:
        raise TracefsError(errno.ERANGE, f"out of range: {text!r}")
    if not count or s[count:] not in ("", "\n"):
        raise TracefsError(errno.EINVAL, f"not a base-{base} number: {text!r}")
    return value


def kstrtoull(text: str, base: int) -> int:
    """``kstrtoull``.

    Raises:
        TracefsError: ERANGE above 2**64 - 1, else EINVAL for anything but a
            number.
    """
    return _unsigned(text[1:] if text.startswith("+") else text, base)


def kstrtoll(text: str, base: int) -> int:
    """``kstrtoll``: as :func:`kstrtoull`, with a ``-`` and a signed range."""
    if text.startswith("-"):
        magnitude = _unsigned(text[1:], base)
        if magnitude > 1 << 63:
            raise TracefsError(errno.ERANGE, f"out of range: {text!r}")
        return -magnitude
    value = kstrtoull(text, base)
    if value >> 63:
        raise TracefsError(errno.ERANGE, f"out of range: {text!r}")
    return value


def kstrtou32(text: str, base: int) -> int:
    """``kstrtou32`` (= ``kstrtouint``)."""
    value = kstrtoull(text, base)
    if value >> 32:
        raise TracefsError(errno.ERANGE, f"out of range: {text!r}")
    return value


def kstrtoul_from_user(data: bytes, base: int = 10) -> int:
    """``kstrtoul_from_user``: parse what a control-file write carried.

    Only the first 66 bytes count, and the text ends at a NUL.
    """
    text = data[:_FROM_USER_MAX].split(b"\0", 1)[0].decode("latin-1")
    return kstrtoull(text, base)
