"""Alt+key where the terminal sends Alt as ESC and the key (tmux, xterm, GNOME Terminal, kitty, ...).

Textual 8.2 reads ``ESC 1`` .. ``ESC 9``, ``ESC 0``, ``ESC -`` and ``ESC =`` as the characters macOS types
with Option (``¡ ™ £ ¢ ∞ § ¶ • ª º – ≠``: WezTerm on macOS sends those sequences for them), so
``alt+1`` never fires and the input gets ``¡`` instead; and ``ESC Enter`` arrives as a plain Enter (which
sends the message the person meant to break into lines). :func:`install` maps these sequences to the
Alt keys they are everywhere else: ``alt+1`` .. ``alt+0``, ``alt+minus``, ``alt+equals_sign`` and
``alt+enter``, as one key at once (not after the escape delay). A typed ``£`` or ``¡`` (the character
itself, as a UK keyboard or a compose key sends it) is untouched; only the two-byte ESC sequence changes.
Alt+arrows arrive as CSI sequences (``ESC [1;3D``), which Textual already reads as ``alt+left``.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["ALT_SEQUENCES", "install"]

#: ESC + character -> the key Textual reports (its names for ``-`` and ``=``)
ALT_SEQUENCES: dict[str, str] = {
    **{f"\x1b{d}": f"alt+{d}" for d in "0123456789"},
    "\x1b-": "alt+minus",
    "\x1b=": "alt+equals_sign",
    "\x1b\r": "alt+enter",
}

# Textual's table maps a sequence to a tuple of keys (members of its string enum ``Keys``) or to a character;
# a string enum of our own gives it the key names above.
_MEMBERS = {f"K{i}": name for i, name in enumerate(ALT_SEQUENCES.values())}
_AltKey = Enum("_AltKey", _MEMBERS, type=str)  # type: ignore[misc]  # members made from ALT_SEQUENCES, not listed


def install() -> None:
    """Make Textual's input parser report :data:`ALT_SEQUENCES` as Alt keys (idempotent; every app of this
    process: the parser has one table). A Textual without that table keeps its own reading."""
    try:
        from textual._ansi_sequences import ANSI_SEQUENCES_KEYS
    except ImportError:  # pragma: no cover - another Textual (the terminal tests say whether Alt+digit works)
        return

    by_name = {member.value: member for member in _AltKey}
    for sequence, name in ALT_SEQUENCES.items():
        # Textual types its table read-only (a Mapping of its own Keys); it is a dict, and changing it is the hook
        ANSI_SEQUENCES_KEYS[sequence] = (by_name[name],)  # type: ignore[index]
