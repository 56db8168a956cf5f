"""``sdschat chat`` and ``sdschat demo``: start the nodes (and broker, store node), then run the UI on them."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

from .args import HOSTILE_MOVES, add_channel_args, number, probability
from .errors import CliError
from .wiring import DEMO_NICKS, HOSTILE_NICK, start_demo_nodes, start_node, stop_all

__all__ = ["chat_configure", "chat_run", "demo_configure", "demo_run"]

MAX_PARTICIPANTS = len(DEMO_NICKS)


def chat_configure(p: argparse.ArgumentParser) -> None:
    add_channel_args(p)


async def chat_run(args: argparse.Namespace) -> int:
    from sdschat.ui.app import ChatApp
    from sdschat.ui.collector import long_lived_from_here

    if not sys.stdout.isatty():
        raise CliError("chat needs a terminal (stdout is not a tty); for scripts use `sdschat bot`")
    node = await start_node(args)
    long_lived_from_here()  # (the channel's log lives as long as the app)
    app = ChatApp(node)
    try:
        await app.run_async()
    finally:
        await node.stop()
    if node.failure:
        raise CliError(node.failure, code=1)
    return int(app.return_code or 0)


def demo_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--participants",
        type=number(int, 1, MAX_PARTICIPANTS),
        default=3,
        help=f"participants side by side, each a real node (1-{MAX_PARTICIPANTS}, default 3)",
    )
    p.add_argument(
        "--loss",
        type=probability,
        default=0.2,
        help="drop probability of every node's link, each way (default 0.2; 0 for a clean network)",
    )
    p.add_argument("--bots", action="store_true", help="every participant chats by itself every few seconds")
    p.add_argument(
        "--bot-interval",
        type=number(float, 0.2, 3600),
        default=4.0,
        help="mean seconds between bot messages (default 4)",
    )
    p.add_argument("--channel", default="demo", help="channel name (default demo)")
    p.add_argument("--seed", type=int, help="seed of the links' and bots' randomness")
    p.add_argument(
        "--db-dir",
        type=Path,
        help="keep the participants' profiles (one folder each: key, identity, database) here "
        "(default: a temporary directory, removed at exit)",
    )
    p.add_argument(
        "--store",
        action="store_true",
        help="also run a store node, so gaps fill from it before SDS-R and returning panes catch up",
    )
    p.add_argument(
        "--hostile",
        metavar="MOVE",
        choices=HOSTILE_MOVES,
        help="add a hostile member, mallory (no pane), playing an attack: forge-acks, reorder, withhold "
        "or flood (as `sdschat bot --hostile`); watch the panes refuse it (F5: the wire view)",
    )


def _demo_dir(args: argparse.Namespace) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    if args.db_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="sdschat-demo-")
        return Path(tmp.name), tmp
    try:
        args.db_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create {args.db_dir}: {exc.strerror or exc}") from None
    if any(args.db_dir.iterdir()):
        raise CliError(f"{args.db_dir} is not empty; the demo's channel key is new each run — use an empty directory")
    return args.db_dir, None


async def demo_run(args: argparse.Namespace) -> int:
    from sdschat.transport import EmbeddedBroker
    from sdschat.ui.app import DemoApp

    if not sys.stdout.isatty():
        raise CliError("demo needs a terminal (stdout is not a tty)")
    db_dir, tmp = _demo_dir(args)
    broker = None
    parts: list = []
    try:
        broker = await EmbeddedBroker.start()
        if args.store:
            from sdschat.storenode import StoreNode

            parts.append(await StoreNode.start(broker.url, db_dir / "store-node.db"))
        nodes = await start_demo_nodes(
            args.participants,
            args.loss,
            channel=args.channel,
            db_dir=db_dir,
            seed=args.seed,
            broker_url=broker.url,
            hostile=args.hostile,
        )
        parts[:0] = nodes
        stop_hostile, playing = asyncio.Event(), None
        if args.hostile:
            from sdschat.node.hostile import HostileMember

            hostile = HostileMember(
                nodes.pop(), args.hostile, rate=20.0, count=10**6, interval=args.bot_interval, seed=args.seed
            )
            playing = asyncio.ensure_future(hostile.run(stop_hostile))
        subtitle = (
            f"{len(nodes)} participants on {broker.url} · loss {args.loss:.0%} each way"
            f"{' · store node' if args.store else ''}{' · bots' if args.bots else ''}"
            f"{f' · {HOSTILE_NICK} plays {args.hostile} (F5)' if args.hostile else ''}"
        )
        app = DemoApp(nodes, bots=args.bots, bot_interval=args.bot_interval, seed=args.seed, subtitle=subtitle)
        try:
            await app.run_async()
        finally:
            stop_hostile.set()
            if playing is not None:
                with contextlib.suppress(Exception):
                    await playing
        failures = [f"{n.nick}: {n.failure}" for n in nodes if n.failure]
    finally:
        await stop_all(parts)
        if broker is not None:
            await broker.close()
        if tmp is not None:
            tmp.cleanup()
    if failures:
        raise CliError("; ".join(failures), code=1)
    return int(app.return_code or 0)
