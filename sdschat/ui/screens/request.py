"""Someone of a shared channel asks us, by name, to talk (``/query``) or to come into a channel (``/invite
NAME``): Enter accepts, Escape ignores (nothing is sent back either way: ignoring tells them nothing)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..layout import channel_label
from .box import box_css

__all__ = ["RequestScreen", "request_line"]


def request_line(who: str, kind: str, channel: str) -> str:
    """What a request says: ``alice wants to talk`` (a two-member channel, ``@alice+bob``), or ``alice invites you
    to #team``."""
    if kind == "dm":
        return f"{who} wants to talk"
    return f"{who} invites you to {channel_label(channel)}"


class RequestScreen(ModalScreen[bool]):
    """``alice wants to talk (Enter: accept, Esc: ignore)``: True to accept, False to ignore."""

    BINDINGS = [
        Binding("enter,y", "answer(True)", "accept"),
        Binding("escape,n", "answer(False)", "ignore"),
    ]

    DEFAULT_CSS = (
        box_css("RequestScreen", 64)
        + """
    RequestScreen .request-note { color: $text-muted; margin: 1 0; }
    RequestScreen .request-keys { color: $text-muted; }
    """
    )

    def __init__(self, line: str, note: str) -> None:
        super().__init__()
        self.line = line
        self.note = note

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.line, style="bold"))
            yield Static(self.note, classes="request-note", markup=False)
            yield Static("Enter: accept · Esc: ignore", classes="request-keys", markup=False)

    def action_answer(self, accept: bool) -> None:
        self.dismiss(accept)
