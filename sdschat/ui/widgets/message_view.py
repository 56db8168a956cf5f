"""The message history: a line-API ``ScrollView`` over a :class:`~sdschat.ui.timeline.Timeline`.

Like toolong's log view, only visible lines are painted, and painted lines
are kept in an LRU cache keyed by (item, version, width). Word wrap is kept
in a per-item line index: each item knows its height at the current width,
``_starts[i]`` is the first line of item ``i`` (prefix sums), and finding the
item of line ``y`` is a bisect. A state change repaints only that item's
lines; an insert shifts the index from that item on (one ``accumulate``).

Changes are made on ``view.timeline`` and then published with
:meth:`MessageView.commit`, once per batch of node events.
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import tzinfo
from itertools import accumulate
from math import ceil

from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip

from sdschat.node import events as ev

from ..collector import bulk_build
from ..layout import Layout, clean_text
from ..theme import S
from ..timeline import MarkerItem, MsgItem, Timeline

__all__ = ["MessageView"]

_CACHE_ITEMS = 2048
#: the printable keys the cursor keeps (bound above): any other printable key goes back to typing
PICK_KEYS = "rcijkoed+"


def _thumb(bar: ScrollBar) -> tuple:
    """What a vertical scrollbar draws, as ``ScrollBarRender.render_bar`` computes it: its length and the
    thumb's first and last eighth of a cell."""
    size = bar.size.height
    virtual = ceil(bar.window_virtual_size)
    window = ceil(bar.window_size) if bar.window_size < bar.window_virtual_size else 0
    if not (window and size and virtual and size != virtual):
        return (size, window, virtual)
    thumb = max(1, window / (virtual / size))
    start = int((size - thumb) * (bar.position / (virtual - window)) * 8)
    return (size, start, start + ceil(thumb * 8))


class MessageView(ScrollView, can_focus=True):
    """Virtualized chat history ordered by (lamport_timestamp, message_id).

    Focused, it is the message cursor: Up/Down (or Alt+Up/Alt+Down) move it over the messages and the gap
    markers ("N messages possibly missing", "N messages lost"), ``r`` asks to reply to the message under it,
    ``c`` to copy its text, ``i`` to inspect it (on a marker: the gap list of the ids it counts), ``o`` to open a
    link in it, ``e`` to edit it (your own), ``d`` to delete it (your own, or any as an admin of the channel) and
    ``+`` to react to it; the pane decides whether it may. Escape, or typing, goes back to the input.
    """

    BINDINGS = [
        # first: the footer lists them in this order, and at 80 columns the last ones do not fit; the way out does
        Binding("escape", "leave", "back"),
        Binding("up,alt+up,k", "cursor(-1)", "previous message", show=False),
        Binding("down,alt+down,j", "cursor(1)", "next message", show=False),
        Binding("home", "cursor_end(-1)", "first loaded message", show=False),
        Binding("end", "cursor_end(1)", "last message", show=False),
        Binding("r", "picked('reply')", "reply"),
        Binding("c", "picked('copy')", "copy"),
        Binding("i", "picked('inspect')", "inspect"),
        Binding("o", "picked('open')", "open link"),
        Binding("e", "picked('edit')", "edit"),
        Binding("d", "picked('delete')", "delete"),
        Binding("plus", "picked('react')", "react"),
    ]

    DEFAULT_CSS = """
    MessageView {
        scrollbar-size-vertical: 1;
        scrollbar-gutter: stable;
        overflow-x: hidden;
        height: 1fr;
    }
    """

    #: messages that arrived below while the user was scrolled up
    new_below: reactive[int] = reactive(0)

    class NeedOlder(Message):
        """Scrolled near the top of what is loaded while the database holds older messages."""

        def __init__(self, view: MessageView) -> None:
            super().__init__()
            self.view = view

    class NeedNewer(Message):
        """Scrolled near the end of a window around a search result while the log goes on below it."""

        def __init__(self, view: MessageView) -> None:
            super().__init__()
            self.view = view

    class Picked(Message):
        """``r``, ``c``, ``i``, ``o``, ``e``, ``d`` or ``+`` on the message under the cursor (``action``:
        ``reply``, ``copy``, ``inspect``, ``open``, ``edit``, ``delete`` or ``react``)."""

        def __init__(self, view: MessageView, action: str, message: ev.ChatMessage) -> None:
            super().__init__()
            self.view = view
            self.action = action
            self.message = message

    class GapPicked(Message):
        """``i`` on the gap marker under the cursor: ``ids``, the messages it counts (missing or lost)."""

        def __init__(self, view: MessageView, ids: tuple[str, ...]) -> None:
            super().__init__()
            self.view = view
            self.ids = ids

    class Leave(Message):
        """The cursor is done: back to the input (``text``: what was typed to get there, to insert)."""

        def __init__(self, view: MessageView, text: str = "") -> None:
            super().__init__()
            self.view = view
            self.text = text

    class ReachedBottom(Message):
        """The person scrolled back to the end (everything new is seen)."""

        def __init__(self, view: MessageView) -> None:
            super().__init__()
            self.view = view

    class NewBelow(Message):
        def __init__(self, view: MessageView, count: int) -> None:
            super().__init__()
            self.view = view
            self.count = count

    def __init__(
        self,
        *,
        tz: tzinfo | None = None,
        clock: Callable[[], float] = time.time,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.timeline = Timeline()
        self.tz = tz
        self.clock = clock
        self._layout: Layout | None = None
        self._starts: list[int] = [0]
        self._cache: OrderedDict[tuple, list[Strip]] = OrderedDict()
        self._known_nicks = 0
        #: follow new content: true until the user scrolls up, true again once they are back at the end; changed
        #: only by :meth:`_follow`
        self._stuck = True
        #: (item, line offset) at the top of the viewport, taken while items and line index agree
        self._anchor = None
        #: changes committed while the view had no width (hidden, e.g. a background channel): first moved
        #: index and updated items, laid out when it is shown again
        self._parked_lo: int | None = None
        self._parked: list = []
        #: the database holds older messages than those loaded (paged in as the user scrolls up)
        self.more_above = False
        self._asked_older = False
        self._asked_newer = False
        #: counters for tests and the bench: lines painted (cache misses) and partial refreshes
        self.painted_lines = 0
        self.partial_refreshes = 0
        self._thumb_before: tuple | None = None  # during a commit: the scrollbar's thumb before it
        #: the gap marker under the cursor (the timeline's message cursor is then None), and the ids it counted
        #: when the cursor came to it (a gap that closes empties its marker)
        self._marker: MarkerItem | None = None
        self._marker_ids: frozenset[str] = frozenset()

    # ------------------------------------------------------------- public

    def nick_of(self, pid: str | None) -> str:
        """A participant's nick as painted (markers, "repaired by"): a peer's text, cleaned."""
        return clean_text(self.timeline.nick(pid))

    def load(
        self,
        messages: Iterable[ev.ChatMessage],
        gaps: Iterable[ev.GapOpened] = (),
        *,
        more_above: bool = False,
        upper: tuple | None = None,
    ) -> None:
        """Show a history (``node.history()``, or its last page with ``more_above``) with its open gaps
        (``node.open_gaps()``); stick to its end. With ``upper`` (the last key loaded) it is a window that
        ends before the log does (around a search result): newer messages load as the person scrolls down."""
        self.more_above, self._asked_older, self._asked_newer = more_above, False, False
        with bulk_build():  # (100,000 items: no collections while they are made, then out of the way)
            self.timeline.load(messages, gaps, upper)
            self.timeline.take_changes()
            self._cache.clear()
            self._relayout(full=True)
        self._follow(upper is None)
        self.new_below = 0  # (a window around a search result too: what was new below is not loaded any more)
        self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
        self._remember_anchor()
        self.refresh()

    @property
    def more_below(self) -> bool:
        """A window around a search result: the log goes on below what is loaded."""
        return self.timeline.upper is not None

    def append(self, messages: list[ev.ChatMessage], *, more_below: bool) -> int:
        """The next page below a window (:meth:`load` with ``upper``); the lines on screen stay put."""
        self._asked_newer = False
        upper = messages[-1].log_key if more_below and messages else None
        added = self.timeline.append(messages, upper)
        self.commit()
        return added

    def prepend(self, messages: Iterable[ev.ChatMessage], *, more_above: bool) -> int:
        """An older page above what is loaded; the lines on screen stay where they are. Returns how many."""
        self.more_above, self._asked_older = more_above, False
        anchor = self._anchor
        added = self.timeline.prepend(messages)
        self.timeline.take_changes()
        if not added or self._layout is None:
            return added
        layout = self._current_layout()
        if layout is None:
            return added
        self._reindex(layout, 0)
        if anchor is not None:
            self._restore_anchor(*anchor)
        self.refresh()
        self._remember_anchor()
        self._want_older(int(self.scroll_y))
        return added

    def want_pages(self, y: float | None = None) -> None:
        """Ask for the page above or below what is loaded if ``y`` (default: where the view is) is near
        either end of it."""
        y = self.scroll_y if y is None else y
        self._want_older(y)
        near_end = y >= self.max_scroll_y - self.scrollable_content_region.height
        if self.more_below and not self._asked_newer and near_end:
            self._asked_newer = True
            self.post_message(self.NeedNewer(self))

    def _want_older(self, y: float) -> None:
        if self.more_above and not self._asked_older and y < self.scrollable_content_region.height:
            self._asked_older = True
            self.post_message(self.NeedOlder(self))

    @property
    def at_bottom(self) -> bool:
        """Following the end of the history (the user has not scrolled up)."""
        return self._stuck

    def _follow(self, follow: bool, *, seen: bool = False) -> None:
        """Follow the end of the history from now on, or stop (the person scrolled up, or the view shows where
        they left off): the one place that decides it. Following, nothing is new below any more. ``seen``: the
        person brought the view to the end themselves (scrolled there, Ctrl+End), so everything is seen: a
        :class:`ReachedBottom` if it was not following already. (A line of your own, a notice or a history
        loaded follow the end without saying so.)"""
        was, self._stuck = self._stuck, follow
        if not follow:
            return
        if self.new_below:
            self.new_below = 0
        if seen and not was:
            self.post_message(self.ReachedBottom(self))

    @property
    def line_count(self) -> int:
        return self._starts[-1]

    def commit(self, *, new_messages: int = 0, to_bottom: bool = False) -> None:
        """Lay out and repaint what changed on ``timeline`` since the last commit.

        ``new_messages``: how many of the changes were newly shown messages
        (counted as "N new" if the user is scrolled up). ``to_bottom``: jump to
        the end regardless (the user just sent something).
        """
        first_moved, updated = self.timeline.take_changes()
        if len(self.timeline.nicks) != self._known_nicks:  # a nick learned late: markers/tags may name it
            self._known_nicks = len(self.timeline.nicks)
            self._cache.clear()
            self.refresh()
        layout = self._current_layout()
        if layout is None:  # hidden or not sized yet: laid out when it has a width again
            if first_moved is not None:
                self._parked_lo = first_moved if self._parked_lo is None else min(self._parked_lo, first_moved)
            self._parked.extend(updated)
            if to_bottom:
                self._follow(True)
            if new_messages and not self._stuck:
                self.new_below += new_messages
            return
        stick = self.at_bottom or to_bottom
        anchor = None if stick else self._anchor
        # the range grows, then the position follows: the scrollbar repaints once, if its thumb moved in all
        bar = self.vertical_scrollbar if self.show_vertical_scrollbar else None
        self._thumb_before = _thumb(bar) if bar is not None else None
        try:
            lo = self._reflow(layout, first_moved, updated)
            if stick:
                self._follow(True)
                self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
            else:
                if anchor is not None:
                    self._restore_anchor(*anchor)
                if new_messages:
                    self.new_below += new_messages
        finally:
            before, self._thumb_before = self._thumb_before, None
            if bar is not None and _thumb(bar) != before:
                bar.refresh()
        if lo is not None and self._starts[min(lo, len(self._starts) - 1)] < int(self.scroll_y) + self.size.height:
            self.refresh()  # lines moved on screen
        else:
            self._refresh_items(updated)
        self._remember_anchor()

    def show_unread(self, since_ms: int) -> bool:
        """Mark "N new since you left" above the first message of others received after ``since_ms`` and
        scroll so it is near the top (or stay at the end if all of it fits). True if there is such a line."""
        line = self.timeline.mark_unread(since_ms)
        self.commit()
        if line is None or self._layout is None:
            return line is not None
        y = max(0, self.line_of(line) - 1)
        if y < self.max_scroll_y:
            self._follow(False)
            self.scroll_to(y=y, animate=False, force=True)
            self._remember_anchor()
        return True

    def clear_unread(self) -> None:
        if self.timeline.unread_line is not None:
            self.timeline.clear_unread()
            self.commit()

    def scroll_to_latest(self) -> None:
        self._follow(True, seen=True)
        self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    def item_at_line(self, y: int):
        """The item drawn at content line ``y`` (and the line within it)."""
        i = bisect.bisect_right(self._starts, y) - 1
        return self.timeline.items[i], y - self._starts[i]

    def line_of(self, item) -> int:
        return self._starts[self.timeline.index_of(item)]

    # ------------------------------------------------------------- cursor

    @property
    def cursor(self) -> MsgItem | None:
        """The message under the cursor (None when there is no cursor, or it rests on a gap marker)."""
        return self.timeline.cursor

    @property
    def marker_cursor(self) -> MarkerItem | None:
        """The gap marker under the cursor, if it rests on one."""
        return self._marker

    def select(self, item: MsgItem | MarkerItem | None, *, center: bool = False) -> None:
        """Put the cursor on ``item``, a message or a gap marker (None: remove it), and scroll it into view
        (``center``: mid-screen)."""
        marker = item if isinstance(item, MarkerItem) else None
        self.timeline.select(item if isinstance(item, MsgItem) else None)
        self.commit()
        self._set_marker(marker)
        if item is None or self._layout is None:
            return
        self._into_view(item, center)

    def _set_marker(self, marker: MarkerItem | None) -> None:
        """The marker cursor (painted over the marker's line in :meth:`render_line`): only the two lines repaint."""
        old, self._marker = self._marker, marker
        if marker is not None:
            self._marker_ids = frozenset(marker.pending | marker.lost)
        if old is not marker:
            self._refresh_items([m for m in (old, marker) if m is not None])

    def _into_view(self, item, center: bool) -> None:
        try:
            top = self.line_of(item)
        except KeyError:
            return
        height = item.height
        view = self.scrollable_content_region.height
        y = int(self.scroll_y)
        if center:
            y = top - max(0, (view - height) // 2)
        elif top < y:
            y = top
        elif top + height > y + view:
            y = top + height - view
        y = max(0, min(y, int(self.max_scroll_y)))
        if y != int(self.scroll_y):
            self.scroll_to(y=y, animate=False, force=True)
            self._remember_anchor()

    def _messages_from(self, start: int, step: int, markers: bool = False):
        """The messages (and with ``markers``, the gap markers) from item ``start`` on, going ``step``."""
        items = self.timeline.items
        i = start
        while 0 <= i < len(items):
            item = items[i]
            if type(item) is MsgItem or (markers and isinstance(item, MarkerItem) and item.kind is not None):
                yield item
            i += step

    def _cursor_index(self) -> int | None:
        """Where the cursor is (a message, or a marker still shown), as an item index."""
        for cur in (self.timeline.cursor, self._marker):
            if cur is not None:
                try:
                    return self.timeline.index_of(cur)
                except KeyError:  # a marker whose gap closed under the cursor
                    pass
        return None

    def action_cursor(self, step: int) -> None:
        at = self._cursor_index()
        if at is None:  # start on the last message on screen
            bottom = int(self.scroll_y) + self.scrollable_content_region.height - 1
            if not self.timeline.items or self._layout is None:
                return
            start = self.item_at_line(max(0, min(bottom, self.line_count - 1)))[0]
            found = next(self._messages_from(self.timeline.index_of(start), -1), None)
        else:
            found = next(self._messages_from(at + step, step, markers=True), None)
        cur = self.timeline.cursor or self._marker
        if found is None and step > 0 and cur is not None and not self.more_below:
            self.action_leave()  # past the newest: back to typing
            return
        if found is not None:
            self.select(found)

    def action_cursor_end(self, step: int) -> None:
        found = next(self._messages_from(len(self.timeline.items) - 1 if step > 0 else 0, -step), None)
        if found is not None:
            self.select(found)

    def action_picked(self, action: str) -> None:
        if self._marker is not None:
            if action == "inspect":
                ids = self._marker_ids | self._marker.pending | self._marker.lost
                self.post_message(self.GapPicked(self, tuple(sorted(ids))))
            return
        cur = self.timeline.cursor
        if cur is not None:
            self.post_message(self.Picked(self, action, cur.msg))

    def action_leave(self) -> None:
        self.post_message(self.Leave(self))

    def on_key(self, event: events.Key) -> None:
        if event.is_printable and event.character and event.character not in PICK_KEYS:
            event.stop()
            self.post_message(self.Leave(self, event.character))

    def on_blur(self) -> None:
        if self.timeline.cursor is not None or self._marker is not None:
            self.select(None)

    def visible_text(self) -> list[str]:
        """The text of the lines currently on screen (what a person sees), for tests."""
        return [self.render_line(y).text.rstrip() for y in range(self.scrollable_content_region.height)]

    def all_text(self) -> list[str]:
        """Every line of the history as text (slow for huge histories: tests only)."""
        out: list[str] = []
        layout = self._layout
        if layout is None:  # never shown: nothing laid out
            return out
        for i, item in enumerate(self.timeline.items):
            out.extend(s.text.rstrip() for s in self._strips(layout, i, item))
        return out

    # ------------------------------------------------------------- layout

    def _current_layout(self) -> Layout | None:
        width = self.scrollable_content_region.width
        if width <= 0:
            return None
        if self._layout is None or self._layout.width != width:
            stick = self._stuck
            anchor = None if stick else self._anchor
            self._layout = Layout(width, self.tz)
            self._parked_lo, self._parked = None, []
            self._cache.clear()
            self._relayout(full=True)
            if stick:
                self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
            elif anchor is not None:
                self._restore_anchor(*anchor)
            self._remember_anchor()
        elif self._parked_lo is not None or self._parked:
            self._unpark(self._layout)
        return self._layout

    def _reflow(self, layout: Layout, lo: int | None, updated) -> int | None:
        """Re-measure ``updated`` items and re-index from the first that moved; returns that index."""
        width = layout.width
        for item in updated:
            if item.layout_width != width and self._measure(item) != item.height:
                i = self.timeline.index_of(item)
                lo = i if lo is None else min(lo, i)
        if lo is not None:
            self._reindex(layout, lo)
        return lo

    def _unpark(self, layout: Layout) -> None:
        """Lay out what changed while the view had no width (only what changed: a switch stays cheap)."""
        lo, updated = self._parked_lo, self._parked
        self._parked_lo, self._parked = None, []
        self._reflow(layout, lo, updated)
        if self._stuck:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
        self._cache.clear()
        self.refresh()
        self._remember_anchor()

    def _prev_msg(self, index: int) -> MsgItem | None:
        items = self.timeline.items
        for j in range(index - 1, -1, -1):
            item = items[j]
            if type(item) is MsgItem:
                return item
        return None

    def _measure(self, item) -> int:
        """(Re)compute ``item.height`` if it is stale; returns the old height."""
        old = item.height
        layout = self._layout
        if layout is not None and item.layout_width != layout.width:
            i = self.timeline.index_of(item)
            items = self.timeline.items
            item.height = layout.height(item, layout.separator_ms(items, i, self._prev_msg(i)), self.nick_of)
            item.layout_width = layout.width
        return old

    def _relayout(self, full: bool) -> None:
        layout = self._layout or self._current_layout()
        if layout is None:
            return
        items = self.timeline.items
        width = layout.width
        nick_of = self.nick_of
        height = layout.height
        separator = layout.separator_ms
        prev = None
        for i, item in enumerate(items):
            if full or item.layout_width != width:
                item.height = height(item, separator(items, i, prev), nick_of)
                item.layout_width = width
            if type(item) is MsgItem:
                prev = item
        self._starts = list(accumulate((it.height for it in items), initial=0))
        self.virtual_size = Size(width, self._starts[-1])

    def _reindex(self, layout: Layout, lo: int) -> None:
        """Heights and line starts from item ``lo`` on (items before it did not change)."""
        items = self.timeline.items
        lo = max(0, min(lo, len(items), len(self._starts) - 1))
        width = layout.width
        nick_of = self.nick_of
        prev = self._prev_msg(lo)
        tail = items[lo:]
        for i, item in enumerate(tail, lo):
            if item.layout_width != width:
                item.height = layout.height(item, layout.separator_ms(items, i, prev), nick_of)
                item.layout_width = width
            if type(item) is MsgItem:
                prev = item
        self._starts[lo:] = accumulate((it.height for it in tail), initial=self._starts[lo])
        self._set_height(Size(width, self._starts[-1]))

    def _set_height(self, size: Size) -> None:
        """A new scroll range. Assigning ``virtual_size`` lays out the whole screen (8 ms with a window of
        panes, on every message); while the scrollbar is up before and after (its gutter is reserved, so no
        width changes), only this view's range and scrollbar need to know."""
        old = self.virtual_size
        view = self.scrollable_content_region.height
        if old.width == size.width and min(old.height, size.height) > view > 0 and self.show_vertical_scrollbar:
            self.set_reactive(MessageView.virtual_size, size)
            self._move_thumb(virtual=size.height)
            self.refresh()
        else:
            self.virtual_size = size

    def _move_thumb(self, *, virtual: int | None = None, position: float | None = None) -> None:
        """Tell the scrollbar a new range or position, repainting it only if its thumb moves on screen: at
        the end of a long history every message changes both and the thumb stays put (a bar repaint was
        1-3 ms of the frame that shows the message)."""
        bar = self.vertical_scrollbar
        before = _thumb(bar) if self._thumb_before is None else None  # in a commit, its end decides
        if virtual is not None:
            bar.set_reactive(ScrollBar.window_virtual_size, virtual)
        if position is not None:
            bar.set_reactive(ScrollBar.position, bar.validate_position(position))
        if before is not None and _thumb(bar) != before:
            bar.refresh()

    def _remember_anchor(self) -> None:
        """Note the item at the top of the viewport (only call when items and ``_starts`` agree)."""
        if not self.timeline.items or self._starts[-1] == 0 or len(self._starts) != len(self.timeline.items) + 1:
            self._anchor = None
            return
        y = int(self.scroll_y)
        self._anchor = self.item_at_line(min(y, self._starts[-1] - 1))

    def _restore_anchor(self, item, offset: int) -> None:
        try:
            y = self.line_of(item) + offset
        except KeyError:
            return
        if y != int(self.scroll_y):
            self.scroll_to(y=y, animate=False, force=True)

    def _refresh_items(self, items: Iterable) -> None:
        top = int(self.scroll_y)
        bottom = top + self.scrollable_content_region.height
        width = self.scrollable_content_region.width
        for item in items:
            try:
                start = self.line_of(item)
            except KeyError:
                continue
            end = start + item.height
            if end <= top or start >= bottom:
                continue
            self.partial_refreshes += 1
            self.refresh(Region(0, start - top, width, end - start))

    # ------------------------------------------------------------- paint

    def _strips(self, layout: Layout, index: int, item) -> list[Strip]:
        key = (item.uid, item.version, layout.width)
        strips = self._cache.get(key)
        if strips is not None:
            self._cache.move_to_end(key)
            return strips
        items = self.timeline.items
        strips = layout.paint(item, layout.separator_ms(items, index, self._prev_msg(index)), self.nick_of)
        self.painted_lines += len(strips)
        if len(strips) != item.height:  # defensive: the line index must match what is painted
            strips = (strips + [Strip.blank(layout.width)] * item.height)[: item.height]
        self._cache[key] = strips
        if len(self._cache) > _CACHE_ITEMS:
            self._cache.popitem(last=False)
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        layout = self._current_layout()
        index = y + int(self.scroll_y)
        if layout is None or index >= self._starts[-1] or index < 0:
            return Strip.blank(width)
        i = bisect.bisect_right(self._starts, index) - 1
        item = self.timeline.items[i]
        strips = self._strips(layout, i, item)
        if item is self._marker and index - self._starts[i] == item.height - 1:  # its line, not a day separator
            return strips[-1].apply_style(S.cursor_bg)
        return strips[index - self._starts[i]]

    # ------------------------------------------------------------- events

    def on_resize(self) -> None:
        self._current_layout()
        if self._stuck:  # the view got shorter or taller: keep showing the end
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        # ScrollView's, with the scrollbar repainted only when its thumb moves
        if self.show_vertical_scrollbar:
            self._move_thumb(position=new_value)
        if round(old_value) != round(new_value):
            self.refresh(self.size.region)
        near_end = new_value >= self.max_scroll_y - 0.5
        self._follow(near_end and not self.more_below, seen=True)
        self._remember_anchor()
        self.want_pages(new_value)

    def watch_new_below(self, count: int) -> None:
        self.post_message(self.NewBelow(self, count))
