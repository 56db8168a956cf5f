"""``sdschat init``, ``new``, ``invite``, ``join``, ``channels``, ``part``: the profile and the channels in it.

Results go to stdout (a path, a channel name, a token); notes go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
from pathlib import Path

from .args import add_home_arg
from .errors import CliError, profile_call

__all__ = [
    "load_profile", "init_configure", "init_run", "new_configure", "new_run", "invite_configure",
    "invite_run", "join_configure", "join_run", "channels_configure", "channels_run", "part_configure", "part_run",
]


def load_profile(args: argparse.Namespace):
    from sdschat.profile import Profile, resolve_paths

    return profile_call(Profile.load, resolve_paths(getattr(args, "home", None)))


#: where a protected identity's passphrase may come from instead of the terminal
IDENTITY_PASSPHRASE_ENV = "SDSCHAT_IDENTITY_PASSPHRASE"


def init_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, help="your display name in every channel")
    p.add_argument("--broker", default="", help="mqtt://host:port (default: 127.0.0.1:1883 if it answers, "
                   "else an embedded broker)")
    p.add_argument("--protect", action="store_true",
                   help="seal your identity key under a passphrase (SDSCHAT_IDENTITY_PASSPHRASE, else asked twice); "
                        "every later start asks for it, and no channel database holds the key")
    add_home_arg(p)


def init_run(args: argparse.Namespace) -> int:
    from sdschat.profile import Profile, resolve_paths

    if args.broker:
        _check_broker(args.broker)
    passphrase = new_identity_passphrase() if args.protect else None
    profile = profile_call(Profile.create, resolve_paths(getattr(args, "home", None)), args.name, args.broker,
                           passphrase=passphrase)
    print(profile.paths.profile_file)
    print(f"sdschat: created the profile of {profile.name}; `sdschat new CHANNEL` starts a channel", file=sys.stderr)
    return 0


def _check_broker(url: str) -> None:
    from sdschat.transport import TransportError, parse_broker_url

    try:
        parse_broker_url(url)
    except (TransportError, ValueError) as exc:
        raise CliError(f"--broker: {exc}") from None


def new_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="the new channel's name (local: never sent to the broker)")
    add_home_arg(p)


def new_run(args: argparse.Namespace) -> int:
    profile = load_profile(args)
    entry = profile_call(profile.add_channel, args.channel, os.urandom(32))
    print(entry.name)
    print(f"sdschat: created #{entry.name} with a fresh key; `sdschat invite {entry.name}` brings people in",
          file=sys.stderr)
    return 0


def invite_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="a joined channel")
    p.add_argument("--qr", action="store_true", help="also print the token as a QR code for the terminal")
    add_home_arg(p)


def invite_run(args: argparse.Namespace) -> int:
    from sdschat.profile import encode_invite

    profile = load_profile(args)
    entry = profile_call(profile.channel, args.channel)
    admins, epoch, removed = asyncio.run(_channel_keys(profile.db_path(entry)))
    invite = profile_call(profile.invite, args.channel, admins=admins, epoch=epoch, removed=removed)
    token = encode_invite(invite)
    print(token)
    if args.qr:
        import segno

        segno.make(token, error="m").terminal(out=sys.stdout, compact=True)
    print(f"sdschat: this token is #{invite.channel}'s key: whoever holds it reads and writes the channel; "
          "send it only to the people you invite, over a private channel", file=sys.stderr)
    return 0


async def _channel_keys(db: Path):
    """The admins, current key epoch and removed members the channel's database knows (Nones: none yet)."""
    from sdschat.node import MEMBERSHIP_KEY
    from sdschat.node.membership import Membership
    from sdschat.store import Store, StoreError

    if not db.exists():
        return None, None, None
    try:
        async with await Store.open(db, create=False) as store:
            raw = await store.kv_get(MEMBERSHIP_KEY)
    except StoreError as exc:
        raise CliError(str(exc)) from None
    if raw is None:
        return None, None, None
    try:
        return Membership.read_keys(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{db}: the membership state is damaged ({exc})") from None


def join_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("token", nargs="?", help="an invite token (from `sdschat invite`)")
    g = p.add_argument_group("importing a channel of sdschat 0.1")
    g.add_argument("--key-file", type=Path, help="its key file (with --channel)")
    g.add_argument("--channel", help="its channel name")
    g.add_argument("--db", type=Path, help="its database: copied into the profile, history and all")
    add_home_arg(p)


def join_run(args: argparse.Namespace) -> int:
    from sdschat.profile import decode_invite

    profile = load_profile(args)
    if args.token is not None:
        if args.key_file or args.channel or args.db:
            raise CliError("join takes a token, or --key-file and --channel, not both")
        invite = profile_call(decode_invite, args.token)
        name, secret, db = invite.channel, invite.secret, None
        admins, epoch, removed = invite.admins, (invite.epoch, invite.epoch_secret), invite.removed
        if invite.broker and not profile.broker:
            profile.broker = invite.broker  # the first invite says where the group meets
            profile_call(profile.save)
        elif invite.broker and invite.broker != profile.broker:
            print(f"sdschat: note: the invite names the broker {invite.broker}; your profile uses {profile.broker}",
                  file=sys.stderr)
    else:
        name, secret, db = _imported(profile, args)
        admins, epoch, removed = (), None, ()  # a channel of sdschat 0.1 has no admins: nobody removes anyone
    entry = profile_call(profile.add_channel, name, secret, db=db, admins=admins, epoch=epoch, removed=removed)
    if db is not None:
        try:
            _copy_database(args.db, profile.db_path(entry))
        except BaseException:
            profile.remove_channel(entry.name, forget=True)
            raise
    print(entry.name)
    return 0


def _imported(profile, args: argparse.Namespace) -> tuple[str, bytes, Path | None]:
    from sdschat.crypto import CryptoError
    from sdschat.crypto.keyfile import read_key_file

    if not (args.key_file and args.channel):
        raise CliError("join needs an invite token, or --key-file FILE --channel NAME")
    try:
        secret = read_key_file(args.key_file)
    except CryptoError as exc:
        raise CliError(str(exc)) from None
    db = None
    if args.db is not None:
        if not args.db.is_file():
            raise CliError(f"no database at {args.db}")
        db = Path("db") / f"imported-{os.urandom(6).hex()}.db"
    return args.channel, secret, db


def _copy_database(source: Path, target: Path) -> None:
    """A consistent copy (SQLite's backup, WAL included), created 0600."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        raise CliError(f"cannot import {source}: {exc}") from None


def channels_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per channel instead of a table")
    add_home_arg(p)


async def channels_run(args: argparse.Namespace) -> int:
    profile = load_profile(args)
    rows = [await _channel_summary(profile, entry) for entry in profile.channels.values()]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    if not rows:
        print("sdschat: no channels yet: `sdschat new NAME` or `sdschat join TOKEN`", file=sys.stderr)
        return 0
    width = max(8, *(len(r["channel"]) + 1 for r in rows))
    print(f"{'CHANNEL'.ljust(width)}  {'MEMBERS':>7}  {'UNREAD':>6}  {'MESSAGES':>8}")
    for r in rows:
        print(f"{('#' + r['channel']).ljust(width)}  {r['members']:>7}  {r['unread']:>6}  {r['messages']:>8}")
    return 0


async def _channel_summary(profile, entry) -> dict:
    """Name, members seen (you included), unread (others' messages since you last had it on screen), messages."""
    from sdschat.crypto import CryptoError, Identity
    from sdschat.node import CONTROL_PREFIXES
    from sdschat.store import Store, StoreError

    row = {"channel": entry.name, "members": 1, "unread": 0, "messages": 0}
    db = profile.db_path(entry)
    if not db.exists():  # joined, never opened
        return row
    channel_id = profile.key(entry).channel_id
    try:
        async with await Store.open(db, create=False) as store:
            raw = await store.get_identity()
            # a protected profile's databases hold no key: the profile's public id says who "you" are
            me = Identity.from_private_bytes(raw).participant_id if raw else profile.participant_id
            seen = {p.participant_id for p in await store.participants()} | {me}
            row.update(members=len(seen - {""}), unread=await store.unread_count(channel_id, entry.read_ms, me,
                                                                                 CONTROL_PREFIXES),
                       messages=await store.message_count(channel_id))
    except (StoreError, CryptoError, ValueError) as exc:
        raise CliError(f"#{entry.name}: {exc}") from None
    return row


def part_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="a joined channel")
    p.add_argument("--forget", action="store_true", help="also delete its history (the database)")
    add_home_arg(p)


def part_run(args: argparse.Namespace) -> int:
    profile = load_profile(args)
    entry = profile_call(profile.remove_channel, args.channel, forget=args.forget)
    print(entry.name)
    kept = "its history is deleted" if args.forget else f"its history stays in {profile.db_path(entry)}"
    print(f"sdschat: left #{entry.name}; {kept}", file=sys.stderr)
    return 0


def new_identity_passphrase() -> str:
    """The passphrase for a new protected identity: SDSCHAT_IDENTITY_PASSPHRASE, else asked twice on the terminal."""
    import getpass

    passphrase = os.environ.get(IDENTITY_PASSPHRASE_ENV)
    if passphrase is None:
        if not sys.stdin.isatty():
            raise CliError(f"--protect needs a passphrase: set {IDENTITY_PASSPHRASE_ENV} (no terminal to ask on)")
        passphrase = getpass.getpass("passphrase for your identity: ")
        if getpass.getpass("the same again: ") != passphrase:
            raise CliError("the two passphrases differ; nothing was created")
    if len(passphrase) < 8:
        raise CliError("the identity's passphrase must have at least 8 characters")
    return passphrase


def profile_identity(profile):
    """The profile's identity, asking for its passphrase if it is protected (SDSCHAT_IDENTITY_PASSPHRASE, else the
    terminal); one line and exit 2 without it, or for a wrong one."""
    if not profile_call(lambda: profile.protected):
        return profile_call(profile.identity)
    passphrase = os.environ.get(IDENTITY_PASSPHRASE_ENV)
    if passphrase is None:
        if not sys.stdin.isatty():
            raise CliError(f"your identity is protected: set {IDENTITY_PASSPHRASE_ENV} (no terminal to ask on)")
        import getpass

        passphrase = getpass.getpass("passphrase for your identity: ")
    return profile_call(profile.identity, passphrase)
