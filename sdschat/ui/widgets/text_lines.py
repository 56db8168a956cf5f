"""A widget painted from lines of rich ``Text`` that repaints only the lines that changed.

The channel list's unread counts and the side panel's counters change many
times a second. As ``Static`` widgets each change repainted the whole widget
through Rich (the panel's tables: 3 ms to render, 6-7 ms a frame in all), in
the same frame as the message it made room for. Here a subclass says what its
lines are at a width (:meth:`TextLines.lines`); :meth:`TextLines.repaint`
compares them with what is on screen and refreshes only the lines that differ
(a counter: one line), and each line is painted once, cut to the width
(ellipsis), on the widget's own colours.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["TextLines"]


class TextLines(ScrollView):
    DEFAULT_CSS = """
    TextLines { overflow-x: hidden; }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._texts: list[Text] = []
        self._strips: list[Strip | None] = []
        self._painted_width = 0
        #: lines painted since start (what a change cost: tests and benches read it)
        self.painted_lines = 0

    def lines(self, width: int) -> list[Text]:
        """What to show, one ``Text`` a line, at ``width`` cells (longer lines are cut with an ellipsis)."""
        raise NotImplementedError

    def repaint(self) -> None:
        """Show what :meth:`lines` says now, refreshing only the lines that differ from those on screen."""
        width = self.scrollable_content_region.width
        texts = self.lines(width if width > 0 else 80)
        if width != self._painted_width or len(texts) != len(self._texts):
            self._set_size(self._take(texts, width))
            self.refresh()
            return
        top = int(self.scroll_y)
        bottom = top + self.scrollable_content_region.height
        strips = self._strips
        for y, (new, old) in enumerate(zip(texts, self._texts)):
            if new != old or new.style != old.style:
                strips[y] = None
                if top <= y < bottom:
                    self.refresh(Region(0, y - top, self.size.width, 1))
        self._texts = texts

    def stale(self) -> None:
        """What is on screen is out of date (the widget is not shown: :meth:`repaint` would only size a widget
        of no width): the lines are made again when it is next painted."""
        self._painted_width = -1

    def _take(self, texts: list[Text], width: int) -> Size:
        """Make ``texts`` the lines at ``width``, all to be painted; returns the content's size."""
        self._texts, self._strips, self._painted_width = texts, [None] * len(texts), width
        return Size(width, len(texts))

    def _set_size(self, size: Size) -> None:
        """A new line count. Assigning ``virtual_size`` lays out the whole screen (up to 25 ms in a window);
        a widget whose height its CSS sets, with every line fitting before and after, needs none."""
        old = self.virtual_size
        if old == size:
            return
        height = self.styles.height
        view = self.scrollable_content_region.height
        fits = 0 < max(old.height, size.height) <= view
        if height is not None and not height.is_auto and old.width == size.width and fits:
            self.set_reactive(TextLines.virtual_size, size)
        else:
            self.virtual_size = size

    @property
    def line_count(self) -> int:
        return len(self._texts)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if width != self._painted_width and width > 0:  # sized (or resized) since the lines were made
            size = self._take(self.lines(width), width)
            if size != self.virtual_size:
                self.call_later(self._set_size, size)
        index = y + int(self.scroll_y)
        if not 0 <= index < len(self._texts) or width <= 0:
            return Strip.blank(max(0, width), self.rich_style)
        strip = self._strips[index]
        if strip is None:
            strip = self._strips[index] = self._paint(self._texts[index], width)
        return strip

    def _paint(self, text: Text, width: int) -> Strip:
        self.painted_lines += 1
        base = self.rich_style
        if text.cell_len > width:
            text = text.copy()
            text.truncate(width, overflow="ellipsis")
        console = self.app.console
        # Text.render leaves out the line's own style when it has no spans
        style = base + console.get_style(text.style) if text.style and not text.spans else base
        segments = Segment.apply_style(text.render(console), style)
        return Strip(list(segments)).extend_cell_length(width, base).crop(0, width)  # exactly the width

    def on_resize(self) -> None:
        self.repaint()
