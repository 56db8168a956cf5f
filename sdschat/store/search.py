"""Full-text search over the stored message text (the ``message_search`` FTS5 index, migration 0002).

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

import re
import sqlite3

from .errors import StoreError

__all__ = ["SearchQueryError", "fts_query", "query_terms", "SEARCH_HINT"]

SEARCH_HINT = 'search for words, word* (prefix), "a phrase", OR, NOT'
_OPERATORS = frozenset({"AND", "OR", "NOT"})
_TOKEN = re.compile(r'"([^"]*)"(\*?)|(\S+)')
_WORD = re.compile(r"\w+")


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


def run_error(exc: sqlite3.Error) -> SearchQueryError | None:
    """The one-line error for an FTS5 query SQLite refused (None: not a query problem)."""
    text = str(exc)
    if "fts5" in text or "syntax error" in text or "unterminated" in text:
        return SearchQueryError(f"cannot search for that ({text}); {SEARCH_HINT}")
    return None
