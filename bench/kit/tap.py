"""An embedded broker with a raw MQTT client listening on it: what the byte-counting benches measure with."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import paho.mqtt.client as mqtt

from sdschat.transport import EmbeddedBroker


@contextlib.asynccontextmanager
async def broker_tap(topic: str, on_payload: Callable[[bytes], Any]) -> AsyncIterator[tuple[str, list[Any]]]:
    """Start an embedded broker and a raw client subscribed to ``topic`` that hands every payload it relays to
    ``on_payload`` (on paho's thread). Yields the broker's URL and a list for the nodes the bench starts: on the
    way out, nodes still in it are stopped, then the client and the broker."""
    broker = await EmbeddedBroker.start()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.on_message = lambda _c, _u, m: on_payload(bytes(m.payload))
    host, port = broker.url.split("//")[1].rsplit(":", 1)
    sub.connect(host, int(port))
    sub.subscribe(topic)
    sub.loop_start()
    nodes: list[Any] = []
    try:
        yield broker.url, nodes
    finally:
        for node in nodes:
            await node.stop()
        sub.loop_stop()
        await broker.close()
