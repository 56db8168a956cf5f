"""``sdschat search QUERY``: find messages in every channel of the profile (or one), on this machine.

The search runs over each channel's database (its FTS5 index: nothing leaves
the machine). Results go to stdout newest first, one per line (``--json``: one
JSON object per line); a query that cannot be run gets one line and exit 2. A query word may start
with ``-`` (``search -deploy``: a word like any other, its punctuation ignored as everywhere in a
query; ``NOT`` excludes); only the command's own options are read as options, and after ``--``
every word is part of the query. A channel whose database cannot be read (damaged) does not keep the others
from being searched: their results come first, then one line for it, and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from datetime import datetime

from .args import add_home_arg
from .errors import CliError, refuse_after
from .profiles import load_profile

__all__ = ["search_configure", "search_run"]

_MARK = ("\x1b[1;7m", "\x1b[0m")  # bold reverse: the matched words, on a terminal


def search_configure(p: argparse.ArgumentParser) -> None:
    p.epilog = (
        "A word may start with '-' (sdschat search -deploy): only the options above are read as options, "
        "and every word after -- is part of the query (sdschat search -- --json). Punctuation is "
        "ignored, so -deploy finds deploy; NOT excludes a word (deploy NOT friday)."
    )
    p.add_argument("query", nargs="+", help='words (all must match), word* (prefix), "a phrase", OR, NOT')
    p.set_defaults(_words=True)  # -deploy is a word of the query, not an unknown option (cli/main.py)
    p.add_argument("--channel", help="search this channel only (default: every channel of the profile)")
    p.add_argument("--limit", type=int, default=50, help="at most this many results (default 50)")
    p.add_argument("--json", action="store_true", help="one JSON object per result instead of a line")
    add_home_arg(p)


async def search_run(args: argparse.Namespace) -> int:
    from sdschat.crypto import CryptoError
    from sdschat.node import merge_hits, nick_owners, search_store, shown_name
    from sdschat.store import SearchQueryError, Store, StoreError, fts_query

    if not 1 <= args.limit <= 10_000:
        raise CliError("--limit must be between 1 and 10000")
    query = " ".join(args.query)
    fts_query(query)  # a query that cannot be run is refused before any database is opened
    profile = load_profile(args)
    entries = [profile.channel(args.channel)] if args.channel else list(profile.channels.values())
    me = profile.participant_id  # no passphrase needed for the id
    found = []
    unreadable: list[CliError] = []  # the channels that could not be read: one line each after the results, exit 2
    shown: dict[tuple[str, str], str] = {}  # (channel, message id) -> its sender as the line names them
    for entry in entries:
        db = profile.db_path(entry)
        if not db.exists():  # joined, never opened: nothing stored yet
            continue
        try:
            async with await Store.open(db, create=False) as store:
                hits = await search_store(
                    store, profile.key(entry).channel_id, entry.name, query, me=me, limit=args.limit
                )
                # named as the window names them: a nick two members go by comes with the start of each one's id
                owners = nick_owners(await store.participants(), me)
                for h in hits:
                    m = h.message
                    shown[h.channel, m.message_id] = shown_name(m.sender_id, m.nick, owners, me, profile.name)
                found.append(hits)
        except SearchQueryError:
            raise  # the query's fault, not the channel's: no channel named
        except (StoreError, CryptoError, ValueError) as exc:  # a damaged channel: the others are searched
            unreadable.append(CliError(f"#{entry.name}: {exc}"))
    hits = merge_hits(found, args.limit)
    if args.json:
        for h in hits:
            print(json.dumps(_as_json(h), ensure_ascii=False))
    else:
        mark = sys.stdout.isatty()
        for h in hits:
            print(_as_line(h, mark, shown.get((h.channel, h.message.message_id), h.message.nick)))
    if unreadable:
        refuse_after(unreadable)  # (the results first, then what could not be searched)
    if not hits:
        print(f"sdschat: no messages match {query!r}", file=sys.stderr)
    return 0


def _as_json(h) -> dict:
    m = h.message
    return {
        "channel": h.channel,
        "message_id": m.message_id,
        "sender_id": m.sender_id,
        "nick": m.nick,
        "kind": m.kind,
        "sent_at_ms": m.sent_at_ms,
        "lamport_timestamp": m.lamport_timestamp,
        "text": m.text,
        "matches": [list(s) for s in h.spans],
    }


def _printable(text: str) -> str:
    """``text`` safe to print on a terminal: control and format characters (a peer's escape sequences, new
    lines) become one replacement character each, so match spans still index it."""
    return "".join("\ufffd" if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)


def _as_line(h, mark: bool, name: str) -> str:
    """One result: channel, when, who (``name``: as the window names the sender), the text."""
    m = h.message
    at = datetime.fromtimestamp(m.sent_at_ms / 1000).strftime("%Y-%m-%d %H:%M")
    text = _printable(m.text)
    if mark:
        out, pos = [], 0
        for s, e in h.spans:
            out += [text[pos:s], _MARK[0], text[s:e], _MARK[1]]
            pos = e
        text = "".join(out) + text[pos:]
    nick = _printable(name)
    from sdschat.node.events import ACTION_KINDS

    who = f"* {nick}" if m.kind in ACTION_KINDS else nick
    return f"#{h.channel}  {at}  {who}  {text}"
