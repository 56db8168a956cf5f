"""What a screen shows instead of its layout when the terminal is smaller than the layout can take."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..sizes import MIN_HEIGHT, MIN_WIDTH

__all__ = ["TooSmall"]


class TooSmall(Static):
    """Shown (by app.tcss) only on a screen whose size has the ``-too-narrow`` or ``-too-short`` class."""

    DEFAULT_CSS = """
    TooSmall {
        display: none;
        width: 1fr;
        height: 1fr;
        content-align: center middle;
        text-align: center;
        color: $text-muted;
    }
    """

    def render(self) -> Text:
        width, height = self.app.size
        return Text.assemble(
            ("window too small", "bold"), "\n", f"{width}x{height}: sdschat needs {MIN_WIDTH}x{MIN_HEIGHT}"
        )
