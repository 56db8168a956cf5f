"""Search over a channel's stored messages: what a hit is, and where the words matched in it.

The index is the store's (SQLite FTS5 over the text on this machine: nothing
is sent anywhere to search). :func:`search_store` reads one channel's hits
from its database, :func:`merge_hits` interleaves several channels' hits
newest first, and :func:`match_spans` finds the query's words in a hit's text
(case and accents folded, as the index folds them) so that a view can
highlight them.
"""

from __future__ import annotations

import heapq
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from ..store import MessageRow, Store, query_terms
from . import events as ev
from .book import decode_app

__all__ = ["SearchHit", "search_store", "merge_hits", "match_spans"]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message that matched: its channel's name, the message, where it is stored (``rowid``, for the next
    page) and the ``(start, end)`` spans of ``message.text`` that matched."""

    channel: str
    message: ev.ChatMessage
    rowid: int
    spans: tuple[tuple[int, int], ...]


def _chat(row: MessageRow, me: str) -> ev.ChatMessage | None:
    app = decode_app(row.content)
    if app is None:
        return None
    return ev.ChatMessage(
        row.message_id,
        row.sender_id,
        app.nick,
        app.text,
        app.kind,
        app.sent_at_ms,
        row.lamport_timestamp,
        row.sender_id == me,
        row.state,
        row.possible_ack_count,
        row.resends,
        row.repaired,
        None,
        row.received_at_ms or 0,
        app.reply_to or None,
    )


async def search_store(
    store: Store, channel_id: str, channel: str, query: str, *, me: str = "", limit: int = 50, before: int | None = None
) -> list[SearchHit]:
    """Hits for ``query`` in one channel's database, newest stored first (``me``: whose messages are own).
    :class:`~sdschat.store.SearchQueryError` for a query that cannot be run."""
    terms = query_terms(query)
    out = []
    for rowid, row in await store.search(channel_id, query, limit=limit, before=before):
        chat = _chat(row, me)
        if chat is not None:
            out.append(SearchHit(channel, chat, rowid, tuple(match_spans(chat.text, terms))))
    return out


def merge_hits(lists: Iterable[list[SearchHit]], limit: int) -> list[SearchHit]:
    """Several channels' hits (each newest first) as one list, newest first by the time they were sent."""
    merged = heapq.merge(*lists, key=lambda h: (-h.message.sent_at_ms, h.channel, -h.rowid))
    return [h for _, h in zip(range(limit), merged)]


def _fold(text: str) -> tuple[str, list[int]]:
    """``text`` lower-cased without accents, and for each folded character the index it came from."""
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKD", ch.casefold()):
            if not unicodedata.combining(c):
                out.append(c)
                origin.append(i)
    return "".join(out), origin


def match_spans(text: str, terms: list[tuple[str, bool]]) -> list[tuple[int, int]]:
    """Where the words ``terms`` (``(word, prefix)`` from :func:`~sdschat.store.search.query_terms`) occur in
    ``text`` as words (or word starts, for a prefix): sorted, non-overlapping ``(start, end)`` spans."""
    if not terms or not text:
        return []
    folded, origin = _fold(text)
    spans: list[tuple[int, int]] = []
    for word, prefix in terms:
        w, _ = _fold(word)
        if not w:
            continue
        start = folded.find(w)
        while start >= 0:
            end = start + len(w)
            at_start = start == 0 or not folded[start - 1].isalnum()
            at_end = prefix or end == len(folded) or not folded[end].isalnum()
            if at_start and at_end:
                if prefix:  # the whole word that starts here
                    while end < len(folded) and folded[end].isalnum():
                        end += 1
                spans.append((origin[start], origin[end - 1] + 1))
            start = folded.find(w, start + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged
