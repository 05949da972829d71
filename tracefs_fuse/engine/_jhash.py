"""The kernel's ``jhash`` and ``hash_32``, to list events in hash-table order.

user_events keeps events in ``DECLARE_HASHTABLE(register_table, 8)`` keyed by
``jhash(name, strlen(name), 0)``; ``user_events_status`` walks the buckets in
order and each bucket newest first. Reproducing the hash reproduces the order.

Kernel: include/linux/jhash.h, include/linux/hash.h.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
JHASH_INITVAL = 0xDEADBEEF
GOLDEN_RATIO_32 = 0x61C88647


def _rol32(word: int, shift: int) -> int:
    return ((word << shift) | (word >> (32 - shift))) & _MASK


def jhash(key: bytes, initval: int = 0) -> int:
    """Bob Jenkins' lookup3 hash exactly as ``jhash()`` computes it."""
    length = len(key)
    a = b = c = (JHASH_INITVAL + length + initval) & _MASK
    k = 0
    while length > 12:
        a = (a + int.from_bytes(key[k:k + 4], "little")) & _MASK
        b = (b + int.from_bytes(key[k + 4:k + 8], "little")) & _MASK
        c = (c + int.from_bytes(key[k + 8:k + 12], "little")) & _MASK
        # __jhash_mix
        a = (a - c) & _MASK; a ^= _rol32(c, 4); c = (c + b) & _MASK
        b = (b - a) & _MASK; b ^= _rol32(a, 6); a = (a + c) & _MASK
        c = (c - b) & _MASK; c ^= _rol32(b, 8); b = (b + a) & _MASK
        a = (a - c) & _MASK; a ^= _rol32(c, 16); c = (c + b) & _MASK
        b = (b - a) & _MASK; b ^= _rol32(a, 19); a = (a + c) & _MASK
        c = (c - b) & _MASK; c ^= _rol32(b, 4); b = (b + a) & _MASK
        length -= 12
        k += 12
    if length == 0:
        return c
    tail = key[k:] + bytes(12 - length)  # the switch's fall-through adds zeros
    a = (a + int.from_bytes(tail[0:4], "little")) & _MASK
    b = (b + int.from_bytes(tail[4:8], "little")) & _MASK
    c = (c + int.from_bytes(tail[8:12], "little")) & _MASK
    # __jhash_final
    c ^= b; c = (c - _rol32(b, 14)) & _MASK
    a ^= c; a = (a - _rol32(c, 11)) & _MASK
    b ^= a; b = (b - _rol32(a, 25)) & _MASK
    c ^= b; c = (c - _rol32(b, 16)) & _MASK
    a ^= c; a = (a - _rol32(c, 4)) & _MASK
    b ^= a; b = (b - _rol32(a, 14)) & _MASK
    c ^= b; c = (c - _rol32(b, 24)) & _MASK
    return c


def hash_32(value: int, bits: int) -> int:
    """``hash_32``: the bucket of a 32-bit key in a ``1 << bits`` table."""
    return ((value * GOLDEN_RATIO_32) & _MASK) >> (32 - bits)
