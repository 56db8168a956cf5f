"""``sdschat chat`` and ``sdschat demo``: argument wiring and launch.

Each is a ``configure(parser)`` and an ``async run(args) -> int`` like the
other subcommands in :mod:`sdschat.commands` (whose channel arguments,
key loading and node start-up this reuses). These launchers are the only
UI modules that reach below the node: the demo generates its channel key in
memory (:mod:`sdschat.crypto`) and starts one embedded broker in-process
(:mod:`sdschat.transport`), so it needs no setup at all.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from sdschat.cli import CliError
from sdschat.commands import _add_channel_args, _probability, number, start_node

__all__ = ["chat_configure", "chat_run", "demo_configure", "demo_run", "DEMO_NICKS"]

DEMO_NICKS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")
MAX_PARTICIPANTS = len(DEMO_NICKS)


# ------------------------------------------------------------------ chat


def chat_configure(p: argparse.ArgumentParser) -> None:
    _add_channel_args(p)


async def chat_run(args: argparse.Namespace) -> int:
    from .app import ChatApp

    if not sys.stdout.isatty():
        raise CliError("chat needs a terminal (stdout is not a tty); for scripts use `sdschat bot`")
    node = await start_node(args)
    app = ChatApp(node)
    try:
        await app.run_async()
    finally:
        await node.stop()
    if node.failure:
        raise CliError(node.failure, code=1)
    return int(app.return_code or 0)


# ------------------------------------------------------------------ demo


_participants = number(int, 1, MAX_PARTICIPANTS)
_interval = number(float, 0.2, 3600)


def demo_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--participants", type=_participants, default=3,
                   help=f"participants side by side, each a real node (1-{MAX_PARTICIPANTS}, default 3)")
    p.add_argument("--loss", type=_probability, default=0.2,
                   help="drop probability of every node's link, each way (default 0.2; 0 for a clean network)")
    p.add_argument("--bots", action="store_true", help="every participant chats by itself every few seconds")
    p.add_argument("--bot-interval", type=_interval, default=4.0, help="mean seconds between bot messages (default 4)")
    p.add_argument("--channel", default="demo", help="channel name (default demo)")
    p.add_argument("--seed", type=int, help="seed of the links' and bots' randomness")
    p.add_argument("--db-dir", type=Path,
                   help="keep the participants' databases here (default: a temporary directory, removed at exit)")
    p.add_argument("--store", action="store_true",
                   help="also run a store node, so gaps fill from it before SDS-R and returning panes catch up")


async def start_demo_nodes(n: int, loss: float, *, channel: str = "demo", db_dir: Path, seed: int | None = None,
                           broker_url: str, channel_config=None) -> list:
    """Start ``n`` nodes sharing one in-memory channel key (no key file, no passphrase)."""
    from sdschat.crypto import ChannelKey
    from sdschat.node import Node, NodeConfig, node_channel_config

    key = ChannelKey.generate(channel)
    nodes = []
    try:
        for i in range(n):
            nick = DEMO_NICKS[i]
            config = NodeConfig(
                nick=nick, key=key, db_path=db_dir / f"{nick}.db", broker_url=broker_url,
                channel_config=channel_config or node_channel_config(),
                impairment={"loss_in": loss, "loss_out": loss},
                seed=None if seed is None else seed * 1000 + i,
            )
            nodes.append(await Node.start(config))
    except BaseException:
        for node in nodes:
            with contextlib.suppress(Exception):
                await node.stop()
        raise
    return nodes


async def demo_run(args: argparse.Namespace) -> int:
    from sdschat.store import StoreError
    from sdschat.transport import EmbeddedBroker, TransportError

    from .app import DemoApp

    if not sys.stdout.isatty():
        raise CliError("demo needs a terminal (stdout is not a tty)")
    tmp = None
    if args.db_dir is not None:
        db_dir = args.db_dir
        try:
            db_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliError(f"cannot create {db_dir}: {exc.strerror or exc}") from None
        if any(db_dir.glob("*.db")):
            raise CliError(f"{db_dir} already holds databases; the demo's channel key is new each run — "
                           "use an empty directory")
    else:
        tmp = tempfile.TemporaryDirectory(prefix="sdschat-demo-")
        db_dir = Path(tmp.name)
    broker = store = None
    nodes: list = []
    try:
        try:
            broker = await EmbeddedBroker.start()
            if args.store:
                from sdschat.storenode import StoreNode

                store = await StoreNode.start(broker.url, db_dir / "store-node.db")
            nodes = await start_demo_nodes(args.participants, args.loss, channel=args.channel, db_dir=db_dir,
                                           seed=args.seed, broker_url=broker.url)
        except (TransportError, StoreError) as exc:
            raise CliError(str(exc)) from None
        subtitle = (f"{len(nodes)} participants on {broker.url} · loss {args.loss:.0%} each way"
                    f"{' · store node' if store is not None else ''}{' · bots' if args.bots else ''}")
        app = DemoApp(nodes, bots=args.bots, bot_interval=args.bot_interval, seed=args.seed, subtitle=subtitle)
        await app.run_async()
        failures = [f"{n.nick}: {n.failure}" for n in nodes if n.failure]
    finally:
        for node in nodes:
            with contextlib.suppress(Exception):
                await node.stop()
        if store is not None:
            with contextlib.suppress(Exception):
                await store.stop()
        if broker is not None:
            await broker.close()
        if tmp is not None:
            tmp.cleanup()
    if failures:
        raise CliError("; ".join(failures), code=1)
    return int(app.return_code or 0)
