"""``sdschat bot``: a headless participant that sends N messages, then lingers until the channel settles; with
``--hostile MOVE``, a member that plays one attack against the channel (sdschat.node.hostile)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from .args import HOSTILE_MOVES, add_channel_args, non_negative, positive_float, positive_int
from .errors import CliError
from .wiring import start_node, stop_event

__all__ = ["bot_configure", "bot_run"]


def bot_configure(p: argparse.ArgumentParser) -> None:
    add_channel_args(p)
    p.add_argument(
        "--invite",
        metavar="TOKEN",
        help="the channel, its key and broker from an invite token (no profile needed; with --name)",
    )
    p.add_argument("--count", type=positive_int, default=10, help="messages to send")
    p.add_argument("--interval", type=non_negative, default=1.0, help="seconds between messages")
    p.add_argument(
        "--linger",
        type=non_negative,
        default=12.0,
        help="after sending, exit once nothing was pending here, and no peer resent, repaired or asked "
        "for a repair, for this many seconds (keep it above the repair backoff T_max and the longest "
        "resend interval, both 10 s by default)",
    )
    p.add_argument(
        "--max-runtime",
        type=non_negative,
        default=0.0,
        help="give up (exit 3) after this many seconds (0: never); a member removed from the channel "
        "exits 1, one locked out of its newest key 4",
    )
    p.add_argument("--text", default="{name} #{i}", help="message template ({name}, {i})")
    p.add_argument(
        "--start-after",
        type=non_negative,
        default=0.0,
        help="wait this many seconds after connecting before sending (lets peers subscribe first)",
    )
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--hostile",
        metavar="MOVE",
        choices=HOSTILE_MOVES,
        help="play an attack instead of chatting, to watch it fail (or, for withhold and flood, what "
        "it does): forge-acks, reorder, withhold (sends --count lines, publishes every other "
        "one), flood (--rate junk frames a second); runs until --max-runtime or Ctrl-C",
    )
    p.add_argument("--rate", type=positive_float, default=50.0, help="frames a second for --hostile flood")


#: the longest a wait sleeps before it looks at the stop event again (Ctrl-C is answered within it)
_NAP_S = 0.25


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less once ``stop`` is set. Sleeps in naps rather than waiting on the event with a
    timeout: that makes a task and a timer every line, a good part of a bot's own CPU at 20 ms between lines."""
    end = time.monotonic() + seconds
    while not stop.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, _NAP_S))


async def _send_all(node, args: argparse.Namespace, stop: asyncio.Event) -> None:
    from sdschat.node import NodeFailed, UserError

    if args.start_after:
        await _wait(stop, args.start_after)
    for i in range(args.count):
        if stop.is_set() or node.failure:
            return
        try:
            await node.send_text(args.text.format(name=node.nick, i=i))
        except NodeFailed:  # node.failure says why
            return
        except UserError as exc:  # removed from the channel
            raise CliError(str(exc), code=1) from None
        await _wait(stop, args.interval)


async def _linger(node, args: argparse.Namespace, stop: asyncio.Event, started: float) -> int:
    """Wait until nothing happened for ``--linger`` seconds; 3 if ``--max-runtime`` runs out first."""
    quiet_since = time.monotonic()
    linger_ms = int(args.linger * 1000)
    while not stop.is_set() and node.failure is None:
        if node.removed_me or node.locked_out:
            return 0  # nothing it sends reaches the members any more: bot_run says so
        if not node.settled(linger_ms):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= args.linger:
            return 0
        if args.max_runtime and time.monotonic() - started > args.max_runtime:
            summary = {k: v for k, v in node.channel.summary().items() if v and k != "lamport_timestamp"}
            summary["link"] = {k: v for k, v in vars(node.transport.counters).items() if v}
            summary["mqtt"] = {k: v for k, v in vars(node.transport.inner.stats).items() if v}
            print(f"{node.nick}: gave up after {args.max_runtime:g} s with work pending: {summary}", file=sys.stderr)
            return 3
        await _wait(stop, 0.1)
    return 0


async def bot_run(args: argparse.Namespace) -> int:
    if args.hostile:
        return await _hostile_run(args)
    node = await start_node(args)
    stop = stop_event()
    started = time.monotonic()
    try:
        if not args.quiet:
            print(f"{node.nick}: participant {node.participant_id[:12]} on {node.broker_url}", flush=True)
        await _send_all(node, args, stop)
        code = await _linger(node, args, stop, started)
        if not args.quiet:
            h = node.health()
            print(
                f"{node.nick}: log {h['log']} messages, sent {h['sent']}, resends {h['resends']}, "
                f"repairs requested {h['repairs_requested']}, served {h['repairs_served']}, lost {h['lost']}"
                + (f", LOCKED OUT of key epoch {node.locked_out}" if node.locked_out else ""),
                flush=True,
            )
    finally:
        await node.stop()
    if node.failure:
        raise CliError(node.failure, code=1)
    return _membership_status(node) or code


def _membership_status(node) -> int:
    """1 (removed) or 4 (locked out of the newest key) with one line on stderr; 0 if still a member."""
    name = node.key.channel_name
    if node.removed_me:
        print(f"{node.nick}: removed from #{name} by an admin: nothing sent since reached the members", file=sys.stderr)
        return 1
    if node.locked_out:
        print(
            f"{node.nick}: locked out of #{name}: key epoch {node.locked_out} began without a key for this member, "
            "so what it sent and received since was on a key the others left; ask an admin for a new invite",
            file=sys.stderr,
        )
        return 4
    return 0


async def _hostile_run(args: argparse.Namespace) -> int:
    from sdschat.node import node_channel_config
    from sdschat.node.hostile import HostileMember, hostile_channel_config

    config = hostile_channel_config(args.hostile, node_channel_config(**dict(getattr(args, "tune", []))))
    node = await start_node(args, channel_config=config)
    stop = stop_event()
    if args.max_runtime:
        asyncio.get_running_loop().call_later(args.max_runtime, stop.set)
    try:
        if not args.quiet:
            print(
                f"{node.nick}: hostile member ({args.hostile}) {node.participant_id[:12]} on {node.broker_url}",
                flush=True,
            )
        if args.start_after:
            await _wait(stop, args.start_after)
        hostile = HostileMember(
            node, args.hostile, rate=args.rate, count=args.count, interval=args.interval, seed=args.seed
        )
        published = await hostile.run(stop)
        if args.hostile == "withhold" and not stop.is_set():
            await _wait(stop, args.linger)  # stay a member while the others ask (and get no answer)
        if not args.quiet:
            said = ", ".join(f"{kind} {n}" for kind, n in sorted(published.items())) or "nothing"
            print(f"{node.nick}: published {said}", flush=True)
    finally:
        await node.stop()
    if node.failure:
        raise CliError(node.failure, code=1)
    return 0
