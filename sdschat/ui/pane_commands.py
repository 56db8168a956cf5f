"""The pane's slash commands (``/nick``, ``/me``, ``/loss``, ``/export`` ...): ``run_slash(pane, name, arg)``."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from sdschat.node.events import ACTION_KINDS

from . import slash
from .files import open_private
from .messages import UiError

__all__ = ["run_slash", "export_log"]


def run_slash(pane, name: str, arg: str) -> None:
    """Run ``/name arg`` in ``pane`` (a :class:`~sdschat.ui.widgets.ChatPane`); ``ValueError`` is the
    one-line usage or input error the pane shows."""
    app = pane.app
    if name in slash.WINDOW_COMMANDS:
        pane.post_message(pane.WindowCommand(pane, name, arg))
    elif name == "nick":
        nick = arg.strip()
        if not nick or len(nick) > 32 or any(c.isspace() for c in nick):
            raise ValueError("usage: /nick NAME (1-32 characters, no spaces)")
        pane.node.set_nick(nick)
        pane.nick_changed()
        pane.post_message(pane.NickChanged(pane, pane.node.nick))
    elif name == "me":
        if not arg.strip():
            raise ValueError("usage: /me ACTION")
        pane.send(arg, kind="me")
    elif name == "search":
        app.open_search(pane, arg)
    elif name in ("kick", "admin"):
        who = arg.strip()
        if not who or " " in who:
            raise ValueError(f"usage: /{name} NAME")
        pane.node.check_admin()  # refused now, in one line: not an admin, or a name that is nobody here
        pane.node.member_of(who)
        pane.membership(pane.node.kick(who) if name == "kick" else pane.node.name_admin(who), name)
    elif name == "rekey":
        if arg.strip():
            raise ValueError("usage: /rekey (no arguments)")
        pane.membership(pane.node.rekey(), name)
    elif name == "loss":
        parts = arg.split()
        if not 1 <= len(parts) <= 2:
            raise ValueError("usage: /loss IN [OUT]   e.g. /loss 0.3 or /loss 20% 0")
        loss_in = slash.parse_probability(parts[0])
        loss_out = slash.parse_probability(parts[1]) if len(parts) == 2 else loss_in
        pane.set_impairment(loss_in=loss_in, loss_out=loss_out)
    elif name == "delay":
        parts = arg.split()
        if not 1 <= len(parts) <= 2:
            raise ValueError("usage: /delay MS [JITTER]")
        settings = {"delay_ms": slash.parse_ms(parts[0])}
        if len(parts) == 2:
            settings["jitter_ms"] = slash.parse_ms(parts[1])
        pane.set_impairment(**settings)
    elif name == "offline":
        pane.set_impairment(offline=True)
    elif name == "online":
        pane.set_impairment(offline=False)
    elif name == "stats":
        from .screens import StatsScreen

        app.push_screen(StatsScreen(f"{pane.node.nick} · #{pane.channel_name}", pane.node.health()))
    elif name == "wire":
        app.action_wire()
    elif name == "members":
        from .screens.members import MembersScreen

        app.push_screen(MembersScreen(pane.node))
    elif name == "whois":
        if not arg:
            raise ValueError("usage: /whois NAME")
        from .screens.members import whois_line

        pane.notice(whois_line(pane.node.whois(arg), pane.now_ms()))
    elif name == "gaps":
        from .screens.gaps import GapsScreen

        app.push_screen(GapsScreen(pane.node, tz=pane.tz))
    elif name == "export":
        if not arg:
            raise ValueError("usage: /export PATH")
        export_log(pane, Path(arg).expanduser())
    elif name == "help":
        app.action_help()
    elif name == "quit":
        app.exit()
    else:
        raise ValueError(f"unknown command /{name} (try /help)")


def export_log(pane, path: Path) -> None:
    """``/export PATH``: the whole log as the pane shows it (.jsonl: JSON lines, else text), written in a thread."""
    tz = pane.tz
    messages: list = []

    def write() -> int:
        with open_private(path) as f:  # decrypted history: 0600 whatever the umask
            for m in messages:
                if path.suffix in (".jsonl", ".json"):
                    f.write(json.dumps(asdict(m), ensure_ascii=False) + "\n")
                else:
                    at = datetime.fromtimestamp(m.sent_at_ms / 1000, tz).strftime("%Y-%m-%d %H:%M:%S")
                    line = f"* {m.nick} {m.text}" if m.kind in ACTION_KINDS else f"<{m.nick}> {m.text}"
                    f.write(f"{at} {line}\n")
        return len(messages)

    async def run() -> None:
        messages.extend(await pane.node.history())  # read on the loop; write in a thread
        try:
            n = await asyncio.to_thread(write)
        except OSError as exc:
            pane.post_message(UiError(f"/export: cannot write {path}: {exc.strerror or exc}", "export"))
            return
        pane.notice(f"exported {n} messages to {path}")

    pane.run_worker(run(), group="export", exit_on_error=False)
