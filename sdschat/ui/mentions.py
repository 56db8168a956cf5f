"""Mentions: does a message name you (``@alice``, ``alice:``, "hi alice"), and name completion (``na`` or
``@na`` + Tab)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["names_pattern", "mentions", "name_choices"]


def names_pattern(names: Iterable[str]) -> re.Pattern | None:
    """One pattern for ``names`` (a nick, highlight words) as whole words, case-insensitive; None for none."""
    words = sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![\w@])@?(?:{alternatives})(?!\w)", re.IGNORECASE)


def mentions(text: str, pattern: re.Pattern | None) -> bool:
    return pattern is not None and pattern.search(text) is not None


def name_choices(before_cursor: str, names: Iterable[str], *, first_line: bool = True) -> tuple[int, list[str]]:
    """Where the word that ends ``before_cursor`` starts, and what Tab may put there, in order: each of ``names``
    the word begins (with or without ``@``, any case) as it goes in a line, ``bob: `` (``@bob: ``) addressing
    someone at the start of the message (``first_line``: ``before_cursor`` is on its first line), ``bob ``
    elsewhere. No choices for nothing typed (a bare ``@`` offers everyone)."""
    m = re.search(r"(?:^|(?<=\s))(@?)([^\s@]*)$", before_cursor)
    if m is None or not m.group(0):
        return len(before_cursor), []
    at, prefix = m.group(1), m.group(2).casefold()
    tail = ": " if m.start() == 0 and first_line else " "
    found = sorted({n for n in names if n and n.casefold().startswith(prefix)}, key=str.casefold)
    return m.start(), [f"{at}{name}{tail}" for name in found]
