"""``sdschat inspect``: one message's life, or every gap and how it closed, read from the databases.

Works on every joined channel of the profile (the default: a message is looked up in each, by its id or an
unambiguous prefix; ``--gaps`` lists each channel's gaps under its name), on one channel of it
(``--channel``), or on any participant database (``--db``: after a restart, or a file someone sends you).
Text lines by default, ``--json`` for one JSON object (``--gaps``: one per gap, a line each; with a
``channel`` field when the channel has a name here).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from datetime import datetime
from pathlib import Path

from .args import add_home_arg
from .errors import CliError

__all__ = ["inspect_configure", "inspect_run"]


def inspect_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("message_id", nargs="?", help="the message's id (or its first 6+ characters)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--channel", help="a channel of your profile (default: every joined channel)")
    which.add_argument("--db", type=Path, help="a participant's database file")
    p.add_argument("--gaps", action="store_true", help="list every gap noticed and how it closed")
    p.add_argument("--json", action="store_true", help="JSON instead of lines")
    add_home_arg(p)


@dataclasses.dataclass(frozen=True)
class _Source:
    """One database to read: a channel of the profile (``name``, its channel id) or a file (``--db``)."""

    db: Path
    name: str | None = None
    channel_id: str | None = None
    #: named on the command line (``--db``, ``--channel``): its absence is an error, not a channel to skip
    named: bool = True

    @property
    def label(self) -> str:
        return f"#{self.name}" if self.name is not None else str(self.db)


@dataclasses.dataclass(frozen=True)
class _Reading:
    store: object
    channel_id: str
    me: str
    names: dict


async def inspect_run(args: argparse.Namespace) -> int:
    from sdschat.node.inspect import check_message_id

    if args.gaps == (args.message_id is not None):
        raise CliError("give a message id, or --gaps")
    text = None
    if args.message_id is not None:
        text = check_message_id(args.message_id)  # a bad id is refused before any database is opened
    sources = _sources(args)
    if text is None:  # --gaps
        await _gaps(sources, args.json)
    else:
        await _message(sources, text, args.json)
    return 0


def _sources(args: argparse.Namespace) -> list[_Source]:
    """The databases to read: ``--db``, ``--channel``, or every joined channel of the profile."""
    if args.db is not None:
        if not args.db.exists():
            raise CliError(f"no database at {args.db}")
        return [_Source(args.db)]
    from .profiles import load_profile

    profile = load_profile(args)  # no profile: one line
    if args.channel is not None:
        entry = profile.channel(args.channel)
        src = _Source(profile.db_path(entry), entry.name, profile.key(entry).channel_id)
        if not src.db.exists():
            raise CliError(f"#{entry.name} has nothing stored yet (no database at {src.db})")
        return [src]
    if not profile.channels:
        raise CliError("no channel joined yet: nothing to inspect (create one with `sdschat new`, or `sdschat join`)")
    return [
        _Source(profile.db_path(e), e.name, profile.key(e).channel_id, named=False) for e in profile.channels.values()
    ]


@contextlib.contextmanager
def _one_line(src: _Source, prefix: bool):
    """Failures reading ``src`` as one :class:`CliError` line (prefixed with the channel with ``prefix``)."""
    from sdschat.crypto import CryptoError
    from sdschat.node.inspect import InspectError
    from sdschat.store import StoreError

    try:
        yield
    except InspectError as exc:
        if not prefix:
            raise  # one line as it is (cli/main.py)
        raise CliError(f"{src.label}: {exc}") from None
    except (StoreError, CryptoError, ValueError) as exc:
        raise CliError(f"{src.label}: {exc}") from None


@contextlib.asynccontextmanager
async def _reading(src: _Source):
    """``src``'s store and what reading it needs (its channel, who we are there, the names it knows); None for a
    channel of the profile with nothing stored yet."""
    from sdschat.crypto import Identity
    from sdschat.store import Store

    if not src.db.exists():  # joined, never opened: nothing stored yet
        yield None
        return
    async with await Store.open(src.db, create=False) as store:
        ids = await store.channel_ids()
        channel_id = src.channel_id
        if channel_id is None:
            if len(ids) != 1:
                raise CliError(f"{src.db} holds {len(ids)} channels; name one with --channel")
            channel_id = ids[0]
        elif channel_id not in ids:
            if src.named:
                raise CliError(f"{src.label} has nothing stored yet")
            yield None
            return
        raw = await store.get_identity()
        me = Identity.from_private_bytes(raw).participant_id if raw else await store.participant_of(channel_id)
        names = {p.participant_id: p.nick for p in await store.participants()}
        yield _Reading(store, channel_id, me, names)


async def _message(sources: list[_Source], text: str, as_json: bool) -> None:
    from sdschat.node.inspect import inspect_message, message_ids_like, render, resolve_message_id, wall_clock

    wide = len(sources) > 1 or not sources[0].named
    if wide:  # every joined channel: the one (and only one) that holds a message so named
        found = []
        for src in sources:
            with _one_line(src, prefix=True):
                async with _reading(src) as r:
                    if r is not None and await message_ids_like(r.store, r.channel_id, text):
                        found.append(src)
        if not found:
            raise CliError(f"no message {text} in any joined channel ({', '.join(s.label for s in sources)})")
        if len(found) > 1:
            raise CliError(
                f"{text} names messages in {len(found)} channels ({', '.join(s.label for s in found)}): "
                "give more of the id, or --channel"
            )
        sources = found
    src = sources[0]
    with _one_line(src, prefix=wide):
        async with _reading(src) as r:
            mid = await resolve_message_id(r.store, r.channel_id, text)
            insp = await inspect_message(r.store, r.channel_id, mid, me=r.me, names=r.names)
            names = r.names
    if insp is None:
        raise CliError(f"nothing in {src.db} tells of message {mid[:16]}")
    if as_json:
        doc = insp.to_json()
        print(json.dumps({"channel": src.name, **doc} if src.name is not None else doc, ensure_ascii=False))
        return
    if wide:
        print(f"in {src.label}")
    now = int(datetime.now().timestamp() * 1000)
    print("\n".join(render(insp, now_ms=now, clock=wall_clock, names=names)))


async def _gaps(sources: list[_Source], as_json: bool) -> None:
    from sdschat.node.inspect import gap_lines, gap_reports, wall_clock

    wide = len(sources) > 1 or not sources[0].named
    now = int(datetime.now().timestamp() * 1000)
    for i, src in enumerate(sources):
        with _one_line(src, prefix=wide):
            async with _reading(src) as r:
                gaps = [] if r is None else await gap_reports(r.store, r.channel_id, me=r.me, names=r.names)
                names = {} if r is None else r.names
        if as_json:
            for g in gaps:
                doc = g.to_json()
                print(json.dumps({"channel": src.name, **doc} if src.name is not None else doc, ensure_ascii=False))
            continue
        if wide:
            print(("\n" if i else "") + src.label)
        if r is None:
            print("nothing stored yet")
        elif not gaps:
            print("no gaps: every message arrived in order")
        for g in gaps:
            print("\n".join(gap_lines(g, names, wall_clock, now)))
