"""Keys, slash commands, the legend of what the view shows and what the side panel's counters count."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from sdschat.node import events as ev
from sdschat.node.presence import AWAY_AFTER_MS, BEAT_EVERY_MS, OFFLINE_AFTER

from ..theme import PRESENCE_MARKS, STATE_LABELS, STATE_STYLES, S, state_glyph
from .box import box_css

__all__ = ["HelpScreen", "COUNTERS", "legend", "presence_legend"]

KEYS = (
    ("Enter", "send"),
    ("Alt+Enter / Shift+Enter", "newline (Ctrl+J, or \\ then Enter, in any terminal)"),
    ("Up (empty input) / Alt+Up", "message cursor (↑↓: messages and gap markers; Esc: back)"),
    ("  on the cursor", "r reply, c copy, o open link, i inspect (gap marker: that gap)"),
    ("", "e edit, d delete (an admin: any line), + react (again: undo)"),
    ("Ctrl+Up / Ctrl+Down", "lines you sent (also Up/Down on a draft's first / last line)"),
    ("Tab / Shift+Tab", "complete a /command or a name (b → bob: ); again: next one"),
    ("PgUp / PgDn", "scroll the history (Ctrl+End: back to the latest)"),
    ("F1", "this help (↑↓, PgUp / PgDn, Space, Home / End scroll it)"),
    ("F2", "link controls: loss, delay, jitter, duplicates, offline"),
    ("F3", "side panel: show / hide (below 120 columns it starts hidden)"),
    ("F5", "wire view: every frame in and out, what the node did with it (k kind, s sender, x rejected)"),
    ("Alt+1..9 / Alt+Left, Right", "switch channel (the demo: participant; also Ctrl+N)"),
    ("/search words", "find messages in every channel; Enter jumps to one"),
    ("Ctrl+P", "command palette"),
    ("Ctrl+Q", "quit"),
)

#: the side panel's counters, as labelled there, and what each counts
COUNTERS: tuple[tuple[str, str], ...] = (
    ("lamport", "this channel's Lamport clock, read as a time (it keeps at least the wall clock in ms)"),
    ("log", "messages in the channel's log here: delivered, in their order"),
    (
        "unacknowledged",
        "your messages nobody has confirmed yet: sent again until someone does, while another member is here",
    ),
    ("possibly acked", "your messages in some peers' bloom filters, not yet named in a causal history"),
    ("incoming", "messages that arrived but wait for earlier ones they name"),
    ("missing", "messages named in others' causal history, not here yet: being repaired (/gaps)"),
    ("repair buffer", "SDS-R: repair requests waiting to go out (req), answers we may send (resp)"),
    ("resends", "times one of your messages went out again, not acknowledged in time"),
    ("repairs asked", "repair requests we sent for messages missing here (SDS-R)"),
    ("repairs served", "messages we sent again for peers that asked for them (SDS-R)"),
    ("lost", "messages given up on after the lost timeout: /gaps says which, and what waited on them"),
    ("undecryptable", "frames on the channel's topic that open with no key held here: junk, or a key you lack (F5)"),
    (
        "rejected",
        "frames refused: malformed, bad signature, impersonation, a removed member, a key from before "
        "a removal... F5 shows them (x: only those) and counts them by reason",
    ),
    ("refused", "in the demo's short panel under each pane: undecryptable and rejected together (F5)"),
)


def legend() -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True)
    t.add_column()
    for state, count in (
        (ev.SENDING, 0),
        (ev.UNACKNOWLEDGED, 0),
        (ev.POSSIBLY_ACKNOWLEDGED, 2),
        (ev.ACKNOWLEDGED, 0),
        (ev.RESENDING, 0),
        (ev.WAITING, 0),
    ):
        label = STATE_LABELS[state].replace("N peers'", f"{count} peers'") if count else STATE_LABELS[state]
        t.add_row(Text(state_glyph(state, count), STATE_STYLES[state]), Text(label))
    t.add_row(Text("┈┈", S.missing), Text("N messages possibly missing: a later message names them; repair under way"))
    t.add_row(Text("↺", S.repaired_tag), Text("repaired: arrived late, slid into its place (SDS-R: resent by a peer)"))
    t.add_row(Text("✗", S.lost), Text("N messages lost: given up after the lost timeout; what waited on them is shown"))
    t.add_row(Text("  ", S.mention_bg), Text("names you (or a highlight word): counted as @N in the channel list"))
    t.add_row(Text("↳", S.quote), Text("a reply: the message it answers, or that it is possibly missing / lost"))
    t.add_row(
        Text("━━", S.unread), Text("N new messages since you left: where you were when you switched away or quit")
    )
    t.add_row(Text("┄↑", S.caught_up), Text("caught up N messages: written while you were away, loaded in one go"))
    return t


def presence_legend() -> Table:
    """The marks before the participants' names (side panel, ``/names``), and how presence is known."""
    beat, idle = BEAT_EVERY_MS / 60_000, AWAY_AFTER_MS / 60_000
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True)
    t.add_column()
    for state, what in (
        ("online", f"online: heard lately (any frame counts; a quiet member is heard every {beat:g} minutes)"),
        ("away", f"away: /away MESSAGE (shown beside the name), or no key pressed for {idle:g} minutes"),
        ("offline", f"offline: left, or not heard for {beat * OFFLINE_AFTER:g} minutes (/names: when last heard)"),
    ):
        glyph, style = PRESENCE_MARKS[state]
        t.add_row(Text(glyph, style), Text(what))
    t.add_row(Text("@"), Text("in /names: an admin of the channel"))
    return t


def _pairs(rows) -> Table:
    """A name in bold, what it does or counts beside it (the keys; the side panel's counters)."""
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True, style="bold")
    t.add_column()
    for name, what in rows:
        t.add_row(Text(name), Text(what))
    return t


class HelpScreen(ModalScreen[None]):
    """Scrolls with the keyboard at any height: Up/Down, PgUp/PgDn, Space, Home/End (its box has the focus).

    ``commands``: each slash command's usage and help, as the registry gives them (:func:`sdschat.ui.slash.help_rows`:
    the app hands them in, so the screens need not know the commands' handlers).
    """

    AUTO_FOCUS = "#help-box"
    BINDINGS = [
        Binding("escape,f1,q", "dismiss", "close"),
        Binding("space", "page_down", "page down", show=False),
    ]

    DEFAULT_CSS = (
        box_css("HelpScreen", 96)
        + """
    HelpScreen .title { text-style: bold; color: $accent; margin-top: 1; }
    HelpScreen .title.first { margin-top: 0; }
    """
    )

    def __init__(self, commands: Iterable[tuple[str, str]]) -> None:
        super().__init__()
        self.commands = list(commands)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "sdschat help"
            box.border_subtitle = "Esc closes"
            yield Static("Your messages: the glyph left of your nick is its SDS state", classes="title first")
            yield Static(legend())
            yield Static("Keys", classes="title")
            yield Static(_pairs(KEYS))
            yield Static("Commands", classes="title")
            yield Static(_pairs(self.commands))
            yield Static("The side panel's counters (F3)", classes="title")
            yield Static(_pairs(COUNTERS))
            yield Static("Presence: the participants (F3) and /names", classes="title")
            yield Static(presence_legend())
            yield Static(
                Text("Typing or sending brings you back from away; presence is never stored nor repaired.", "grey50")
            )
            yield Static(Text("Messages are ordered as the log is: by (Lamport timestamp, message id).", "grey50"))

    def action_page_down(self) -> None:
        self.query_one("#help-box", VerticalScroll).scroll_page_down(animate=False)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
