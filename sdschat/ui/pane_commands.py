"""What each slash command does: ``handler(pane, arg)``, one function a command (the registry: :mod:`.slash`).

A handler gets the pane the command was typed in (a :class:`~sdschat.ui.widgets.ChatPane`) and what follows the
command's name. The person's mistakes raise :class:`~sdschat.ui.usage.UsageError`, and the node's refusals its
:class:`~sdschat.node.UserError`: the pane shows either as a notice. Anything else is a bug and reaches the log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from .files import open_private
from .messages import UiError
from .usage import UsageError, parse_ms, parse_probability

__all__ = [
    "Handler",
    "window_command",
    "nick",
    "me",
    "topic",
    "search",
    "kick",
    "admin",
    "rekey",
    "loss",
    "delay",
    "offline",
    "online",
    "stats",
    "wire",
    "members",
    "whois",
    "names",
    "away",
    "back",
    "gaps",
    "export",
    "help_",
    "quit_",
    "export_log",
]

#: ``handler(pane, arg)``. The pane is a ChatPane, which reaches this module through the registry it dispatches
#: with, so its class cannot be named here without an import circle
Handler = Callable[[Any, str], None]


def _one_name(name: str, arg: str) -> str:
    who = arg.strip()
    if not who or " " in who:
        raise UsageError(f"usage: /{name} NAME")
    return who


def window_command(name: str) -> Handler:
    """``/join``, ``/part``, ``/invite [NAME]``, ``/query NAME``, ``/mute``, ``/unmute``: about the window's
    channels, so the app runs them (the single-channel apps say they need the window)."""

    def run(pane, arg: str) -> None:
        pane.post_message(pane.WindowCommand(pane, name, arg))

    return run


def nick(pane, arg: str) -> None:
    new = arg.strip()
    if not new or len(new) > 32 or any(c.isspace() for c in new):
        raise UsageError("usage: /nick NAME (1-32 characters, no spaces)")
    pane.node.set_nick(new)
    pane.nick_changed()
    pane.post_message(pane.NickChanged(pane, pane.node.nick))


def me(pane, arg: str) -> None:
    if not arg.strip():
        raise UsageError("usage: /me ACTION")
    pane.send(arg, kind="me")


def topic(pane, arg: str) -> None:
    """``/topic TEXT`` sets the channel's topic (admins only: a refusal is one line here); ``/topic`` alone shows
    it, who set it and when; ``/topic ""`` clears it."""
    text = arg.strip()
    if not text:
        current = pane.node.topic
        if current is None or not current.text:
            pane.notice(f"#{pane.channel_name} has no topic")
        else:
            at = datetime.fromtimestamp(current.set_at_ms / 1000, pane.tz).strftime("%Y-%m-%d %H:%M")
            pane.notice(f"topic of #{pane.channel_name}: {current.text} (set by {current.nick}, {at})")
        return
    if text in ('""', "''"):
        text = ""
    pane.node.check_admin()  # NotAllowed: one line, before anything is sent
    pane.membership(pane.node.set_topic(text), "topic")


def search(pane, arg: str) -> None:
    pane.app.open_search(pane, arg)


def _membership_check(pane, who: str) -> None:
    """Refused now, in one line: not an admin, or a name that is nobody here."""
    pane.node.check_admin()  # the node's refusals are UserErrors: the pane shows them as notices
    pane.node.member_of(who)


def kick(pane, arg: str) -> None:
    who = _one_name("kick", arg)
    _membership_check(pane, who)
    pane.membership(pane.node.kick(who), "kick")


def admin(pane, arg: str) -> None:
    who = _one_name("admin", arg)
    _membership_check(pane, who)
    pane.membership(pane.node.name_admin(who), "admin")


def rekey(pane, arg: str) -> None:
    if arg.strip():
        raise UsageError("usage: /rekey (no arguments)")
    pane.membership(pane.node.rekey(), "rekey")


def loss(pane, arg: str) -> None:
    parts = arg.split()
    if not 1 <= len(parts) <= 2:
        raise UsageError("usage: /loss IN [OUT]   e.g. /loss 0.3 or /loss 20% 0")
    loss_in = parse_probability(parts[0])
    loss_out = parse_probability(parts[1]) if len(parts) == 2 else loss_in
    pane.set_impairment(loss_in=loss_in, loss_out=loss_out)


def delay(pane, arg: str) -> None:
    parts = arg.split()
    if not 1 <= len(parts) <= 2:
        raise UsageError("usage: /delay MS [JITTER]")
    settings = {"delay_ms": parse_ms(parts[0])}
    if len(parts) == 2:
        settings["jitter_ms"] = parse_ms(parts[1])
    pane.set_impairment(**settings)


def offline(pane, arg: str) -> None:
    pane.set_impairment(offline=True)


def online(pane, arg: str) -> None:
    pane.set_impairment(offline=False)


def stats(pane, arg: str) -> None:
    from .screens.stats import StatsScreen

    health = {**pane.node.health(), **pane.app.stats_extra()}
    pane.app.push_screen(StatsScreen(f"{pane.node.nick} · #{pane.channel_name}", health))


def wire(pane, arg: str) -> None:
    pane.app.action_wire()


def members(pane, arg: str) -> None:
    from .screens.members import MembersScreen

    pane.app.push_screen(MembersScreen(pane.node))


def whois(pane, arg: str) -> None:
    if not arg:
        raise UsageError("usage: /whois NAME")
    from .screens.members import whois_line

    found = pane.node.whois(arg)
    pane.notice(whois_line(found, pane.now_ms()))


def names(pane, arg: str) -> None:
    """``/names``: a line for the channel, then one a member (us first): its presence mark, ``@`` for an admin,
    online / away (why) / offline and, for one not online, when last heard."""
    if arg.strip():
        raise UsageError("usage: /names (no arguments)")
    from .screens.members import names_head, names_line

    rows = pane.node.presence_list()
    now = pane.now_ms()
    pane.notice(names_head(pane.channel_name, rows))
    for row in rows:
        pane.notice(names_line(row, now))


def away(pane, arg: str) -> None:
    """``/away MESSAGE``: away, telling the others why; ``/away`` alone: back (as ``/back``)."""
    message = arg.strip()
    if not message:
        back(pane, "")
        return
    pane.node.set_away(message)


def back(pane, arg: str) -> None:
    if pane.node.presence(pane.node.participant_id).state != "away":
        pane.notice("you are not marked away")
        return
    pane.node.set_away(None)


def gaps(pane, arg: str) -> None:
    from .screens.gaps import GapsScreen

    pane.app.push_screen(GapsScreen(pane.node, tz=pane.tz))


def export(pane, arg: str) -> None:
    if not arg:
        raise UsageError("usage: /export PATH")
    export_log(pane, Path(arg).expanduser())


def help_(pane, arg: str) -> None:
    pane.app.action_help()


def quit_(pane, arg: str) -> None:
    pane.app.exit()


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
                    f.write(f"{at} {m.line}\n")
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
