"""The message inspector (``i`` on the message cursor): one message's life, live, in a side panel.

What it shows is :meth:`sdschat.node.Node.inspect`, the same reading as
``sdschat inspect``: the events the node recorded and the engine's tables as
they are now. It reads again twice a second while open, so resends, acks,
repairs and the timers' countdowns move as they happen. On a message that
arrived before earlier ones it names (the one under a "possibly missing"
marker) it also shows the gap inspector for each of those: who it is from,
its retrieval hint, the store queries and repair requests with their timers,
and how the gap closed (as ``/gaps`` does for every gap). An edited message
lists its versions, the original first, each with when it was written.
"""

from __future__ import annotations

import time
from datetime import tzinfo
from functools import partial

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding

from sdschat.node.inspect import gap_lines, render_parts, wall_clock

from ..layout import clean_text
from .live import LivePanel

__all__ = ["InspectorScreen"]


class InspectorScreen(LivePanel):
    BINDINGS = [Binding("escape,q,i", "dismiss", "close")]
    DEFAULT_CSS = """
    InspectorScreen {
        align: right top;
        background: $background 60%;  /* a side panel: the chat stays visible beside it (as any modal screen) */
        &:ansi { background: transparent; }
    }
    InspectorScreen > VerticalScroll { width: 84; max-width: 100%; }
    """
    TITLE = "message inspector (Esc: close)"

    def __init__(self, node, message_id: str, *, tz: tzinfo | None = None) -> None:
        super().__init__(node)
        self.message_id = message_id
        self.tz = tz
        #: when the lines were last put on screen (perf_counter; the bench reads it)
        self.lines_at = 0.0

    async def refresh_lines(self) -> None:
        insp = await self.node.inspect(self.message_id)
        if insp is None:
            self.lines = [f"message {self.message_id[:16]}…", "", "nothing recorded about it here yet"]
            self.show(Text("\n".join(self.lines)))
            return
        now = int(time.time() * 1000)
        clock = partial(wall_clock, tz=self.tz)
        parts = render_parts(insp, now_ms=now, clock=clock, names=self.node.names(), tz=self.tz)
        waited = {
            m for s in insp.steps if s.kind == "missing" and s.detail.get("waits") for m in s.detail.get("missing", [])
        }
        if waited:  # the gaps under its marker
            names = {**self.node.names(), self.node.participant_id: "you"}
            gaps = await self.node.gaps(waited)
            if gaps:
                parts.tail += ["", "the gap" + ("s" if len(gaps) > 1 else "") + " it waited for:"]
                parts.tail += [line for g in gaps for line in gap_lines(g, names, clock, now)]
        parts.tail += await self._versions(clock)
        self.lines = parts.lines()
        head = Text()
        for i, line in enumerate(parts.head):
            head.append(clean_text(line) + "\n", "bold" if i == 0 else "")
        steps = Table.grid(padding=(0, 1))
        steps.add_column(style="grey62", no_wrap=True)
        steps.add_column(style="grey62", no_wrap=True, justify="right")
        steps.add_column(ratio=1)
        for at, since, what in parts.rows:
            steps.add_row(at, since, clean_text(what))
        tail = Text()
        for line in parts.tail:
            tail.append(clean_text(line) + "\n", "yellow" if line.startswith("now:") else "")
        self.show(Group(head, steps, tail))
        self.lines_at = time.perf_counter()

    async def _versions(self, clock) -> list[str]:
        """An edited message's versions, oldest first, as lines: ``"", "versions (edited 2 times):", "10:00:00.000
        original text", ...`` ([] for a message never edited, or deleted: its text is gone)."""
        history = getattr(self.node, "edit_history", None)
        if history is None:
            return []
        chat = await self.node.message(self.message_id)
        if chat is None or not chat.edited:
            return []
        versions = await history(self.message_id)
        if len(versions) < 2:
            return []
        edits = len(versions) - 1
        lines = ["", f"versions (edited {edits} time{'s' if edits > 1 else ''}; the last is shown):"]
        for n, (at_ms, text) in enumerate(versions):
            label = "original" if n == 0 else f"edit {n}"
            lines.append(f"{clock(at_ms)}  {label}: {' '.join(text.split())}")
        return lines
