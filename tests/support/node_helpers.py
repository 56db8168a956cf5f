"""Helpers to run real nodes in tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from run_until import run, until  # noqa: F401 - the node tests import them from here

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.node import events as ev

FAST = dict(
    resend_unacknowledged_ms=500,
    resend_possibly_acknowledged_ms=1500,
    sync_interval_ms=2_000,
    sync_jitter_ms=500,
    repair_t_min_ms=300,
    repair_t_max_ms=1500,
)


async def start(name: str, key: ChannelKey, folder: Path, url: str, *, seed: int = 0, impairment=None, **cfg) -> Node:
    config = NodeConfig(
        name,
        key,
        folder / f"{name}.db",
        url,
        channel_config=node_channel_config(**{**FAST, **cfg}),
        impairment=impairment or {},
        seed=seed,
    )
    return await Node.start(config)


def shown_ids(node: Node) -> list[str]:
    """A list that fills with the id of every message the node shows (``MessageShown``), in order."""
    shown: list[str] = []
    node.add_listener(lambda e: shown.append(e.message.message_id) if isinstance(e, ev.MessageShown) else None)
    return shown


def log_of(node: Node) -> list[str]:
    """Ids of the node's delivered messages in log order (the engine's view)."""
    return node.channel.log


async def settle(nodes, expected: int, timeout: float = 30.0) -> float:
    """Wait until every node has ``expected`` logged messages and nothing is pending; returns seconds taken."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all(len(log_of(n)) == expected and not n.pending() for n in nodes):
            return time.monotonic() - t0
        await asyncio.sleep(0.05)
    state = {n.nick: (len(log_of(n)), n.pending(), n.channel.summary()) for n in nodes}
    raise AssertionError(f"nodes did not settle in {timeout} s: {state}")


async def missed_by(
    receiver: Node, sender: Node, text: str, *, pause: float = 0.2, pilot=None, restore: bool = True
) -> str:
    """``sender`` sends ``text`` while every copy to ``receiver`` is lost; its message id. After ``pause`` (on the
    Pilot's clock with ``pilot``) the receiver's link comes back, unless ``restore`` is False."""
    receiver.set_impairment(loss_in=1.0)
    mid = await sender.send_text(text)
    await (pilot.pause(pause) if pilot is not None else asyncio.sleep(pause))
    if restore:
        receiver.set_impairment(loss_in=0.0)
    return mid
