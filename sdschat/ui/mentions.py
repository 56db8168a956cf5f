"""Mentions: does a message name you (``@alice``, ``alice:``, "hi alice"), and ``@na`` + Tab completion."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["names_pattern", "mentions", "complete_mention"]


def names_pattern(names: Iterable[str]) -> re.Pattern | None:
    """One pattern for ``names`` (a nick, highlight words) as whole words, case-insensitive; None for none."""
    words = sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![\w@])@?(?:{alternatives})(?!\w)", re.IGNORECASE)


def mentions(text: str, pattern: re.Pattern | None) -> bool:
    return pattern is not None and pattern.search(text) is not None


def complete_mention(before_cursor: str, names: Iterable[str]) -> tuple[int, str] | None:
    """``(start, replacement)`` completing the ``@prefix`` that ends ``before_cursor`` from ``names``: a unique
    match becomes ``@name `` (``@name: `` at the start of the message), several their common prefix; None when
    there is no ``@`` word or nothing matches."""
    m = re.search(r"(?:^|(?<=\s))@([^\s@]*)$", before_cursor)
    if m is None:
        return None
    prefix = m.group(1).casefold()
    found = sorted({n for n in names if n and n.casefold().startswith(prefix)}, key=str.casefold)
    if not found:
        return None
    if len(found) == 1:
        tail = ": " if m.start() == 0 else " "
        return m.start(), f"@{found[0]}{tail}"
    common = found[0]
    for name in found[1:]:
        while not name.casefold().startswith(common.casefold()):
            common = common[:-1]
    return (m.start(), f"@{common}") if len(common) > len(prefix) else None
