"""A command used wrongly: :class:`UsageError`, and the parsers of the numbers people type (no Textual, no node).

The slash commands and the link controls (F2) read the same numbers: a share of frames (``0.2``, ``20%``) and
milliseconds. What they refuse is the person's input, not a failure of the program, so it is a
:class:`~sdschat.node.UserError`: the pane shows its text as a notice, and a ``ValueError`` from a bug is never
mistaken for it.
"""

from __future__ import annotations

from sdschat.node import UserError

__all__ = ["UsageError", "parse_probability", "parse_ms"]


class UsageError(UserError):
    """A slash command or a field used wrongly: its one line says how to use it."""


def parse_probability(text: str) -> float:
    """``0.2``, ``.2`` or ``20%`` -> 0.2; :class:`UsageError` (one line) otherwise."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"not a probability: {text!r} (use 0.2 or 20%)") from None
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"probability out of range: {text} (0..1 or 0%..100%)")
    return value


def parse_ms(text: str) -> float:
    """``120`` or ``120ms`` -> 120.0, under an hour; :class:`UsageError` (one line) otherwise."""
    t = text.strip().lower().removesuffix("ms")
    try:
        value = float(t)
    except ValueError:
        raise UsageError(f"not a number of milliseconds: {text!r}") from None
    if not 0 <= value < 3_600_000:
        raise UsageError(f"milliseconds out of range: {text}")
    return value
