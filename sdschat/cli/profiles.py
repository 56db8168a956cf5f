"""``sdschat init``, ``new``, ``invite``, ``join``, ``channels``, ``part``: the profile and the channels in it.

Results go to stdout (a path, a channel name, a token); notes go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sqlite3
import sys
from pathlib import Path

from .args import add_home_arg, broker_url, ca_file
from .errors import CliError, refuse_after

__all__ = [
    "load_profile",
    "broker_failure",
    "read_invite",
    "init_configure",
    "init_run",
    "new_configure",
    "new_run",
    "invite_configure",
    "invite_run",
    "join_configure",
    "join_run",
    "channels_configure",
    "channels_run",
]


def load_profile(args: argparse.Namespace):
    from sdschat.profile import Profile, resolve_paths

    return Profile.load(resolve_paths(getattr(args, "home", None)))


#: where a protected identity's passphrase may come from instead of the terminal
IDENTITY_PASSPHRASE_ENV = "SDSCHAT_IDENTITY_PASSPHRASE"


def init_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, help="your display name in every channel")
    p.add_argument(
        "--broker",
        type=broker_url,
        help="mqtt://[USER:PASSWORD@]host:port, or mqtts://... "
        "(default: 127.0.0.1:1883 if it answers, else an embedded broker)",
    )
    p.add_argument(
        "--ca",
        type=ca_file,
        metavar="FILE",
        help="the CA certificate to check an mqtts:// broker with (default: the system's)",
    )
    p.add_argument(
        "--protect",
        action="store_true",
        help="seal your identity key under a passphrase (SDSCHAT_IDENTITY_PASSPHRASE, else asked twice); "
        "every later start asks for it, and no channel database holds the key",
    )
    add_home_arg(p)


def init_run(args: argparse.Namespace) -> int:
    from sdschat.profile import Profile, resolve_paths

    if args.ca is not None and args.broker is None:
        raise CliError("--ca needs --broker mqtts://host[:port]")
    broker = _with_ca(args.broker, args.ca, "--broker") if args.broker is not None else ""
    paths = resolve_paths(getattr(args, "home", None))
    passphrase = new_identity_passphrase() if args.protect else None
    profile = Profile.create(paths, args.name, broker, passphrase=passphrase)
    print(profile.paths.profile_file)
    print(f"sdschat: created the profile of {profile.name}; `sdschat new CHANNEL` starts a channel", file=sys.stderr)
    return 0


def _broker(url: str, what: str):
    """The parsed broker URL (the parser ``init --broker`` uses); a bad one is one line naming ``what``."""
    from sdschat.transport import TransportError, parse_broker_url

    try:
        return parse_broker_url(url)
    except (TransportError, ValueError) as exc:
        raise CliError(f"{what}: {exc}") from None


def _with_ca(url: str, ca: Path | None, what: str) -> str:
    """``url`` checked, with the CA file ``ca`` (replacing any it names) when given; a CA file it names must be
    readable here."""
    import dataclasses

    address = _broker(url, what)
    if ca is not None:
        if not address.tls:
            raise CliError(f"--ca needs an mqtts:// broker; {what} is {address.url}")
        return dataclasses.replace(address, ca_file=str(ca)).full_url
    if address.ca_file is not None and not os.access(address.ca_file, os.R_OK):
        raise CliError(
            f"{what} names the CA file {address.ca_file}, which cannot be read here: "
            "pass --ca FILE, a CA file of this machine"
        )
    return url


def broker_failure(exc: Exception, url: str | None) -> CliError:
    """A broker's refusal as one line; a refusal for want of a login tells how to give one (``--broker`` with
    your user name and password, kept in the profile by ``sdschat join TOKEN --broker URL``)."""
    text = str(exc)
    low = text.lower()
    if "refused the connection" not in low or not ("not authori" in low or "bad user name or password" in low):
        return CliError(text)
    try:
        address = _broker(url, "broker") if url else None
    except CliError:
        address = None
    where = address.public_url.replace("://", "://USER:PASSWORD@", 1) if address else "mqtt://USER:PASSWORD@host"
    if address is not None and address.username is not None:
        return CliError(
            f"{text}: check the user name and password of {address.url}; pass --broker {where}, "
            "or keep it in your profile: sdschat join TOKEN --broker URL"
        )
    return CliError(
        f"{text}: the broker needs a login: pass --broker {where} with yours, "
        "or keep it in your profile: sdschat join TOKEN --broker URL"
    )


def new_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="the new channel's name (local: never sent to the broker)")
    add_home_arg(p)


def new_run(args: argparse.Namespace) -> int:
    profile = load_profile(args)
    entry = profile.add_channel(args.channel, os.urandom(32))
    print(entry.name)
    print(
        f"sdschat: created #{entry.name} with a fresh key; `sdschat invite {shlex.quote(entry.name)}` brings people in",
        file=sys.stderr,
    )
    return 0


def invite_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="a joined channel")
    p.add_argument("--qr", action="store_true", help="also print the token as a QR code for the terminal")
    p.add_argument(
        "--with-credentials",
        action="store_true",
        help="also put your broker login (user, password) and CA file path in the token (by default it "
        "names the broker's host and port only: each member logs in as themselves)",
    )
    add_home_arg(p)


def invite_run(args: argparse.Namespace) -> int:
    from sdschat.profile import encode_invite

    profile = load_profile(args)
    entry = profile.channel(args.channel)
    admins, epoch, removed = asyncio.run(_channel_keys(profile.db_path(entry)))
    invite = profile.invite(
        args.channel, admins=admins, epoch=epoch, removed=removed, with_credentials=args.with_credentials
    )
    token = encode_invite(invite)
    print(token)
    if args.qr:
        import segno

        segno.make(token, error="m").terminal(out=sys.stdout, compact=True)
    print(
        f"sdschat: this token is #{invite.channel}'s key: whoever holds it reads and writes the channel; "
        "send it only to the people you invite, over a private channel",
        file=sys.stderr,
    )
    _broker_note(profile.broker, args.with_credentials)
    return 0


def _broker_note(url: str, with_credentials: bool) -> None:
    """One line on stderr when the profile's broker has a login or a CA file: the token carries them (asked for:
    a warning), or not (how a joiner gives their own)."""
    address = _broker(url, "the profile's broker") if url else None
    if address is None or not address.private:
        return
    if with_credentials:
        print(
            f"sdschat: warning: this token also carries your broker login and CA file path ({address.url}): "
            "whoever holds it logs in as you",
            file=sys.stderr,
        )
    else:
        where = address.public_url.replace("://", "://USER:PASSWORD@", 1) if address.username else address.public_url
        print(
            f"sdschat: the token names {address.public_url} without your login or CA file; whoever joins gives "
            f"their own: sdschat join TOKEN --broker {where}" + (" --ca FILE" if address.ca_file else ""),
            file=sys.stderr,
        )


async def _channel_keys(db: Path):
    """The admins, current key epoch and removed members the channel's database knows (Nones: none yet)."""
    from sdschat.node import MEMBERSHIP_KEY
    from sdschat.node.membership import Membership, invite_refusal
    from sdschat.store import Store

    if not db.exists():
        return None, None, None
    async with await Store.open(db, create=False) as store:
        raw = await store.kv_get(MEMBERSHIP_KEY)
    if raw is None:
        return None, None, None
    try:
        refused, keys = invite_refusal(raw), Membership.read_keys(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{db}: the membership state is damaged ({exc})") from None
    if refused is not None:
        raise CliError(f"no invite: {refused}")
    return keys


def join_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("token", nargs="?", help="an invite token (from `sdschat invite`)")
    p.add_argument(
        "--broker",
        type=broker_url,
        help="your own broker URL, with your login if it needs one: "
        "mqtt://USER:PASSWORD@host:port (kept in your profile; default: the one the invite names); "
        "with a channel joined already, only the profile's broker changes",
    )
    p.add_argument(
        "--ca",
        type=ca_file,
        metavar="FILE",
        help="the CA certificate to check an mqtts:// broker with, a file of this machine",
    )
    g = p.add_argument_group("importing a channel of sdschat 0.1")
    g.add_argument("--key-file", type=Path, help="its key file (with --channel)")
    g.add_argument("--channel", help="its channel name")
    g.add_argument("--db", type=Path, help="its database: copied into the profile, history and all")
    add_home_arg(p)


def join_run(args: argparse.Namespace) -> int:
    profile = load_profile(args)
    if args.token is not None:
        if args.key_file or args.channel or args.db:
            raise CliError("join takes a token, or --key-file and --channel, not both")
        invite = read_invite(args.token)
        name, secret, db = invite.channel, invite.secret, None
        admins, epoch, removed = invite.admins, (invite.epoch, invite.epoch_secret), invite.removed
        offered = invite.broker
    else:
        name, secret, db = _imported(profile, args)
        if db is not None:
            _check_import(args.db)  # a damaged database is refused before anything is written
        admins, epoch, removed = (), None, ()  # a channel of sdschat 0.1 has no admins: nobody removes anyone
        offered = ""
    broker = _joined_broker(profile.broker, offered, args)  # checked before anything is written
    existing = profile.channels.get(name)
    if (
        existing is not None
        and args.token is not None
        and (args.broker is not None or args.ca is not None)
        and _same_key(profile, existing, secret)
    ):
        # joined before, without the login (or CA file) the broker asks for: only the broker changes
        _save_broker(profile, broker)
        print(existing.name)
        print(
            f"sdschat: already in #{existing.name}; your profile's broker is now {_broker(broker, 'broker').url}",
            file=sys.stderr,
        )
        return 0
    entry = profile.add_channel(name, secret, db=db, admins=admins, epoch=epoch, removed=removed)
    if db is not None:
        try:
            _copy_database(args.db, profile.db_path(entry))
        except BaseException:
            profile.remove_channel(entry.name, forget=True)
            raise
    _save_broker(profile, broker)
    print(entry.name)
    return 0


def _same_key(profile, entry, secret: bytes) -> bool:
    """Whether ``entry`` (a joined channel) has the key ``secret`` (an invite to the channel we are in)."""
    from sdschat.crypto import ChannelKey

    return profile.key(entry).topic == ChannelKey(secret, entry.name).topic


def read_invite(text: str):
    """The invite in ``text``, every field checked as ``init`` and ``new`` check them (its broker by the same
    parser as ``init --broker``); one line for a bad one."""
    from sdschat.profile import decode_invite

    invite = decode_invite(text)
    if invite.broker:
        _broker(invite.broker, "invite token's broker")
    return invite


def _joined_broker(current: str, offered: str, args: argparse.Namespace) -> str:
    """The profile's broker after a join: ``--broker`` (the joiner's own, login and all), else the invite's when
    the profile has none, else the profile's; with ``--ca`` applied. A note when the invite names another."""
    if args.broker is not None:
        chosen, what = args.broker, "--broker"
    elif offered and not current:
        chosen, what = offered, "invite token's broker"  # the first invite says where the group meets
    else:
        chosen, what = current, "the profile's broker"
    if args.ca is not None and not chosen:
        raise CliError("--ca needs an mqtts:// broker: pass --broker mqtts://host[:port]")
    if chosen and (args.ca is not None or chosen != current):
        chosen = _with_ca(chosen, args.ca, what)
    if offered and chosen:
        mine, theirs = _broker(chosen, what), _broker(offered, "invite token's broker")
        if (mine.scheme, mine.host, mine.port) != (theirs.scheme, theirs.host, theirs.port):
            print(
                f"sdschat: note: the invite names the broker {theirs.url}; your profile uses {mine.url}",
                file=sys.stderr,
            )
    return chosen


def _save_broker(profile, broker: str) -> None:
    if broker != profile.broker:
        profile.broker = broker
        profile.save()


def _imported(profile, args: argparse.Namespace) -> tuple[str, bytes, Path | None]:
    from sdschat.crypto.keyfile import read_key_file

    if not (args.key_file and args.channel):
        raise CliError("join needs an invite token, or --key-file FILE --channel NAME")
    secret = read_key_file(args.key_file)
    db = None
    if args.db is not None:
        if not args.db.is_file():
            raise CliError(f"no database at {args.db}")
        db = Path("db") / f"imported-{os.urandom(6).hex()}.db"
    return args.channel, secret, db


def _check_import(source: Path) -> None:
    """Every check of an open on a database to import (read-only); one line for a damaged one."""
    from sdschat.store.integrity import check_database

    check_database(source)


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
    """The table of the profile's channels (``--json``: one object each); a channel whose database cannot be
    read (damaged) is one line on stderr after the others, and exit 2."""
    profile = load_profile(args)
    rows, failed = [], []
    for entry in profile.channels.values():
        try:
            rows.append(await _channel_summary(profile, entry))
        except CliError as exc:  # a damaged channel: the others are listed all the same, then it (exit 2)
            failed.append(exc)
    if rows or not failed:
        _print_channels(profile, rows, args.json)
    if failed:
        refuse_after(failed)
    return 0


def _print_channels(profile, rows: list[dict], as_json: bool) -> None:
    from sdschat.node.inbox import channel_label

    if as_json:
        for row in rows:
            print(json.dumps({k: v for k, v in row.items() if k != "topic" or v}))  # "topic" once it has one
        return
    if not rows:
        print("sdschat: no channels yet: `sdschat new NAME` or `sdschat join TOKEN`", file=sys.stderr)
        return
    labels = [channel_label(r["channel"], profile.name) for r in rows]  # #team, or @bob for a two-member channel
    width = max(8, *(len(label) for label in labels))
    topics = any(r["topic"] for r in rows)  # (the column only when a channel has a topic)
    print(f"{'CHANNEL'.ljust(width)}  {'MEMBERS':>7}  {'UNREAD':>6}  {'MESSAGES':>8}" + ("  TOPIC" if topics else ""))
    for r, label in zip(rows, labels, strict=True):
        topic = f"  {r['topic']}" if topics else ""
        print(f"{label.ljust(width)}  {r['members']:>7}  {r['unread']:>6}  {r['messages']:>8}{topic}")


async def _channel_summary(profile, entry) -> dict:
    """Name, members seen (you included), unread (others' messages since you last had it on screen), messages,
    topic ("" if none: the latest admitted topic message, as the node keeps it; ``--json`` and the table leave it
    out then, as before topics)."""
    from sdschat.crypto import CryptoError, Identity
    from sdschat.node import MEMBERSHIP_KEY, QUIET_PREFIXES
    from sdschat.node.book import TOPIC_KEY
    from sdschat.node.membership import Membership
    from sdschat.store import Store, StoreError

    row: dict = {"channel": entry.name, "members": 1, "unread": 0, "messages": 0, "topic": ""}
    db = profile.db_path(entry)
    if not db.exists():  # joined, never opened
        return row
    channel_id = profile.key(entry).channel_id
    try:
        async with await Store.open(db, create=False) as store:
            raw = await store.get_identity()
            # a protected profile's databases hold no key: the profile's public id says who "you" are
            me = Identity.from_private_bytes(raw).participant_id if raw else profile.participant_id
            gone = Membership.gone_in(await store.kv_get(MEMBERSHIP_KEY) or "{}")  # removed, or left: no members
            seen = ({p.participant_id for p in await store.participants()} - gone) | {me}
            row.update(
                members=len(seen - {""}),
                unread=await store.unread_count(channel_id, entry.read_ms, me, QUIET_PREFIXES),
                messages=await store.message_count(channel_id),
                topic=_topic_text(await store.kv_get(TOPIC_KEY)),
            )
    except (StoreError, CryptoError, ValueError) as exc:
        raise CliError(f"#{entry.name}: {exc}") from None
    return row


def _topic_text(raw: str | None) -> str:
    """The text of a topic as the node keeps it (a JSON object; "" if none or unreadable)."""
    try:
        obj = json.loads(raw) if raw else None
    except ValueError:
        return ""
    from sdschat.node.book import clean_topic

    return clean_topic(obj["text"]) if isinstance(obj, dict) and isinstance(obj.get("text"), str) else ""


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
    if not profile.protected:
        return profile.identity()
    passphrase = os.environ.get(IDENTITY_PASSPHRASE_ENV)
    if passphrase is None:
        if not sys.stdin.isatty():
            raise CliError(f"your identity is protected: set {IDENTITY_PASSPHRASE_ENV} (no terminal to ask on)")
        import getpass

        passphrase = getpass.getpass("passphrase for your identity: ")
    return profile.identity(passphrase)
