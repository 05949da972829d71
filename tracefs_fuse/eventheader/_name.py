"""EventHeader tracepoint names: ``ProviderName_L<level>K<keyword>[Options]``.

Rules (from the spec's "Tracepoint Names"):
  * Level and keyword are lowercase hexadecimal (``printf("L%xK%lx")``).
  * Options follow the keyword, each an uppercase ASCII letter and zero or
    more digits or lowercase letters, sorted by letter; ``G`` is the
    provider group, other letters are kept as they are.
  * The provider name may contain ``_`` (never ``' '`` or ``':'``): the
    attributes are the last ``_L…K…`` that parses as a whole.
  * A multi-format tracepoint (``user_events_multi``) carries the kernel's
    ``.<hex>`` suffix after the registered name; it is not part of the name.
"""

from __future__ import annotations

import re

import msgspec

from ._spec import NAME_MAX

_NAME = re.compile(
    r"^(?P<provider>[^ :]+)_L(?P<level>[0-9a-f]+)K(?P<keyword>[0-9a-f]+)"
    r"(?P<options>(?:[A-Z][0-9a-z]*)*)$")
_OPTION = re.compile(r"[A-Z][0-9a-z]*")
_MULTI_SUFFIX = re.compile(r"\.[0-9a-f]+$")


class TracepointName(msgspec.Struct, frozen=True, kw_only=True):
    """The attributes an EventHeader tracepoint name carries.

    Attributes:
        provider: the provider name.
        level: the severity level of every event on the tracepoint.
        keyword: the category bits.
        options: each option letter and its value, in name order (``G``: group).
    """

    provider: str
    level: int
    keyword: int
    options: dict[str, str] = {}

    @property
    def group(self) -> str | None:
        return self.options.get("G")


def parse_tracepoint_name(name: str, *, multi_format: bool = False) -> TracepointName | None:
    """The attributes of an EventHeader tracepoint name, or None if it is not one.

    Args:
        name: the tracepoint name.
        multi_format: the event is in ``user_events_multi``, whose names end in
            ``.<hex>``.
    """
    if multi_format:
        name = _MULTI_SUFFIX.sub("", name)
    match = _NAME.match(name)
    if match is None or len(name) >= NAME_MAX:
        return None
    level = int(match["level"], 16)
    keyword = int(match["keyword"], 16)
    if level > 0xFF or keyword >= 1 << 64:
        return None
    options = {option[0]: option[1:] for option in _OPTION.findall(match["options"])}
    return TracepointName(provider=match["provider"], level=level, keyword=keyword,
                          options=options)
