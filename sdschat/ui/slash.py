"""Slash commands: one registry (name, aliases, usage, help, handler), and its parsing, completion and dispatch.

Every place that knows the commands reads this registry: the pane runs a command through :func:`run`, Tab and
the hint above the input complete from :func:`matching`, F1 and the command palette list :data:`COMMANDS`. What a
command does is its handler (:mod:`.pane_commands`); a command exists once it is an entry here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from . import pane_commands as do
from .pane_commands import Handler
from .usage import UsageError, parse_ms, parse_probability

__all__ = [
    "SlashCommand",
    "SlashRegistry",
    "REGISTRY",
    "COMMANDS",
    "UsageError",
    "parse",
    "complete",
    "matching",
    "lookup",
    "run",
    "help_rows",
    "parse_probability",
    "parse_ms",
]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    #: what follows the name in its usage line (``NAME``, ``IN [OUT]``); empty for none
    args: str
    help: str
    #: ``handler(pane, arg)``: runs the command typed in ``pane``
    handler: Handler
    #: other names that run it (typed in full; completion offers the name)
    aliases: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


class SlashRegistry:
    """The commands in the order help lists them, found by name or alias."""

    def __init__(self, commands: Iterable[SlashCommand]) -> None:
        self.commands = tuple(commands)
        self._by_name: dict[str, SlashCommand] = {}
        for c in self.commands:
            for name in (c.name, *c.aliases):
                if name in self._by_name:
                    raise ValueError(f"/{name} is registered twice")
                self._by_name[name] = c

    def lookup(self, name: str) -> SlashCommand | None:
        return self._by_name.get(name)

    def matching(self, text: str) -> list[SlashCommand]:
        """Commands whose name starts with what is typed after the slash (before any space)."""
        if not text.startswith("/") or " " in text or "\n" in text:
            return []
        prefix = text[1:].lower()
        return [c for c in self.commands if c.name.startswith(prefix)]

    def run(self, pane, name: str, arg: str) -> None:
        """Run ``/name arg`` in ``pane``; :class:`UsageError` for a name that is no command, and whatever the
        handler raises (a :class:`~sdschat.node.UserError` is the one-line refusal the pane shows)."""
        command = self.lookup(name)
        if command is None:
            raise UsageError(f"unknown command /{name} (try /help)")
        command.handler(pane, arg)


REGISTRY = SlashRegistry(
    (
        SlashCommand("nick", "NAME", "change your nick", do.nick),
        SlashCommand(
            "join",
            "NAME|TOKEN",
            "join a channel by invite token, or start a new one called NAME",
            do.window_command("join"),
        ),
        SlashCommand("part", "", "leave this channel (its history stays on disk)", do.window_command("part")),
        SlashCommand(
            "invite",
            "[NAME]",
            "show this channel's invite token and copy it; with NAME: send it to that member of another channel",
            do.window_command("invite"),
        ),
        SlashCommand(
            "query",
            "NAME",
            "talk with a member of your channels in a new two-member channel (they are asked, no token)",
            do.window_command("query"),
            aliases=("dm",),
        ),
        SlashCommand(
            "mute", "", "mentions here: no bell, no desktop notification (still highlighted)", do.window_command("mute")
        ),
        SlashCommand("unmute", "", "mentions here ring and notify again", do.window_command("unmute")),
        SlashCommand("me", "ACTION", "send an action: * you ACTION", do.me),
        SlashCommand("topic", "[TEXT]", 'show the topic, or set it (admins; /topic "" clears it)', do.topic),
        SlashCommand("kick", "NAME", "remove a member (admins): a new channel key for everyone else", do.kick),
        SlashCommand("rekey", "", "rotate the channel key without removing anyone (admins)", do.rekey),
        SlashCommand("admin", "NAME", "make a member an admin too (admins)", do.admin),
        SlashCommand("search", "WORDS", 'find messages (word*, "a phrase", OR, NOT); Enter jumps to one', do.search),
        SlashCommand("loss", "IN [OUT]", "drop that share of incoming [outgoing] frames (0.2 or 20%)", do.loss),
        SlashCommand("delay", "MS [JITTER]", "hold every frame MS ms (± JITTER ms reorders them)", do.delay),
        SlashCommand("offline", "", "unplug: drop every frame, as if the network were gone", do.offline),
        SlashCommand("online", "", "plug back in (unacknowledged messages go out again)", do.online),
        SlashCommand("stats", "", "channel health and counters", do.stats),
        SlashCommand("wire", "", "the frames in and out, live (F5)", do.wire),
        SlashCommand("gaps", "", "every gap noticed here and how it closed", do.gaps),
        SlashCommand("members", "", "everyone seen here: last heard, acks, repairs, loss from them", do.members),
        SlashCommand("names", "", "the members: online, away (and why) or offline; @ marks admins", do.names),
        SlashCommand(
            "whois",
            "NAME",
            "who that is: fingerprint, admin or not, first seen, last heard, presence, key epoch",
            do.whois,
        ),
        SlashCommand("away", "[MESSAGE]", "mark yourself away, saying why; /away alone: back", do.away),
        SlashCommand("back", "", "back from away (typing or sending brings you back too)", do.back),
        SlashCommand("export", "PATH", "write the log you see (.jsonl: JSON lines, else text)", do.export),
        SlashCommand("help", "", "keys, commands and what the glyphs mean", do.help_),
        SlashCommand("quit", "", "leave", do.quit_),
    )
)
#: every command, in the order help lists them
COMMANDS: tuple[SlashCommand, ...] = REGISTRY.commands


def parse(text: str) -> tuple[str, str] | None:
    """``"/loss 0.2 0.1"`` -> ``("loss", "0.2 0.1")``; ``None`` if not a command ("//x" sends "/x")."""
    if not text.startswith("/") or text.startswith("//"):
        return None
    head, _, rest = text[1:].partition(" ")
    return head.strip().lower(), rest.strip()


def matching(text: str) -> list[SlashCommand]:
    """Commands whose name starts with what is typed after the slash (before any space)."""
    return REGISTRY.matching(text)


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
    """The command called ``name`` (or that has it as an alias)."""
    return REGISTRY.lookup(name)


def help_rows() -> list[tuple[str, str]]:
    """Each command's usage and what it does, in the registry's order (F1 lists them)."""
    rows = []
    for c in COMMANDS:
        also = f" (also {', '.join('/' + a for a in c.aliases)})" if c.aliases else ""
        rows.append((c.usage, c.help + also))
    return rows


def run(pane, name: str, arg: str) -> None:
    """Run ``/name arg`` in ``pane`` (a :class:`~sdschat.ui.widgets.ChatPane`) through the registry."""
    REGISTRY.run(pane, name, arg)
