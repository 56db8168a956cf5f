"""What padding costs on a realistic chat: bytes on the wire with Padmé buckets against unpadded envelopes.

    .venv/bin/python bench/padding.py [--messages 300] [--smoke]

Three nodes over the embedded broker (the node's default settings, 5% loss
each way so resends and repair answers appear too) send --messages messages
between them with lengths drawn like a chat's (60%: 10-60 characters, 30%:
60-200, 10%: 200-800), and a typing notice before every fifth. A raw MQTT
client subscribed to everything records each envelope as the broker relays
it; with the channel key the bench opens each one: its unpadded size is the
plaintext + 30 bytes (a version 1 envelope). Printed per frame kind: frames,
bytes padded and unpadded, overhead; and the distinct sizes the broker saw.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from collections import defaultdict
from pathlib import Path

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig
from sdschat.node.frame import unpack
from sdschat.transport import EmbeddedBroker, MqttTransport

V1_OVERHEAD = 30


def chat_length(rng: random.Random) -> int:
    r = rng.random()
    return rng.randint(10, 60) if r < 0.6 else rng.randint(60, 200) if r < 0.9 else rng.randint(200, 800)


async def run(folder: Path, n: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    broker = await EmbeddedBroker.start()
    key = ChannelKey.generate("padding")
    tap = MqttTransport(broker.url, suppress_echoes=False)
    seen: list[bytes] = []
    await tap.start()
    tap.set_message_handler(lambda topic, payload: seen.append(bytes(payload)) if topic == key.topic else None)
    await tap.subscribe("#")
    nodes = [
        await Node.start(
            NodeConfig(
                name, key, folder / f"{name}.db", broker.url, seed=i, impairment={"loss_in": 0.05, "loss_out": 0.05}
            )
        )
        for i, name in enumerate(("alice", "bob", "carol"))
    ]
    try:
        words = "the a deploy lunch build review ok yes no staging coffee friday plan ship test".split()
        for i in range(n):
            node = nodes[rng.randrange(3)]
            if i % 5 == 0:
                await node.send_typing()
            text = ""
            target = chat_length(rng)
            while len(text) < target:
                text += rng.choice(words) + " "
            await node.send_text(text[:target])
            await asyncio.sleep(0.01)
        for _ in range(300):  # until everything is acknowledged and delivered
            if not any(nd.pending() for nd in nodes):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
    finally:
        for nd in nodes:
            await nd.stop()
        await tap.stop()
        await broker.close()
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for env in seen:
        _, reason, _ = unpack(key.open(env), key.channel_binding)
        row = by_kind[reason]
        row[0] += 1
        row[1] += len(env)
        row[2] += len(key.open(env)) + V1_OVERHEAD
    return {"kinds": dict(by_kind), "sizes": len({len(e) for e in seen}), "frames": len(seen)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--smoke", action="store_true", help="30 messages")
    a = ap.parse_args()
    n = 30 if a.smoke else a.messages
    with tempfile.TemporaryDirectory(prefix="sdschat-padding-") as tmp:
        r = asyncio.run(run(Path(tmp), n))
    print(
        f"3 nodes, {n} chat messages (10-800 characters), 5% loss: {r['frames']:,} frames on the broker, "
        f"{r['sizes']} distinct sizes"
    )
    print(f"  {'kind':<10} {'frames':>7} {'padded':>12} {'unpadded':>12} {'overhead':>9}")
    total = [0, 0, 0]
    for kind, (frames, padded, plain) in sorted(r["kinds"].items()):
        total = [total[0] + frames, total[1] + padded, total[2] + plain]
        print(f"  {kind:<10} {frames:>7,} {padded:>12,} {plain:>12,} {padded / plain - 1:>8.1%}")
    print(f"  {'all':<10} {total[0]:>7,} {total[1]:>12,} {total[2]:>12,} {total[1] / total[2] - 1:>8.1%}")
    print(f"padding overhead on this chat: {total[1] / total[2] - 1:.1%} more bytes on the wire")


if __name__ == "__main__":
    main()
