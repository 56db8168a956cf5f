"""``/search words``: the results over every channel of the window, newest first; Enter jumps to one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, tzinfo

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from sdschat.node import SearchHit, SearchQueryError

from ..layout import clean_text
from ..ordered_keys import OrderedInput
from ..theme import nick_style

__all__ = ["SearchScreen", "hit_text", "hit_texts"]

_MATCH = "bold black on yellow"
_LEAD = 24  # characters of context kept before the first match of a long message
_GAP = 12  # characters kept at each end of a long stretch between two matches (the middle is cut to "…")


def _when(ms: int, now_ms: int, tz: tzinfo | None) -> str:
    at = datetime.fromtimestamp(ms / 1000, tz)
    now = datetime.fromtimestamp(now_ms / 1000, tz)
    if at.date() == now.date():
        return at.strftime("%H:%M")
    if at.year == now.year:
        return at.strftime("%d %b %H:%M")
    return at.strftime("%d %b %Y")


def hit_texts(
    hits: list[SearchHit],
    *,
    now_ms: int,
    tz: tzinfo | None = None,
    channel: bool = True,
) -> list[Text]:
    """The results as lines with their columns (channel, when) lined up."""
    whens = [_when(h.message.sent_at_ms, now_ms, tz) for h in hits]
    cw = max((len(h.channel) + 1 for h in hits), default=0) if channel else 0
    ww = max((len(w) for w in whens), default=0)
    return [hit_text(h, when=w.rjust(ww), channel_width=cw) for h, w in zip(hits, whens)]


def hit_text(hit: SearchHit, *, when: str, channel_width: int = 0) -> Text:
    """One result on one line: channel (when ``channel_width``), when, who, and the text from just before its
    first match, the matched words marked. A long stretch between two matches keeps its first and last
    ``_GAP`` characters around an "…", so a later match stays on a narrow line."""
    m = hit.message
    t = Text(no_wrap=True, overflow="ellipsis")
    if channel_width:
        t.append(f"#{hit.channel}".ljust(channel_width) + "  ", "bold")
    t.append(f"{when}  ", "dim")
    t.append(clean_text(m.nick), nick_style(m.sender_id))
    t.append("  ")
    text = m.text.replace("\n", " ").replace("\r", " ").replace("\t", " ")  # same length: spans still index it
    start = 0
    if hit.spans and hit.spans[0][0] > _LEAD + 8:
        start = hit.spans[0][0] - _LEAD
        t.append("…", "dim")
    pos = start
    for s, e in hit.spans:
        if e <= start:
            continue
        s = max(s, start)
        between = text[pos:s]
        if pos > start and len(between) > 2 * _GAP + 1:  # a long stretch after a match: its ends, not its middle
            t.append(clean_text(between[:_GAP]))
            t.append("…", "dim")
            t.append(clean_text(between[-_GAP:]))
        else:
            t.append(clean_text(between))
        t.append(clean_text(text[s:e]), _MATCH)
        pos = e
    t.append(clean_text(text[pos:]))
    return t


class SearchScreen(ModalScreen[SearchHit | None]):
    """Type words, Enter searches; pick a result with the arrows, Enter jumps to it; Escape closes."""

    BINDINGS = [Binding("escape", "dismiss", "close")]

    DEFAULT_CSS = """
    SearchScreen { align: center middle; }
    SearchScreen > Vertical {
        width: 90%;
        height: 80%;
        border: round $accent;
        background: $panel;
        padding: 0 1;
    }
    SearchScreen Input { margin: 0 0 0 0; }
    SearchScreen #search-status { height: 1; color: $text-muted; padding: 0 1; }
    SearchScreen #search-status.-error { color: $error; }
    SearchScreen OptionList, SearchScreen OptionList:focus { height: 1fr; border: none; padding: 0; }
    """

    def __init__(
        self,
        query: str,
        search: Callable[[str], Awaitable[list[SearchHit]]],
        *,
        now_ms: int,
        tz: tzinfo | None = None,
        channels: bool = True,
    ) -> None:
        super().__init__()
        self.query_text = query
        self._search = search
        self.now_ms = now_ms
        self.tz = tz
        self.channels = channels
        self.hits: list[SearchHit] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield OrderedInput(self.query_text, placeholder='words, word*, "a phrase", OR, NOT — Enter searches')
            yield Static("", id="search-status")
            yield OptionList()

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = "search (on this machine only)"
        if self.query_text.strip():
            self.run_search(self.query_text)
        else:
            self.query_one(Input).focus()

    def run_search(self, query: str) -> None:
        self.query_text = query
        self.run_worker(self._run(query), group="search", exclusive=True, exit_on_error=False)

    async def _run(self, query: str) -> None:
        status = self.query_one("#search-status", Static)
        options = self.query_one(OptionList)
        try:
            hits = await self._search(query)
        except SearchQueryError as exc:  # one line, with a hint
            status.update(str(exc))
            status.add_class("-error")
            options.clear_options()
            self.hits = []
            self.query_one(Input).focus()
            return
        status.remove_class("-error")
        self.hits = hits
        options.clear_options()
        width = options.content_region.width or int(self.app.size.width * 0.9) - 4  # not laid out yet: the CSS
        width = max(20, width - 1)
        lines = hit_texts(hits, now_ms=self.now_ms, tz=self.tz, channel=self.channels)
        for line in lines:  # one line each: the list would wrap them
            line.truncate(width, overflow="ellipsis")
        options.add_options([Option(line) for line in lines])
        if hits:
            status.update(
                f"{len(hits)} message{'s' if len(hits) != 1 else ''}, newest first · ↑↓ pick · Enter jump · Esc close"
            )
            options.highlighted = 0
            options.focus()
        else:
            status.update(f"no messages match {query!r}")
            self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.run_search(event.value)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.hits):
            self.dismiss(self.hits[event.option_index])

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
