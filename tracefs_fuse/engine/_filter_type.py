"""``enum filter_field_type`` and ``filter_assign_type``: what kind of value a field holds.

The kernel derives it from a field's C type with substring tests; the text
printer and the ``inject`` parser both decide how to read or store a field
from it.

Kernel: kernel/trace/trace_events_filter.c (``filter_assign_type``),
kernel/trace/trace_events.c (the ``CPU``/``COMM``/``STACKTRACE`` pseudo-fields).
"""

from __future__ import annotations

import enum


class FilterType(enum.Enum):
    """``enum filter_field_type``."""

    OTHER = "other"
    STATIC_STRING = "static_string"
    DYN_STRING = "dyn_string"
    RDYN_STRING = "rdyn_string"
    PTR_STRING = "ptr_string"
    CPUMASK = "cpumask"
    #: Pseudo-fields every event has for filters (``common_cpu``, ``comm``, …).
    CPU = "cpu"
    COMM = "comm"
    STACKTRACE = "stacktrace"

    @property
    def is_string(self) -> bool:
        """``is_string_field``."""
        return self in _STRING_TYPES


_STRING_TYPES = frozenset({FilterType.STATIC_STRING, FilterType.DYN_STRING,
                           FilterType.RDYN_STRING, FilterType.PTR_STRING, FilterType.COMM})


def filter_assign_type(type_: str) -> FilterType:
    """``filter_assign_type``: a field's kind, from its type.

    Substring tests, as in the kernel: ``__data_loc unsigned char[]`` is a
    string, ``struct char[2]`` a static string, ``__data_loc u8[]`` an
    ``OTHER`` (printed as a byte array).
    """
    if "__data_loc" in type_:
        if "char" in type_:
            return FilterType.DYN_STRING
        if "cpumask_t" in type_:
            return FilterType.CPUMASK
    if "__rel_loc" in type_ and "char" in type_:
        return FilterType.RDYN_STRING
    if "[" in type_ and "char" in type_:
        return FilterType.STATIC_STRING
    if type_ in ("char *", "const char *"):
        return FilterType.PTR_STRING
    return FilterType.OTHER
