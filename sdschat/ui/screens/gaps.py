"""/gaps: every gap noticed in this channel and how it closed, live (the same reading as ``sdschat inspect --gaps``).

``i`` on a gap marker of the message view opens it on that marker's ids only: the gap inspector.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from datetime import tzinfo
from functools import partial

from rich.text import Text
from textual.containers import VerticalScroll

from sdschat.node.inspect import gap_lines, wall_clock

from ..layout import clean_text
from .live import LivePanel

__all__ = ["GapsScreen"]


class GapsScreen(LivePanel):
    TITLE = "gaps: messages noticed missing, and how each gap closed (Esc: close)"

    def __init__(self, node, *, tz: tzinfo | None = None, ids: Collection[str] | None = None) -> None:
        super().__init__(node)
        self.tz = tz
        #: only the gaps of these missing ids (a marker's), or every gap of the channel
        self.ids = tuple(ids) if ids is not None else None

    async def on_mount(self) -> None:
        if self.ids is not None:  # the gap inspector of one marker
            n = len(self.ids)
            self.query_one(
                VerticalScroll
            ).border_title = f"gap: {n} message{'' if n == 1 else 's'} missing here, and how it closed (Esc: close)"
        await super().on_mount()

    async def refresh_lines(self) -> None:
        gaps = await (self.node.gaps() if self.ids is None else self.node.gaps(self.ids))
        names = self.node.names()
        names[self.node.participant_id] = "you"
        now = int(time.time() * 1000)
        lines = [line for g in reversed(gaps) for line in gap_lines(g, names, partial(wall_clock, tz=self.tz), now)]
        self.lines = lines or [
            "no gaps: every message arrived in order"
            if self.ids is None
            else "nothing recorded yet about these messages"
        ]
        body = Text()
        for line in self.lines:
            style = (
                "yellow"
                if "still open" in line or line.lstrip().startswith("now:")
                else ("red" if "declared lost" in line else "")
            )
            body.append(clean_text(line) + "\n", style)
        self.show(body)
