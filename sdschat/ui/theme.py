"""Glyphs, colours and styles shared by the message view, the legend and the side panel."""

from __future__ import annotations

import hashlib

from rich.style import Style

from sdschat.node import events as ev

__all__ = [
    "PRESENCE_MARKS",
    "STATE_GLYPHS",
    "STATE_LABELS",
    "STATE_STYLES",
    "NICK_PALETTE",
    "nick_style",
    "state_glyph",
    "S",
]

#: the mark before a participant's name, and its style, by presence (sdschat.node.presence)
PRESENCE_MARKS = {"online": ("●", "green"), "away": ("◐", "yellow"), "offline": ("○", "grey50")}

#: own message states, in the order a message normally goes through them
STATE_GLYPHS: dict[str, str] = {
    ev.SENDING: "◌",
    ev.UNACKNOWLEDGED: "○",
    ev.POSSIBLY_ACKNOWLEDGED: "◑",
    ev.ACKNOWLEDGED: "●",
    ev.RESENDING: "↻",
    ev.WAITING: "⋯",
    ev.RECEIVED: " ",
}

STATE_LABELS: dict[str, str] = {
    ev.SENDING: "sending: stored, not yet published",
    ev.UNACKNOWLEDGED: "unacknowledged: published, nobody confirmed it yet",
    ev.POSSIBLY_ACKNOWLEDGED: "possibly acknowledged: N peers' bloom filters contain it",
    ev.ACKNOWLEDGED: "acknowledged: named in someone's causal history",
    ev.RESENDING: "resending: not acknowledged in time, sent again",
    ev.WAITING: "received, waiting for earlier messages (shown anyway)",
}

STATE_STYLES: dict[str, Style] = {
    ev.SENDING: Style(color="grey50"),
    ev.UNACKNOWLEDGED: Style(color="yellow"),
    ev.POSSIBLY_ACKNOWLEDGED: Style(color="cyan"),
    ev.ACKNOWLEDGED: Style(color="green", bold=True),
    ev.RESENDING: Style(color="red", bold=True),
    ev.WAITING: Style(color="magenta"),
    ev.RECEIVED: Style(),
}

#: distinguishable on dark and light backgrounds; a sender keeps its colour (hash of its id)
NICK_PALETTE = (
    "#e06c75",
    "#61afef",
    "#98c379",
    "#e5c07b",
    "#c678dd",
    "#56b6c2",
    "#d19a66",
    "#ff79c6",
    "#5fd7ff",
    "#afd75f",
    "#ffd75f",
    "#8787ff",
    "#ff8700",
    "#00d7af",
    "#d75f87",
    "#bcbcbc",
)
_nick_styles: dict[str, Style] = {}


def nick_style(sender_id: str) -> Style:
    """The stable colour of a participant (a hash of its id into :data:`NICK_PALETTE`)."""
    style = _nick_styles.get(sender_id)
    if style is None:
        colour = NICK_PALETTE[hashlib.blake2s(sender_id.encode(), digest_size=4).digest()[0] % len(NICK_PALETTE)]
        style = _nick_styles[sender_id] = Style(color=colour, bold=True)
    return style


def state_glyph(state: str, possible_acks: int = 0) -> str:
    """Two cells: the state's glyph and, when possibly acknowledged, the count (9+ shows as "+")."""
    glyph = STATE_GLYPHS.get(state, "?")
    if state == ev.POSSIBLY_ACKNOWLEDGED and possible_acks:
        return glyph + (str(possible_acks) if possible_acks < 10 else "+")
    return glyph + " "


class S:
    """Plain Rich styles of the message view (kept here so the legend matches)."""

    time = Style(color="grey50")
    text = Style()
    me = Style(italic=True)
    notice = Style(color="grey62", italic=True)
    day = Style(color="grey50")
    missing = Style(color="yellow", bold=True)
    lost = Style(color="red", bold=True)
    unread = Style(color="magenta", bold=True)
    caught_up = Style(color="cyan", italic=True)
    repaired_tag = Style(color="green", italic=True)
    repaired_bg = Style(bgcolor="#12402a")
    mention_bg = Style(bgcolor="#4a3410")
    cursor_bg = Style(bgcolor="#264f78")
    quote = Style(color="grey62", italic=True)
    late_tag = Style(color="grey50", italic=True)
    #: a URL in a message, over the text's own style (the terminal hyperlink itself is added per URL)
    link = Style(color="#61afef", underline=True)
