"""/members: everyone seen in the channel, with what this node's database tells of each, live."""

from __future__ import annotations

import time

from rich.text import Text

from ..layout import clean_text
from ..theme import PRESENCE_MARKS
from .live import LivePanel

__all__ = ["FOOTER", "MembersScreen", "ago", "whois_line", "names_head", "names_line"]


def ago(ms: int) -> str:
    s = max(0, ms) / 1000
    if s < 60:
        return f"{s:.0f} s ago"
    if s < 3600:
        return f"{s / 60:.0f} min ago"
    if s < 86_400:
        return f"{s / 3600:.1f} h ago"
    return f"{s / 86_400:.0f} d ago"


def whois_line(info: dict, now_ms: int) -> str:
    """``/whois``'s answer in one line (:meth:`sdschat.node.node.Node.whois`): name, fingerprint, status, first
    seen and last heard."""
    from datetime import datetime

    def when(ms) -> str:
        return f"{datetime.fromtimestamp(ms / 1000):%Y-%m-%d %H:%M} ({ago(now_ms - ms)})" if ms else "never"

    status = (
        "removed"
        if info["removed"]
        else "left"
        if info["left"]
        else "an admin"
        if info["admin"]
        else "a member"
        if info["member"]
        else "seen, not joined"
    )
    presence = info.get("presence")
    if presence == "away" and info.get("away_message"):
        presence = f"away ({clean_text(info['away_message'])})"
    epoch = info.get("key_epoch")
    epoch_text = (
        "key epoch unknown"
        if epoch is None
        else f"key epoch {epoch}" + (" (of its join)" if info.get("key_epoch_from") == "join" else "")
    )
    return (
        f"{info['name']}: fingerprint {info['fingerprint']} ({info['participant_id']}), {status}; first seen "
        f"{when(info['first_seen_ms'])}, last heard {when(info['last_heard_ms'])}"
        + (f"; {presence}" if presence else "")
        + f"; {epoch_text}"
    )


def names_head(channel: str, rows) -> str:
    """``/names``' first line: how many members, and how many of each presence."""
    count = {s: sum(1 for r in rows if r.presence.state == s) for s in ("online", "away", "offline")}
    return (
        f"#{clean_text(channel)}: {len(rows)} member{'s' if len(rows) != 1 else ''} · {count['online']} online, "
        f"{count['away']} away, {count['offline']} offline (@\u00a0admin)"  # (NBSP: the legend is never cut in two)
    )


def names_line(row, now_ms: int) -> str:
    """One member of ``/names`` (a :class:`~sdschat.node.presence.MemberPresence`): ``● @alice (you): online``,
    ``◐ bob: away (at lunch)``, ``○ carol: offline, last heard 12 min ago``."""
    p = row.presence
    glyph = PRESENCE_MARKS.get(p.state, ("?", ""))[0]
    label = f"away ({clean_text(p.message)})" if p.state == "away" and p.message else p.state
    if p.state != "online" and not row.me:
        label += f", last heard {ago(now_ms - p.last_heard_ms)}" if p.last_heard_ms else ", not heard since you started"
    return f"{glyph} {'@' if row.admin else ''}{clean_text(row.name)}{' (you)' if row.me else ''}: {label}"


class MembersScreen(LivePanel):
    TITLE = "members (Esc: close)"
    REFRESH_S = 1.0

    async def refresh_lines(self) -> None:
        members = await self.node.members()
        now = int(time.time() * 1000)
        head = (
            f"{'member':<16} {'last heard':>12} {'messages':>8} {'acked ours':>10} {'ack lag':>8} "
            f"{'repairs':>7} {'loss between us':>16}"
        )
        lines = []
        for m in members:
            lag = f"{m.ack_lag_ms / 1000:.2f} s" if m.ack_lag_ms is not None else "-"
            loss = f"~{m.loss_estimate:.0%} {m.lost}/{m.tries}" if m.loss_estimate is not None else "-"
            name = clean_text(m.nick or m.participant_id[:8])[:16]
            lines.append(
                f"{name:<16} {ago(now - m.last_seen_ms):>12} {m.messages:>8} {m.acks:>10} {lag:>8} "
                f"{m.repairs:>7} {loss:>16}"
            )
        self.lines = lines or ["nobody else seen in this channel yet"]
        body = Text(head + "\n", "grey62")
        for line in self.lines:
            body.append(line + "\n")
        body.append("\n" + FOOTER, "grey50")
        self.show(body)


#: what the columns mean (the figures: sdschat.store.queries.History.member_figures, over the events window)
FOOTER = (
    "acked ours: our messages whose id their causal history named · ack lag: median time from our send to that "
    "acknowledgement · repairs: messages of others they rebroadcast to us (SDS-R)\n"
    "loss between us ≈ lost / tries, both ways: tries = our publishes (send + resends) of each message they acked, "
    "up to their ack, + their messages received; lost = those publishes beyond the first per acked message, + "
    "their messages whose first copy came resent, repaired or from the store"
)
