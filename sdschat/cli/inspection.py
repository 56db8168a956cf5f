"""``sdschat inspect``: one message's life, or every gap and how it closed, read from a channel's database.

Works on the profile's channel (``--channel``) or any participant database
(``--db``: after a restart, or a file someone sends you). Text lines by default,
``--json`` for one JSON object (``--gaps``: one per gap, a line each).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from .args import add_home_arg
from .errors import CliError, profile_call

__all__ = ["inspect_configure", "inspect_run"]


def inspect_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("message_id", nargs="?", help="the message's id (or its first 6+ characters)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--channel", help="a channel of your profile")
    which.add_argument("--db", type=Path, help="a participant's database file")
    p.add_argument("--gaps", action="store_true", help="list every gap noticed and how it closed")
    p.add_argument("--json", action="store_true", help="JSON instead of lines")
    add_home_arg(p)


async def inspect_run(args: argparse.Namespace) -> int:
    from sdschat.crypto import CryptoError, Identity
    from sdschat.node.inspect import InspectError, gap_reports, inspect_message, render, resolve_message_id, wall_clock
    from sdschat.store import Store, StoreError

    if args.gaps == (args.message_id is not None):
        raise CliError("give a message id, or --gaps")
    channel_id = None
    if args.channel is not None:
        from .profiles import load_profile

        profile = load_profile(args)
        entry = profile_call(profile.channel, args.channel)
        args.db, channel_id = profile.db_path(entry), profile.key(entry).channel_id
    if not args.db.exists():
        raise CliError(f"no database at {args.db}")
    try:
        async with await Store.open(args.db, create=False) as store:
            ids = await store.channel_ids()
            if channel_id is None:
                if len(ids) != 1:
                    raise CliError(f"{args.db} holds {len(ids)} channels; name one with --channel")
                channel_id = ids[0]
            elif channel_id not in ids:
                raise CliError(f"#{args.channel} has nothing stored yet")
            raw = await store.get_identity()
            me = Identity.from_private_bytes(raw).participant_id if raw else await store.participant_of(channel_id)
            names = {p.participant_id: p.nick for p in await store.participants()}
            if args.gaps:
                gaps = await gap_reports(store, channel_id, me=me, names=names)
                _print_gaps(gaps, names, args.json)
                return 0
            mid = await resolve_message_id(store, channel_id, args.message_id)
            insp = await inspect_message(store, channel_id, mid, me=me, names=names)
    except InspectError as exc:
        raise CliError(str(exc)) from None
    except (StoreError, CryptoError, ValueError) as exc:
        raise CliError(f"{args.db}: {exc}") from None
    if insp is None:
        raise CliError(f"nothing in {args.db} tells of message {mid[:16]}")
    if args.json:
        print(json.dumps(insp.to_json(), ensure_ascii=False))
    else:
        now = int(datetime.now().timestamp() * 1000)
        print("\n".join(render(insp, now_ms=now, clock=wall_clock, names=names)))
    return 0


def _print_gaps(gaps, names, as_json: bool) -> None:
    from sdschat.node.inspect import gap_lines, wall_clock

    if as_json:
        for g in gaps:
            print(json.dumps(g.to_json(), ensure_ascii=False))
        return
    if not gaps:
        print("no gaps: every message arrived in order")
        return
    now = int(datetime.now().timestamp() * 1000)
    for g in gaps:
        print("\n".join(gap_lines(g, names, wall_clock, now)))
