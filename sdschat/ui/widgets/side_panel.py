"""Participants with last-seen, channel health and the broker connection.

Fed by the pane (from ``CountersChanged``/``node.health()``,
``node.participants()`` and ``ConnectionChanged``); ``compact`` is the
two-line form under each pane of the demo. A counter with something to look
at names where (``rejected 7 · F5``); the help screen says what each counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo

from rich.text import Text

from sdschat.node.inspect import lamport_time, wall_clock

from ..layout import clean_text
from ..theme import PRESENCE_MARKS, nick_style
from .text_lines import TextLines

__all__ = ["SidePanel", "PanelState", "ago", "lamport_text", "presence_mark"]

_CONN_STYLE = {
    "connected": "green",
    "connecting": "yellow",
    "restoring": "yellow",
    "disconnected": "red",
    "stopped": "grey50",
}


def presence_mark(presence) -> Text:
    """``● ``, ``◐ `` or ``○ `` (online, away, offline) in its colour; nothing for a presence not known."""
    if presence is None or presence.state not in PRESENCE_MARKS:
        return Text("")
    glyph, style = PRESENCE_MARKS[presence.state]
    return Text(f"{glyph} ", style)


#: where a counter's cases can be looked at, shown beside it once it counts something
_SEE = {"lost": "/gaps", "undecryptable": "F5", "rejected": "F5"}


@dataclass
class PanelState:
    nick: str = ""
    participant_id: str = ""
    channel: str = ""
    broker_url: str = ""
    connection: str = "connecting"
    connection_detail: str = ""
    health: dict = field(default_factory=dict)
    participants: list = field(default_factory=list)  # ParticipantRow-like: participant_id, nick, last_seen_ms
    #: participant id (ours too) -> Presence-like (state, message, last_heard_ms); a member not in it shows no mark
    presence: dict = field(default_factory=dict)
    impairment: object = None  # Impairment-like: loss_in, loss_out, delay_ms, jitter_ms, duplicate, offline
    now_ms: int = 0
    tz: tzinfo | None = None


def lamport_text(lamport: int, now_ms: int, tz: tzinfo | None = None) -> str:
    """A Lamport time as a person reads it (:func:`sdschat.node.inspect.lamport_time`, in ``tz``)."""
    return lamport_time(lamport, now_ms, lambda ms: wall_clock(ms, tz), tz)


def ago(now_ms: int, then_ms: int) -> str:
    s = max(0, (now_ms - then_ms) // 1000)
    if s < 5:
        return "now"
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    if s < 86400:
        return f"{s // 3600}h ago"
    return f"{s // 86400}d ago"


def _pct(p: float) -> str:
    return f"{p * 100:.0f}%"


def link_summary(imp) -> str:
    if imp is None:
        return "link: ?"
    if imp.offline:
        return "link: OFFLINE"
    parts = []
    if imp.loss_in or imp.loss_out:
        parts.append(f"loss in {_pct(imp.loss_in)} out {_pct(imp.loss_out)}")
    if imp.delay_ms or imp.jitter_ms:
        parts.append(f"delay {imp.delay_ms:.0f}±{imp.jitter_ms:.0f} ms")
    if imp.duplicate:
        parts.append(f"dup {_pct(imp.duplicate)}")
    return "link: " + (", ".join(parts) if parts else "clean")


def connection_text(state: PanelState) -> Text:
    offline = state.impairment is not None and getattr(state.impairment, "offline", False)
    label = "offline (you)" if offline else state.connection
    style = "red" if offline else _CONN_STYLE.get(state.connection, "")
    locked = state.health.get("locked_out", 0) if state.health else 0
    if locked:  # a key epoch began without a key for us: what we send and hear is on a key the others left
        label, style = f"locked out (epoch {locked})", "bold red"
    return Text.assemble(("● ", style), (label, style))


def _table(rows: list[tuple[Text, Text]], width: int, short: dict[str, str] | None = None) -> list[Text]:
    """Two columns as ``Table.grid(padding=(0, 1), expand=True)`` draws them: values right-aligned in the
    widest value's width, labels in the rest, one space between. A label too long for a narrow panel is given
    in its ``short`` form where it has one (``unacked``), else cut with an ellipsis."""
    value_width = max((v.cell_len for _, v in rows), default=0)
    label_width = max(1, width - 1 - value_width)
    out = []
    for label, value in rows:
        label, value = label.copy(), value.copy()
        if label.cell_len > label_width and short and label.plain in short:
            label = Text(short[label.plain], label.style)
        label.truncate(label_width, overflow="ellipsis", pad=True)
        value.align("right", value_width)
        out.append(Text.assemble(label, " ", value))
    return out


#: the channel's labels in a panel too narrow for them (80 columns with F3: 10 cells beside a 12-cell value):
#: short words, not ``unacknowl…``
_SHORT = {
    "unacknowledged": "unacked",
    "possibly acked": "poss acked",
    "repair buffer": "repair buf",
    "repairs asked": "rep. asked",
    "repairs served": "rep. sent",
    "undecryptable": "unreadable",
}


class SidePanel(TextLines):
    """Only the lines whose text changed are repainted: most updates change a counter or two."""

    DEFAULT_CSS = """
    SidePanel {
        width: 34;
        max-width: 45%;
        height: 1fr;
        padding: 0 1;
        border-left: vkey $surface-lighten-2;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    SidePanel.compact {
        width: 1fr;
        max-width: 100%;
        height: auto;
        border-left: none;
        padding: 0;
    }
    """

    def __init__(self, *, compact: bool = False, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.compact = compact
        if compact:
            self.add_class("compact")
        self.state = PanelState()

    def show(self, state: PanelState) -> None:
        self.state = state
        if not self.display:  # given way to the messages (or F3): made when it is shown
            self.stale()
            return
        self.repaint()  # a layout pass (the whole screen's) only when the number of lines changes

    def lines(self, width: int) -> list[Text]:
        return self._compact(self.state) if self.compact else self._full(self.state, width)

    # ----------------------------------------------------------- full

    def _full(self, st: PanelState, width: int) -> list[Text]:
        h = st.health
        parts: list[Text] = []

        def head(title: str) -> None:
            if parts:
                parts.append(Text(""))
            parts.append(Text(title, "bold underline"))

        head("Connection")
        parts.append(connection_text(st))
        if st.broker_url:  # folded over as many lines as it takes
            url = st.broker_url
            parts.extend(Text(url[i : i + width], "grey50") for i in range(0, len(url), max(1, width)))
        if st.connection_detail and st.connection != "connected":
            parts.extend(Text(clean_text(st.connection_detail[:80]), "grey50").wrap(self.app.console, width))
        head(f"Participants ({len(st.participants) + 1})")
        mine = st.presence.get(st.participant_id)
        t = [
            (
                Text.assemble(
                    presence_mark(mine),
                    (clean_text(st.nick) or "you", nick_style(st.participant_id) if st.participant_id else ""),
                    ("  · you", "grey50"),
                ),
                Text("away", "yellow") if mine is not None and mine.state == "away" else Text(""),
            )
        ]
        for p in st.participants[:30]:
            nick = clean_text(p.nick or "") or p.participant_id[:8]
            here = st.presence.get(p.participant_id)
            label = Text(nick, nick_style(p.participant_id))
            if here is not None:
                label = Text.assemble(presence_mark(here), label)
            if here is not None and here.state == "away" and here.message:
                label.append(f" ({clean_text(here.message)})", "grey50")
            heard = max(p.last_seen_ms, getattr(here, "last_heard_ms", 0) or 0)
            t.append((label, Text(ago(st.now_ms, heard), "grey50")))
        parts.extend(_table(t, width))
        head(f"Channel #{clean_text(st.channel)}" if st.channel else "Channel")
        t = []

        def row(label: str, value, style: str = "") -> None:
            shown = Text(str(value), style)
            if value and label in _SEE:  # something to look at: where
                shown.append(f" · {_SEE[label]}", "grey50")
            t.append((Text(label, "grey70"), shown))

        row("lamport", lamport_text(h.get("lamport_timestamp", 0), st.now_ms, st.tz))
        row("log", h.get("log", 0))
        row("unacknowledged", h.get("unacknowledged", 0), "yellow" if h.get("unacknowledged") else "")
        row("possibly acked", h.get("possibly_acknowledged", 0), "cyan" if h.get("possibly_acknowledged") else "")
        row("incoming", h.get("incoming", 0), "magenta" if h.get("incoming") else "")
        row("missing", h.get("missing", 0), "yellow" if h.get("missing") else "")
        row("repair buffer", f"{h.get('repair_requests', 0)} req {h.get('repair_responses', 0)} resp")
        row("resends", h.get("resends", 0))
        row("repairs asked", h.get("repairs_requested", 0))
        row("repairs served", h.get("repairs_served", 0))
        row("lost", h.get("lost", 0), "red" if h.get("lost") else "")
        row("undecryptable", h.get("undecryptable", 0), "red" if h.get("undecryptable") else "")
        row("rejected", h.get("rejected", 0), "red" if h.get("rejected") else "")
        parts.extend(_table(t, width, _SHORT))
        head("Link (F2)")
        parts.extend(
            Text(link_summary(st.impairment), "red" if getattr(st.impairment, "offline", False) else "").wrap(
                self.app.console, width
            )
        )
        return parts

    # -------------------------------------------------------- compact

    def _compact(self, st: PanelState) -> list[Text]:
        h = st.health

        def n(label: str, key: str, style: str) -> tuple[str, str]:
            value = h.get(key, 0)
            return f"  {label} {value}", style if value else "grey70"

        line1 = connection_text(st)
        line1.append_text(
            Text.assemble(
                n("unacked", "unacknowledged", "yellow"),
                n("possibly", "possibly_acknowledged", "cyan"),
                n("missing", "missing", "yellow"),
            )
        )
        line2 = Text.assemble(
            (
                f"resends {h.get('resends', 0)}  repairs {h.get('repairs_requested', 0)}/{h.get('repairs_served', 0)}",
                "grey70",
            ),
            n("lost", "lost", "red"),
        )
        refused = h.get("rejected", 0) + h.get("undecryptable", 0)
        if refused:  # frames refused before the engine (forgeries, junk: F5 says which)
            line2.append(f"  refused {refused}", "red")
            line2.append(" · F5", "grey50")
        line3 = Text(link_summary(st.impairment), "red" if getattr(st.impairment, "offline", False) else "grey70")
        return [line1, line2, line3]
