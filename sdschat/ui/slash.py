"""Slash commands: the table, parsing and completion (no Textual, no node)."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["SlashCommand", "COMMANDS", "WINDOW_COMMANDS", "parse", "complete", "matching", "parse_probability",
           "parse_ms"]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    args: str
    help: str

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("nick", "NAME", "change your nick"),
    SlashCommand("join", "NAME|TOKEN", "join a channel by invite token, or start a new one called NAME"),
    SlashCommand("part", "", "leave this channel (its history stays on disk)"),
    SlashCommand("invite", "", "show this channel's invite token and copy it to the clipboard"),
    SlashCommand("mute", "", "mentions here: no bell, no desktop notification (still highlighted)"),
    SlashCommand("unmute", "", "mentions here ring and notify again"),
    SlashCommand("me", "ACTION", "send an action: * you ACTION"),
    SlashCommand("kick", "NAME", "remove a member (admins): a new channel key for everyone else"),
    SlashCommand("rekey", "", "rotate the channel key without removing anyone (admins)"),
    SlashCommand("admin", "NAME", "make a member an admin too (admins)"),
    SlashCommand("search", "WORDS", 'find messages (word*, "a phrase", OR, NOT); Enter jumps to one'),
    SlashCommand("loss", "IN [OUT]", "drop that share of incoming [outgoing] frames (0.2 or 20%)"),
    SlashCommand("delay", "MS [JITTER]", "hold every frame MS ms (± JITTER ms reorders them)"),
    SlashCommand("offline", "", "unplug: drop every frame, as if the network were gone"),
    SlashCommand("online", "", "plug back in (unacknowledged messages go out again)"),
    SlashCommand("stats", "", "channel health and counters"),
    SlashCommand("wire", "", "the frames in and out, live (F5)"),
    SlashCommand("gaps", "", "every gap noticed here and how it closed"),
    SlashCommand("members", "", "everyone seen here: last heard, acks, repairs, loss from them"),
    SlashCommand("whois", "NAME", "who that is: fingerprint, first and last heard, admin or not"),
    SlashCommand("export", "PATH", "write the log you see (.jsonl: JSON lines, else text)"),
    SlashCommand("help", "", "keys, commands and what the glyphs mean"),
    SlashCommand("quit", "", "leave"),
)
_BY_NAME = {c.name: c for c in COMMANDS}
#: commands about the channels of the window (bare ``sdschat``), handled by the app, not the pane
WINDOW_COMMANDS = frozenset({"join", "part", "invite", "mute", "unmute"})


def parse(text: str) -> tuple[str, str] | None:
    """``"/loss 0.2 0.1"`` -> ``("loss", "0.2 0.1")``; ``None`` if not a command ("//x" sends "/x")."""
    if not text.startswith("/") or text.startswith("//"):
        return None
    head, _, rest = text[1:].partition(" ")
    return head.strip().lower(), rest.strip()


def matching(text: str) -> list[SlashCommand]:
    """Commands whose name starts with what is typed after the slash (before any space)."""
    if not text.startswith("/") or " " in text or "\n" in text:
        return []
    prefix = text[1:].lower()
    return [c for c in COMMANDS if c.name.startswith(prefix)]


def complete(text: str) -> str | None:
    """Tab completion of the command name: a unique match gets a trailing space."""
    found = matching(text)
    if not found:
        return None
    if len(found) == 1:
        return f"/{found[0].name} "
    common = os.path.commonprefix([c.name for c in found])
    return f"/{common}" if len(common) > len(text) - 1 else None


def lookup(name: str) -> SlashCommand | None:
    return _BY_NAME.get(name)


def parse_probability(text: str) -> float:
    """``0.2``, ``.2`` or ``20%`` -> 0.2; ValueError (one line) otherwise."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError(f"not a probability: {text!r} (use 0.2 or 20%)") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"probability out of range: {text} (0..1 or 0%..100%)")
    return value


def parse_ms(text: str) -> float:
    t = text.strip().lower().removesuffix("ms")
    try:
        value = float(t)
    except ValueError:
        raise ValueError(f"not a number of milliseconds: {text!r}") from None
    if not 0 <= value < 3_600_000:
        raise ValueError(f"milliseconds out of range: {text}")
    return value
