"""``sdschat kick``, ``sdschat rekey``, ``sdschat admin`` and ``sdschat part``: membership changes of one channel, from
the command line (``part`` tells the others, then leaves the channel in the profile).

Each starts the channel's node from the profile (as the window would), writes the change to the channel's log
(a new key epoch sealed to the remaining members, or an admin named), waits up to ``--wait`` seconds for the
others to acknowledge it, and stops. The change is durable once written: members offline now get it from a
store node or from any member when they return, and the node resends it until acknowledged the next time it
runs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from .args import add_home_arg, non_negative
from .errors import CliError
from .profiles import load_profile
from .wiring import profile_node_config

__all__ = [
    "kick_configure",
    "kick_run",
    "rekey_configure",
    "rekey_run",
    "admin_configure",
    "admin_run",
    "part_configure",
    "part_run",
]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="a joined channel you administer")
    p.add_argument(
        "--wait",
        type=non_negative,
        default=5.0,
        metavar="S",
        help="wait up to S seconds for the members to acknowledge the change (default 5)",
    )
    add_home_arg(p)


def kick_configure(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("name", help="the member to remove (a nick, or the start of a participant id)")


def rekey_configure(p: argparse.ArgumentParser) -> None:
    _common(p)


def admin_configure(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("name", help="the member to make an admin (a nick, or the start of a participant id)")


async def _with_node(args: argparse.Namespace, act) -> int:
    from sdschat.node import Node, UserError

    profile = load_profile(args)
    entry = profile.channel(args.channel)
    node = await Node.start(profile_node_config(profile, entry))
    try:
        if entry.invite_epoch is not None:
            profile.adopted_epoch(entry.name)
        await asyncio.sleep(0.5)  # what arrived while we were away (joins, an earlier change) comes first
        try:
            mid, line = await act(node)
        except UserError as exc:  # not an admin, no such member: the node's refusal, with the command's exit
            raise CliError(str(exc)) from None
        await node.drain_outbox()
        deadline = asyncio.get_running_loop().time() + args.wait
        while asyncio.get_running_loop().time() < deadline:
            msg = node.book.messages.get(mid)
            if msg is not None and msg.state == "acknowledged":
                break
            await asyncio.sleep(0.1)
        msg = node.book.messages.get(mid)
        acked = msg is not None and msg.state == "acknowledged"
        print(line)
        if not acked:
            print(
                "sdschat: not acknowledged yet: members offline get it from a store node or any member on "
                "return, and your node resends it the next time it runs",
                file=sys.stderr,
            )
    finally:
        await node.stop()
    if node.failure:
        raise CliError(node.failure, code=1)
    return 0


async def kick_run(args: argparse.Namespace) -> int:
    async def act(node):
        pid, n, count = await node.kick(args.name)
        mid = _last_own(node)
        return (
            mid,
            f"removed {args.name} ({pid[:8]}) from #{node.key.channel_name}: new key (epoch {n}) for {count} "
            f"member{'s' if count != 1 else ''}",
        )

    return await _with_node(args, act)


async def rekey_run(args: argparse.Namespace) -> int:
    async def act(node):
        n, count = await node.rekey()
        return _last_own(
            node
        ), f"#{node.key.channel_name}: new key (epoch {n}) for {count} member{'s' if count != 1 else ''}"

    return await _with_node(args, act)


async def admin_run(args: argparse.Namespace) -> int:
    async def act(node):
        pid = await node.name_admin(args.name)
        return _last_own(node), f"#{node.key.channel_name}: {args.name} ({pid[:8]}) is an admin"

    return await _with_node(args, act)


def _last_own(node) -> str:
    own = [m for m in node.book.messages.values() if m.own]
    return max(own, key=lambda m: m.log_key).message_id


def part_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("channel", help="a joined channel")
    p.add_argument("--forget", action="store_true", help="also delete its history (the database)")
    p.add_argument("--quiet", action="store_true", help="leave without telling the others (no `* NAME left` line)")
    add_home_arg(p)


def part_run(args: argparse.Namespace) -> int:
    profile = load_profile(args)
    entry = profile.channel(args.channel)
    told = "" if args.quiet else asyncio.run(_tell_leaving(profile, entry))
    entry = profile.remove_channel(args.channel, forget=args.forget)
    print(entry.name)
    kept = "its history is deleted" if args.forget else f"its history stays in {profile.db_path(entry)}"
    print(f"sdschat: left #{entry.name}{told}; {kept}", file=sys.stderr)
    return 0


async def _tell_leaving(profile, entry, timeout: float = 8.0) -> str:
    """Start the channel's node for a moment and tell the others we leave (``* alice left``); what to add to the
    summary line when that could not be done (the channel is left all the same)."""
    from sdschat.node import Node
    from sdschat.store import StoreError
    from sdschat.transport import TransportError

    if not profile.db_path(entry).exists():
        return ""  # never opened: nobody knows us there
    try:
        node = await asyncio.wait_for(Node.start(profile_node_config(profile, entry)), timeout)
    except (TransportError, StoreError, OSError, TimeoutError) as exc:
        return f" (the others were not told: {str(exc) or 'broker unreachable'})"
    try:
        told = await node.leave(timeout)
    finally:
        await node.stop()
    return "" if told else " (the others were not told)"
