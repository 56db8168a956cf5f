"""Building the parts for a command: channel keys, database paths, nodes, demo groups, stop signals."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .args import impairment_of
from .errors import CliError
from .profiles import broker_failure, profile_identity

if TYPE_CHECKING:
    from sdschat.crypto import ChannelKey, Identity
    from sdschat.profile import Profile

__all__ = [
    "DEMO_NICKS",
    "Choice",
    "data_dir",
    "load_key",
    "default_db",
    "resolve_channel",
    "profile_node_config",
    "start_node",
    "start_demo_nodes",
    "stop_all",
    "stop_event",
]

DEMO_NICKS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")
#: the demo's hostile member (``demo --hostile``)
HOSTILE_NICK = "mallory"


def data_dir() -> Path:
    """Where databases made outside a profile live: the profile's data folder as the profile resolves it
    (``$SDSCHAT_HOME``, else the platform's user data folder), so both agree, and refuse an empty
    ``$SDSCHAT_HOME`` alike."""
    from sdschat.profile import resolve_paths

    return resolve_paths().data


def load_key(args: argparse.Namespace):
    """The channel key from ``--key-file``, else from a passphrase (environment or prompt)."""
    from sdschat.crypto import ChannelKey, CryptoError, key_file_is_private

    if args.key_file is not None:
        key = ChannelKey.from_file(args.key_file, args.channel)
        try:
            if not key_file_is_private(args.key_file):
                print(f"sdschat: warning: {args.key_file} is readable by others; chmod 600 it", file=sys.stderr)
        except CryptoError:
            pass
        return key
    passphrase = os.environ.get("SDSCHAT_PASSPHRASE")
    if not passphrase:
        if not sys.stdin.isatty():
            raise CliError("no key: pass --key-file, or set SDSCHAT_PASSPHRASE (no terminal to prompt on)")
        passphrase = getpass.getpass(f"passphrase for #{args.channel}: ")
    if not passphrase:
        raise CliError("empty passphrase")
    try:
        return ChannelKey.from_passphrase(args.channel, passphrase)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def default_db(name: str, key) -> Path:
    """One database per participant and channel under :func:`data_dir`."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40] or "me"
    return data_dir() / f"{safe}-{key.topic.rsplit('/', 1)[-1][:12]}.db"


class Choice(NamedTuple):
    """What a one-channel command runs as: nick, channel key, database, broker, and the profile's identity
    (``None`` outside a profile: a new database makes its own)."""

    nick: str
    key: ChannelKey
    db: Path
    broker: str | None
    identity: Identity | None = None
    #: whether a new database may keep a copy of ``identity``'s private key (not for a protected profile's)
    store_identity: bool = True
    #: the channel's first admins (from the profile or the invite) and the invite's key epoch
    admins: tuple = ()
    epoch: tuple | None = None
    removed: tuple = ()


def resolve_channel(args: argparse.Namespace) -> Choice:
    """Nick, channel key, database and broker: from an invite, the profile or the options (which win)."""
    from sdschat.crypto import ChannelKey

    invite = getattr(args, "invite", None)
    if invite is not None:
        from sdschat.profile import decode_invite

        inv = decode_invite(invite)
        key = ChannelKey(inv.secret, inv.channel)
        return Choice(
            _nick(args, None),
            key,
            args.db or default_db(_nick(args, None), key),
            args.broker or inv.broker or None,
            admins=inv.admins,
            epoch=(inv.epoch, inv.epoch_secret) if inv.epoch else None,
            removed=inv.removed,
        )
    profile = _profile_of(args) if args.key_file is None else None
    entry = profile.channels.get(args.channel) if profile is not None else None
    if profile is not None and entry is not None:
        return Choice(
            _nick(args, profile.name),
            profile.key(entry),
            args.db or profile.db_path(entry),
            args.broker or profile.broker or None,
            profile_identity(profile),
            not profile.protected,
            tuple(entry.admins),
            entry.epoch,
            tuple(entry.removed),
        )
    nick = _nick(args, None)
    key = load_key(args)
    return Choice(nick, key, args.db or default_db(nick, key), args.broker)


def _nick(args: argparse.Namespace, default: str | None) -> str:
    nick = args.name or default
    if not nick:
        raise CliError("who are you? pass --name NAME (or create a profile: sdschat init --name NAME)")
    return nick


def profile_node_config(profile, entry, **overrides):
    """The :class:`~sdschat.node.NodeConfig` of one channel of ``profile``: its name, the channel's key and
    database, the profile's broker and its one identity (a database that has its own keeps it)."""
    from sdschat.node import NodeConfig, node_channel_config

    db = profile.db_path(entry)
    db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = dict(
        nick=profile.name,
        key=profile.key(entry),
        db_path=db,
        broker_url=profile.broker or None,
        channel_config=node_channel_config(),
        events_keep=profile.events_keep,
        store_identity=not profile.protected,
        membership=True,
        admins=tuple(entry.admins),
        epoch=entry.epoch,
        removed=tuple(entry.removed),
        rekey_every_ms=profile.rekey_every_ms,
    )
    settings.update(overrides)
    if "identity" not in overrides:  # (a caller that has it already passes it: a protected one asks once)
        settings["identity"] = profile_identity(profile)
    return NodeConfig(**settings)


def _profile_of(args: argparse.Namespace) -> Profile | None:
    from sdschat.profile import Profile, resolve_paths

    paths = resolve_paths(getattr(args, "home", None))
    return Profile.load(paths) if Profile.exists(paths) else None


def _events_keep(args: argparse.Namespace) -> dict:
    """``--events-keep``, else the profile's ``[storage] events_keep``, else the node's default."""
    keep = getattr(args, "events_keep", None)
    if keep is None:
        profile = _profile_of(args)
        keep = profile.events_keep if profile is not None else None
    return {} if keep is None else {"events_keep": keep}


async def start_node(args: argparse.Namespace, *, channel_config=None):
    """Start a node from the channel options; a broker's refusal for want of a login says how to give one, and a
    database folder that cannot be made names it (the parts' other errors are one line as they are)."""
    from sdschat.node import Node, NodeConfig, node_channel_config
    from sdschat.store import StoreError
    from sdschat.transport import TransportError

    nick, key, db, broker, identity, store_identity, admins, epoch, removed = resolve_channel(args)
    try:
        db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # private even under umask 0
    except OSError as exc:
        raise CliError(f"cannot create {db.parent}: {exc.strerror}") from None
    config = NodeConfig(
        nick=nick,
        key=key,
        db_path=db,
        broker_url=broker,
        qos=args.qos,
        channel_config=channel_config or node_channel_config(**dict(getattr(args, "tune", []))),
        impairment=impairment_of(args),
        seed=args.seed,
        identity=identity,
        store_identity=store_identity,
        membership=True,
        admins=admins,
        epoch=epoch,
        removed=removed,
        **_events_keep(args),
    )
    try:
        return await Node.start(config)
    except (TransportError, StoreError) as exc:
        raise broker_failure(exc, broker) from None  # a refusal for want of a login says how to give one
    except OSError as exc:
        raise CliError(f"cannot open {db}: {exc.strerror or exc}") from None


async def start_demo_nodes(
    n: int,
    loss: float,
    *,
    channel: str = "demo",
    db_dir: Path,
    seed: int | None = None,
    broker_url: str,
    channel_config=None,
    hostile: str | None = None,
) -> list:
    """Start ``n`` participants of one new channel, each on its own profile under ``db_dir/NICK``; with
    ``hostile`` (a move of sdschat.node.hostile), one more, "mallory", last, set up for that move."""
    from sdschat.node import Node, node_channel_config
    from sdschat.node.hostile import hostile_channel_config
    from sdschat.profile import Profile, resolve_paths

    secret = os.urandom(32)
    nodes = []
    base = channel_config or node_channel_config()
    admins = None  # the first pane (alice) creates the channel: its admin
    try:
        for i in range(n + bool(hostile)):
            nick = DEMO_NICKS[i] if i < n else HOSTILE_NICK
            profile = Profile.create(resolve_paths(db_dir / nick), nick, broker_url)
            entry = profile.add_channel(channel, secret, admins=admins)
            admins = admins or list(entry.admins)
            config = profile_node_config(
                profile,
                entry,
                channel_config=base if i < n or not hostile else hostile_channel_config(hostile, base),
                impairment={"loss_in": loss, "loss_out": loss} if i < n else {},
                seed=None if seed is None else seed * 1000 + i,
            )
            nodes.append(await Node.start(config))
    except BaseException:
        await stop_all(nodes)
        raise
    return nodes


async def stop_all(parts) -> None:
    """Stop nodes (or store nodes) one by one; one failing to stop does not keep the others running."""
    for part in parts:
        with contextlib.suppress(Exception):
            await part.stop()


def stop_event() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (for the headless commands that run until stopped)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass
    return stop
