"""/stats: every health counter of the node."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .box import box_css

__all__ = ["StatsScreen"]


class StatsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "close")]

    DEFAULT_CSS = box_css("StatsScreen", 60)

    def __init__(self, title: str, health: dict) -> None:
        super().__init__()
        self.title_text = title
        self.health = dict(health)

    def compose(self) -> ComposeResult:
        t = Table(title=self.title_text, expand=True, show_edge=False)
        t.add_column("counter")
        t.add_column("value", justify="right")
        for k in sorted(self.health):
            t.add_row(k.replace("_", " "), str(self.health[k]))
        with VerticalScroll():
            yield Static(t)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
