"""/invite in the window: the token in a box of its own, wrapped at the box's edge with no indent, so a copy by
hand (mouse selection in the terminal) is the token and line breaks, which joining ignores."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .box import box_css

__all__ = ["InviteScreen"]


class InviteScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "dismiss", "close"), Binding("c", "copy", "copy again")]

    DEFAULT_CSS = (
        box_css("InviteScreen", 76)
        + """
    InviteScreen #invite-token { margin: 1 0; color: $text; text-style: bold; }
    InviteScreen .invite-note { color: $text-muted; }
    """
    )

    def __init__(self, channel: str, token: str) -> None:
        super().__init__()
        self.channel = channel
        self.token = token

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(f"Invite to #{self.channel}", style="bold"))
            yield Static(
                "Copied to the clipboard (c copies again). It is the channel's key: whoever holds it reads "
                "and writes the channel, so send it only to the people you invite, over a private channel.",
                classes="invite-note",
            )
            # no spaces in a token: "fold" cuts it at the box's edge, each piece from the first column
            yield Static(Text(self.token, overflow="fold", no_wrap=False), id="invite-token")
            yield Static(
                "They run `sdschat join TOKEN` (or /join TOKEN in their window); line breaks from a copy "
                "by hand do not matter.  Esc closes.",
                classes="invite-note",
            )

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.token)
        self.notify("invite copied to the clipboard")

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
