"""``o`` on a message with several links: the links, numbered; Enter or the link's digit opens it, Escape cancels."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from .box import box_css

__all__ = ["LinksScreen"]


class LinksScreen(ModalScreen[str | None]):
    """Pick one of ``urls``: the screen's result is that URL (None: cancelled)."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    DEFAULT_CSS = (
        box_css("LinksScreen", 90)
        + """
    LinksScreen OptionList { height: auto; max-height: 20; border: none; padding: 0; background: $panel; }
    LinksScreen .links-note { color: $text-muted; }
    """
    )

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self.urls = urls

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(f"Open which link? ({len(self.urls)} in this message)", style="bold"))
            options = []
            for n, url in enumerate(self.urls, 1):
                label = Text(no_wrap=True, overflow="ellipsis")
                label.append(f"{n} " if n <= 9 else "  ", "bold")
                label.append(url)
                options.append(Option(label))
            yield OptionList(*options, id="links-list")
            yield Static("Enter or the digit opens it · Esc cancels", classes="links-note")

    def on_mount(self) -> None:
        listing = self.query_one(OptionList)
        listing.highlighted = 0
        listing.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.urls[event.option_index])

    def on_key(self, event: events.Key) -> None:
        char = event.character
        if char is not None and len(char) == 1 and "1" <= char <= "9" and int(char) <= len(self.urls):
            event.stop()
            self.dismiss(self.urls[int(char) - 1])

    def action_cancel(self) -> None:
        self.dismiss(None)
