"""The window's channels on the left: number, name, unread count, activity and connection."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.message import Message
from textual.timer import Timer

from ..layout import channel_label, clean_text, fit_cells
from .text_lines import TextLines

__all__ = ["ChannelList", "ChannelRow"]

_CONN = {
    "connected": ("●", "green"),
    "connecting": ("◌", "yellow"),
    "restoring": ("◌", "yellow"),
    "disconnected": ("○", "red"),
    "stopped": ("○", "grey50"),
}
HEADER_LINES = 2
REPAINT_EVERY_S = 0.1


@dataclass
class ChannelRow:
    name: str
    unread: int = 0
    connection: str = "connecting"
    #: of the unread, how many name you
    mentions: int = 0


class ChannelList(TextLines):
    """Rows are positions in the window: row ``i`` is Alt+``i+1``. A row's change repaints that row only."""

    class Selected(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    DEFAULT_CSS = """
    ChannelList { width: 24; height: 1fr; padding: 0 1; border-right: vkey $surface-lighten-2; overflow-y: auto; }
    """

    def __init__(self, names: list[str], unread: list[int] | None = None, *, me: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        #: our nick: a two-member channel is listed by the other member (:func:`~sdschat.ui.layout.channel_label`)
        self.me = me
        self.rows = [ChannelRow(n, u) for n, u in zip(names, unread or [0] * len(names))]
        self.active = 0
        self._repaint_timer: Timer | None = None

    def on_mount(self) -> None:
        self.repaint()

    def add(self, name: str, unread: int = 0) -> int:
        return self.insert(len(self.rows), name, unread)

    def insert(self, index: int, name: str, unread: int = 0) -> int:
        """A row at ``index`` (the rows from there move down a place, the active one with them)."""
        index = max(0, min(index, len(self.rows)))
        self.rows.insert(index, ChannelRow(name, unread))
        if self.active >= index and len(self.rows) > 1:
            self.active += 1
        self.repaint()
        return index

    def remove_row(self, index: int) -> None:
        """The row at ``index`` goes (a channel left); the active one stays, or the last if it was that."""
        del self.rows[index]
        self.active = min(self.active, len(self.rows) - 1)
        self.repaint()

    def set_active(self, index: int) -> None:
        """The channel on screen (its unread count stays until :meth:`clear_unread`: read to the end)."""
        self.active = index
        self.repaint()

    def clear_unread(self, index: int) -> None:
        row = self.rows[index]
        if row.unread or row.mentions:
            row.unread = row.mentions = 0
            self.repaint()

    def activity(self, index: int, new: int, connection: str, mentions: int = 0) -> None:
        row = self.rows[index]
        if (index == self.active or not new) and row.connection == connection:
            return  # nothing to show: no repaint
        if index != self.active:
            row.unread += new
            row.mentions += mentions
        row.connection = connection
        if self._repaint_timer is None:  # busy background channels: one redraw per REPAINT_EVERY_S at most
            self._repaint_timer = self.set_timer(REPAINT_EVERY_S, self.repaint)

    def repaint(self) -> None:
        if self._repaint_timer is not None:
            self._repaint_timer.stop()
            self._repaint_timer = None
        super().repaint()

    def lines(self, width: int) -> list[Text]:
        width = max(8, width)  # (the padding keeps a cell on either side)
        out = [Text("Channels", "bold underline"), Text("")]
        for i, row in enumerate(self.rows):
            glyph, color = _CONN.get(row.connection, ("○", "grey50"))
            active = i == self.active
            key = f"{i + 1}" if i < 9 else " "
            count = f" {row.unread}" if row.unread else ""
            named = f" @{row.mentions}" if row.mentions else ""
            room = max(1, width - len(key) - 3 - len(count) - len(named))
            name = fit_cells(channel_label(clean_text(row.name), self.me), room)  # cut by cells: wide ones count two
            line = Text(no_wrap=True)
            line.append(f"{key} ", "grey50")
            line.append(glyph, color)
            line.append(" ")
            style = "bold reverse" if active else ("bold" if row.unread else "")
            if count or named:
                name += " " * (room - cell_len(name))
            line.append(name, style)
            if named:
                line.append(named, "bold magenta")
            if count:
                line.append(count, "bold yellow")
            out.append(line)
        return out

    def on_click(self, event: events.Click) -> None:
        index = event.y + int(self.scroll_y) - HEADER_LINES
        if 0 <= index < len(self.rows):
            self.post_message(self.Selected(index))
