"""Command palette (Ctrl+P) entries for the slash commands.

Commands that take an argument put ``/name `` into the input of the active
pane and focus it; the others run at once.
"""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .slash import COMMANDS

__all__ = ["ChatCommands"]

_TITLES = {
    "nick": "Change nick…",
    "me": "Send an action (/me)…",
    "kick": "Remove a member (new channel key)…",
    "rekey": "Rotate the channel key",
    "admin": "Make a member an admin…",
    "loss": "Link: set packet loss…",
    "delay": "Link: set delay…",
    "offline": "Link: go offline",
    "online": "Link: go online",
    "stats": "Show channel stats",
    "export": "Export the log…",
    "help": "Help: keys, commands, legend",
    "quit": "Quit",
}


class ChatCommands(Provider):
    def _entries(self):
        app = self.app
        for c in COMMANDS:
            title = _TITLES.get(c.name, f"/{c.name}")
            if c.args and not c.args.startswith("["):
                action = partial(app.prefill_command, c.name)
            else:
                action = partial(app.run_slash, c.name, "")
            yield title, action, f"/{c.usage.lstrip('/')} — {c.help}"
        yield "Link: show/hide controls (F2)", app.action_toggle_link, "loss, delay, jitter, duplicates, offline"

    async def discover(self) -> Hits:
        for title, action, help_ in self._entries():
            yield DiscoveryHit(title, action, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, action, help_ in self._entries():
            score = max(matcher.match(title), matcher.match(help_) * 0.8)
            if score > 0:
                yield Hit(score, matcher.highlight(title), action, help=help_)
