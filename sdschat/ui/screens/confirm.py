"""A yes-or-no question before something that cannot be undone (``d`` on the message cursor: delete it)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .box import box_css

__all__ = ["ConfirmScreen"]


class ConfirmScreen(ModalScreen[bool]):
    """Ask ``question`` about ``subject`` (a line saying what is at stake, shown as it is): the result is True for
    ``y`` or Enter, False for ``n`` or Escape (keeping is what a stray key does: nothing else closes it)."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    DEFAULT_CSS = (
        box_css("ConfirmScreen", 64)
        + """
    ConfirmScreen .confirm-subject { color: $text-muted; margin: 1 0; }
    ConfirmScreen .confirm-keys { color: $text-muted; }
    """
    )

    def __init__(self, question: str, subject: Text | str, *, yes: str = "yes", no: str = "no") -> None:
        super().__init__()
        self.question = question
        self.subject = subject
        self.yes = yes
        self.no = no

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.question, style="bold"))
            yield Static(self.subject, classes="confirm-subject", markup=False)
            yield Static(f"y / Enter: {self.yes} · n / Esc: {self.no}", classes="confirm-keys", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
