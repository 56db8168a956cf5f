"""/gaps: every gap noticed in this channel and how it closed, live (the same reading as ``sdschat inspect --gaps``)."""

from __future__ import annotations

import time
from datetime import tzinfo
from functools import partial

from rich.text import Text

from sdschat.node.inspect import gap_lines, wall_clock

from ..layout import clean_text
from .live import LivePanel

__all__ = ["GapsScreen"]


class GapsScreen(LivePanel):
    TITLE = "gaps: messages noticed missing, and how each gap closed (Esc: close)"

    def __init__(self, node, *, tz: tzinfo | None = None) -> None:
        super().__init__(node)
        self.tz = tz

    async def refresh_lines(self) -> None:
        gaps = await self.node.gaps()
        names = self.node.names()
        names[self.node.participant_id] = "you"
        now = int(time.time() * 1000)
        lines = [line for g in reversed(gaps) for line in gap_lines(g, names, partial(wall_clock, tz=self.tz), now)]
        self.lines = lines or ["no gaps: every message arrived in order"]
        body = Text()
        for line in self.lines:
            style = "yellow" if "still open" in line or line.lstrip().startswith("now:") else (
                "red" if "declared lost" in line else "")
            body.append(clean_text(line) + "\n", style)
        self.show(body)
