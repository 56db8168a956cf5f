"""Keys, slash commands and the legend of what the view shows."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from sdschat.node import events as ev

from ..slash import COMMANDS
from ..theme import STATE_LABELS, STATE_STYLES, S, state_glyph

__all__ = ["HelpScreen", "legend"]

KEYS = (
    ("Enter", "send"),
    ("Alt+Enter / Shift+Enter", "newline (Ctrl+J, or \\ then Enter, in any terminal)"),
    ("Up (empty input) / Alt+Up", "message cursor (↑↓: messages and gap markers; Esc: back)"),
    ("  on the cursor", "r reply, c copy, i inspect (on a gap marker: that gap)"),
    ("Ctrl+Up / Ctrl+Down", "lines you sent (also Up/Down on a draft's first / last line)"),
    ("Tab", "complete a /command, or an @nick of this channel"),
    ("PgUp / PgDn", "scroll the history (Ctrl+End: back to the latest)"),
    ("F1", "this help (↑↓, PgUp / PgDn, Space, Home / End scroll it)"),
    ("F2", "link controls: loss, delay, jitter, duplicates, offline"),
    ("F3", "side panel: show / hide (below 120 columns it starts hidden)"),
    ("F5", "wire view: every frame in and out, what the node did with it (k kind, s sender, x rejected)"),
    ("Alt+1..9 / Alt+Left, Right", "switch channel (the channel window; also Ctrl+N)"),
    ("/search words", "find messages in every channel; Enter jumps to one"),
    ("Ctrl+P", "command palette"),
    ("Ctrl+Q", "quit"),
)


def legend() -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True)
    t.add_column()
    for state, count in ((ev.SENDING, 0), (ev.UNACKNOWLEDGED, 0), (ev.POSSIBLY_ACKNOWLEDGED, 2),
                         (ev.ACKNOWLEDGED, 0), (ev.RESENDING, 0), (ev.WAITING, 0)):
        label = STATE_LABELS[state].replace("N peers'", f"{count} peers'") if count else STATE_LABELS[state]
        t.add_row(Text(state_glyph(state, count), STATE_STYLES[state]), Text(label))
    t.add_row(Text("┈┈", S.missing), Text("N messages possibly missing: a later message names them; repair under way"))
    t.add_row(Text("↺", S.repaired_tag), Text("repaired: arrived late, slid into its place (SDS-R: resent by a peer)"))
    t.add_row(Text("✗", S.lost), Text("N messages lost: given up after the lost timeout; what waited on them is shown"))
    t.add_row(Text("  ", S.mention_bg), Text("names you (or a highlight word): counted as @N in the channel list"))
    t.add_row(Text("↳", S.quote), Text("a reply: the message it answers, or that it is possibly missing / lost"))
    t.add_row(Text("━━", S.unread), Text("N new messages since you left: where you were when you switched away"))
    return t


def _keys() -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True, style="bold")
    t.add_column()
    for k, what in KEYS:
        t.add_row(Text(k), Text(what))
    return t


def _commands() -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True, style="bold")
    t.add_column()
    for c in COMMANDS:
        t.add_row(Text(c.usage), Text(c.help))
    return t


class HelpScreen(ModalScreen[None]):
    """Scrolls with the keyboard at any height: Up/Down, PgUp/PgDn, Space, Home/End (its box has the focus)."""

    AUTO_FOCUS = "#help-box"
    BINDINGS = [
        Binding("escape,f1,q", "dismiss", "close"),
        Binding("space", "page_down", "page down", show=False),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 96;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: round $accent;
        background: $panel;
        padding: 0 1;
    }
    HelpScreen .title { text-style: bold; color: $accent; margin-top: 1; }
    HelpScreen .title.first { margin-top: 0; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "sdschat help"
            box.border_subtitle = "Esc closes"
            yield Static("Your messages: the glyph left of your nick is its SDS state", classes="title first")
            yield Static(legend())
            yield Static("Keys", classes="title")
            yield Static(_keys())
            yield Static("Commands", classes="title")
            yield Static(_commands())
            yield Static(Text("Messages are ordered as the log is: by (Lamport timestamp, message id).", "grey50"))

    def action_page_down(self) -> None:
        self.query_one("#help-box", VerticalScroll).scroll_page_down(animate=False)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
