"""Helpers for membership tests between real nodes: members of a channel with an admin, waits, a raw tap on the
broker, the refusals a node reports and records."""

from __future__ import annotations

import json
import time

from node_helpers import FAST
from run_until import until as wait_for  # the membership tests' name for the shared wait

from sdschat.crypto import ChannelKey, EnvelopeError, Identity
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.node import events as ev
from sdschat.transport import MqttTransport


async def member(
    nick: str,
    key: ChannelKey,
    folder,
    url: str,
    admin: Identity,
    *,
    identity=None,
    impairment=None,
    seed: int = 0,
    **cfg,
) -> Node:
    ident = identity or (admin if nick == "alice" else Identity.generate())
    config = NodeConfig(
        nick,
        key,
        folder / f"{nick}.db",
        url,
        channel_config=node_channel_config(**FAST),
        impairment=impairment or {},
        seed=seed,
        identity=ident,
        membership=True,
        admins=(admin.participant_id,),
        **cfg,
    )
    return await Node.start(config)


def knows_all(admin: Node, others) -> bool:
    return all(o.participant_id in admin.membership.members for o in others)


async def all_joined(nodes, timeout: float = 15.0) -> None:
    """Until every node has every other's join."""
    await wait_for(lambda: all(knows_all(x, [y for y in nodes if y is not x]) for x in nodes), timeout, "joins")


async def stop_all(nodes) -> None:
    for x in nodes:
        await x.stop()


class Tap:
    """Every envelope published on the channel's topics, as a raw subscriber to ``sdschat/#`` sees it."""

    def __init__(self, url: str) -> None:
        self.t = MqttTransport(url)
        self.frames: list[tuple[float, str, bytes]] = []

    async def start(self) -> Tap:
        self.t.set_message_handler(lambda topic, payload, *a: self.frames.append((time.monotonic(), topic, payload)))
        await self.t.start()
        await self.t.subscribe("sdschat/#")
        return self

    async def stop(self) -> None:
        await self.t.stop()


def opens(key: ChannelKey, envelope: bytes) -> bool:
    try:
        key.open(envelope)
        return True
    except EnvelopeError:
        return False


def rejections(node: Node) -> list[str]:
    """A list that fills with the reason of every frame or message the node refuses (``FrameRejected``)."""
    reasons: list[str] = []
    node.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
    return reasons


def rejected_reasons(db) -> list[str]:
    """The reasons of the ``rejected`` rows in a node's database (its events table)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        return [json.loads(d)["reason"] for (d,) in conn.execute("SELECT detail FROM events WHERE kind = 'rejected'")]


async def trio(room: str, folder, url: str, **cfg) -> tuple[ChannelKey, Identity, list[Node]]:
    """A channel ``room`` and its members alice (the admin), bob and mallory, all joined."""
    key, admin = ChannelKey.generate(room), Identity.generate()
    nodes = [await member(nick, key, folder, url, admin, **cfg) for nick in ("alice", "bob", "mallory")]
    await all_joined(nodes)
    return key, admin, nodes
