"""/gaps: every gap noticed in this channel and how it closed, live (the same reading as ``sdschat inspect --gaps``)."""

from __future__ import annotations

import time
from datetime import datetime, tzinfo

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from sdschat.node.inspect import gap_lines

from ..layout import clean_text

__all__ = ["GapsScreen"]

REFRESH_S = 0.5


class GapsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "close")]

    DEFAULT_CSS = """
    GapsScreen { align: center middle; }
    GapsScreen > VerticalScroll {
        width: 100%;
        height: 100%;
        border: round $accent;
        border-title-color: $accent;
        background: $panel;
        padding: 0 1;
    }
    """

    def __init__(self, node, *, tz: tzinfo | None = None) -> None:
        super().__init__()
        self.node = node
        self.tz = tz
        #: the lines on screen (tests read them)
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "gaps: messages noticed missing, and how each gap closed (Esc: close)"
            yield Static(id="gaps-body")

    async def on_mount(self) -> None:
        await self.refresh_lines()
        self.set_interval(REFRESH_S, self.refresh_lines)

    def _clock(self, ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, self.tz).strftime("%H:%M:%S.%f")[:-3] if ms > 0 else "--:--:--"

    async def refresh_lines(self) -> None:
        gaps = await self.node.gaps()
        names = {p.participant_id: p.nick for p in self.node.participants()}
        names[self.node.participant_id] = "you"
        now = int(time.time() * 1000)
        lines = [line for g in reversed(gaps) for line in gap_lines(g, names, self._clock, now)]
        self.lines = lines or ["no gaps: every message arrived in order"]
        body = Text()
        for line in self.lines:
            style = "yellow" if "still open" in line or line.lstrip().startswith("now:") else (
                "red" if "declared lost" in line else "")
            body.append(clean_text(line) + "\n", style)
        self.query_one("#gaps-body", Static).update(body)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
