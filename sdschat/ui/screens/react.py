"""``+`` on the message cursor: pick a reaction. A short set under the digits 1-8, or any emoji typed and Enter.

The node toggles: a reaction you already gave (marked here) is taken back when picked again. What is shown is
cleaned as the view paints it (:func:`~sdschat.ui.layout.clean_text`: no characters whose width depends on the
terminal), what is sent is the emoji as picked or typed.
"""

from __future__ import annotations

from collections.abc import Collection

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..layout import clean_text
from ..ordered_keys import OrderedInput
from .box import box_css

__all__ = ["ReactScreen", "DEFAULT_REACTIONS"]

#: the reactions under the digits 1-8
DEFAULT_REACTIONS = ("👍", "❤️", "😂", "🎉", "😮", "😢", "👀", "✅")


def choices(mine: Collection[str] = ()) -> Text:
    """The numbered set on one line, each reaction of yours (picking it takes it back) underlined."""
    t = Text(no_wrap=True, overflow="ellipsis")
    for n, emoji in enumerate(DEFAULT_REACTIONS, 1):
        if n > 1:
            t.append("  ")
        t.append(f"{n} ", "bold")
        t.append(clean_text(emoji), "underline" if emoji in mine else "")
    return t


class ReactScreen(ModalScreen[str | None]):
    """The result is the reaction picked (None: cancelled); ``mine``: the reactions you already gave the message."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    DEFAULT_CSS = (
        box_css("ReactScreen", 52)
        + """
    ReactScreen Input { margin: 1 0 0 0; }
    ReactScreen .react-note { color: $text-muted; }
    """
    )

    def __init__(self, mine: Collection[str] = ()) -> None:
        super().__init__()
        self.mine = frozenset(mine)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("React with", style="bold"))
            yield Static(choices(self.mine))
            yield OrderedInput(placeholder="or type an emoji, then Enter", max_length=16)
            yield Static(self._note(), classes="react-note", markup=False)

    def _note(self) -> str:
        again = " · underlined: yours (again: undo)" if self.mine else ""
        return "1-8 picks · Esc cancels" + again

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """A digit 1-8 typed alone picks that reaction (no emoji is a bare digit)."""
        event.stop()
        value = event.value.strip()
        if len(value) == 1 and "1" <= value <= str(len(DEFAULT_REACTIONS)):
            self.dismiss(DEFAULT_REACTIONS[int(value) - 1])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        emoji = event.value.strip()
        if emoji:
            self.dismiss(emoji)

    def action_cancel(self) -> None:
        self.dismiss(None)
