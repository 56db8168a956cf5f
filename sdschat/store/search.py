"""Full-text search over the stored message text (the ``message_search`` FTS5 index, migrations 0002 and 0006).

:func:`index_pending` takes the messages stored since its last run into the index, in one statement (0006):
the store runs it when :data:`INDEX_BATCH` rows have gathered and before every search.

:func:`fts_query` turns what a person types into an FTS5 query:

* plain words are matched as words, all of them (``lunch friday``), in any
  case and with or without accents; punctuation inside a word is fine
  (``don't``, ``@alice``, ``v1.2``);
* ``word*`` matches words starting with ``word``;
* ``"two words"`` matches the phrase;
* ``OR``, ``NOT`` and ``AND`` (in capitals) combine words and phrases.

A query that is empty, holds only punctuation, has an unclosed quote or
misplaces an operator raises :class:`SearchQueryError` (one line, with a hint);
nothing else reaches the database.
"""

from __future__ import annotations

import logging
import re
import sqlite3

from .errors import StoreError

__all__ = ["SearchQueryError", "fts_query", "query_terms", "SEARCH_HINT", "INDEX_BATCH", "index_pending"]

SEARCH_HINT = 'search for words, word* (prefix), "a phrase", OR, NOT'
_OPERATORS = frozenset({"AND", "OR", "NOT"})
_TOKEN = re.compile(r'"([^"]*)"(\*?)|(\S+)')
_WORD = re.compile(r"\w+")
log = logging.getLogger("sdschat.store")

#: messages stored and not yet searchable that the store lets gather before it indexes them (a few seconds of
#: a busy channel; a search indexes whatever is left first, so it never misses one)
INDEX_BATCH = 256
#: the kv key of the highest rowid of ``messages`` the index holds (migrations/0006)
_MARK = "search_indexed_through"
_INDEX = (
    "INSERT INTO message_search (rowid, text) "
    "SELECT rowid, json_extract(CAST(content AS TEXT), '$.text') FROM messages "
    "WHERE rowid > ?1 AND rowid <= ?2 AND (CASE WHEN json_valid(CAST(content AS TEXT)) "
    "THEN json_type(CAST(content AS TEXT), '$.text') END) = 'text'"
)


class SearchQueryError(StoreError):
    """A search query that cannot be run: one line saying why, and how to write one."""


def _phrase(text: str, prefix: str) -> str | None:
    words = _WORD.findall(text)
    if not words:
        return None
    return '"' + " ".join(words) + '"' + prefix


def fts_query(text: str) -> str:
    """The FTS5 query for ``text`` (see the module doc); :class:`SearchQueryError` if there is none."""
    if text.count('"') % 2:
        raise SearchQueryError(f"unclosed quote in the search; {SEARCH_HINT}")
    parts: list[str] = []
    for m in _TOKEN.finditer(text):
        quoted, star, bare = m.groups()
        if bare is not None and bare in _OPERATORS:
            parts.append(bare)
            continue
        if bare is not None:
            star = "*" if bare.endswith("*") else ""
            quoted = bare.rstrip("*")
        phrase = _phrase(quoted, star)
        if phrase is not None:
            parts.append(phrase)
    if not any(p not in _OPERATORS for p in parts):
        raise SearchQueryError(f"nothing to search for; {SEARCH_HINT}")
    if parts[0] in _OPERATORS and parts[0] != "NOT" or parts[-1] in _OPERATORS:
        raise SearchQueryError(
            f"{parts[0] if parts[0] in _OPERATORS else parts[-1]} needs words on both sides; {SEARCH_HINT}"
        )
    if parts[0] == "NOT":  # FTS5's NOT is binary: "NOT x" alone means nothing
        raise SearchQueryError(f"NOT needs words before it (lunch NOT friday); {SEARCH_HINT}")
    out: list[str] = []
    for p in parts:
        if p in _OPERATORS and out and out[-1] in _OPERATORS:
            raise SearchQueryError(f"{out[-1]} {p}: two operators in a row; {SEARCH_HINT}")
        out.append(p)
    return " ".join(out)


def query_terms(text: str) -> list[tuple[str, bool]]:
    """The words of a query to highlight in a result, as ``(word, prefix)`` (operators and NOT-ed words
    left out)."""
    terms: list[tuple[str, bool]] = []
    negate = False
    for m in _TOKEN.finditer(text):
        quoted, star, bare = m.groups()
        if bare is not None and bare in _OPERATORS:
            negate = bare == "NOT"
            continue
        if bare is not None:
            star = "*" if bare.endswith("*") else ""
            quoted = bare.rstrip("*")
        words = _WORD.findall(quoted)
        if not negate:
            terms.extend((w, bool(star) and i == len(words) - 1) for i, w in enumerate(words))
        negate = False
    return terms


def index_pending(conn: sqlite3.Connection, at_least: int = 1) -> int:
    """Index the messages stored above the index's mark, if there are ``at_least`` of them (counted by rowid),
    and move the mark to the newest; returns how many rowids it covered (0: nothing done). Inside the caller's
    write transaction: the rows and the mark commit together."""
    row = conn.execute("SELECT CAST(value AS INTEGER) FROM kv WHERE key = ?", (_MARK,)).fetchone()
    (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM messages").fetchone()
    if row is None:  # only a damaged file lacks it (0006 writes it, nothing deletes it): the index is rebuilt
        log.warning("the search index's mark is missing: rebuilding the index")
        conn.execute("INSERT INTO message_search (message_search) VALUES ('delete-all')")
        conn.execute(_INDEX, (0, top))
        conn.execute("INSERT INTO kv (key, value) VALUES (?, ?)", (_MARK, str(top)))
        return int(top)
    (mark,) = row
    if top - mark < max(1, at_least):
        return 0
    conn.execute(_INDEX, (mark, top))
    conn.execute("UPDATE kv SET value = ? WHERE key = ?", (str(top), _MARK))
    return int(top - mark)


def run_error(exc: sqlite3.Error) -> SearchQueryError | None:
    """The one-line error for an FTS5 query SQLite refused (None: not a query problem)."""
    text = str(exc)
    if "fts5" in text or "syntax error" in text or "unterminated" in text:
        return SearchQueryError(f"cannot search for that ({text}); {SEARCH_HINT}")
    return None
