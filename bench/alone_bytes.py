"""What a member alone in its channel puts on the broker: the frames it publishes while every other member is away.

    .venv/bin/python bench/alone_bytes.py [--lines 3] [--seconds 120] [--smoke]

alice and bob (the node's default settings) over the embedded broker hear each other; bob stops cleanly (its
last beat says it is offline); alice writes --lines lines nobody acknowledges and stays --seconds. A raw MQTT
client subscribed to everything adds up what the broker relays from the first of those lines on; alice's wire
log says what each frame was (the line, a resend, a sync). Every one of them is what a kept session of bob's
would queue for him, against the broker's cap (mosquitto's ``max_queued_messages``, 1,000 by default).

It uses only what sdschat's node has had since the wire log (``Node``, ``NodeConfig``, ``Node.wire``), so it
compares versions: from another checkout, ``PYTHONPATH=OTHER_TREE .venv/bin/python bench/alone_bytes.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
from pathlib import Path

from kit import broker_tap

import sdschat
from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig

LINE = "a line written while everyone else is away, about eighty characters long, no. {i}"


async def measure(lines: int, seconds: float) -> dict:
    sizes: list[int] = []
    counting = False

    def tapped(payload: bytes) -> None:
        if counting:
            sizes.append(len(payload))

    key = ChannelKey.generate("alone-bytes")
    async with broker_tap("#", tapped) as (url, nodes):
        with tempfile.TemporaryDirectory(prefix="sdschat-alone-bytes-") as tmp:
            alice, bob = [
                await Node.start(NodeConfig(nick=nick, key=key, db_path=Path(tmp) / f"{nick}.db", broker_url=url))
                for nick in ("alice", "bob")
            ]
            nodes.append(alice)
            hi = await bob.send_text("hi")
            for _ in range(500):  # (each has heard the other once bob's line is at alice)
                if any(m.message_id == hi for m in alice.messages()):
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)
            await bob.stop()
            await asyncio.sleep(1.0)
            since = alice.now()
            counting = True
            for i in range(lines):
                await alice.send_text(LINE.format(i=i + 1))
            await asyncio.sleep(seconds)
            counting = False
            kinds = collections.Counter(f.kind for f in alice.wire.frames if f.direction == "out" and f.ts_ms >= since)
            held = getattr(alice, "counters", {}).get("resends_held")
    return {"frames": len(sizes), "bytes": sum(sizes), "kinds": kinds, "held": held}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--smoke", action="store_true", help="1 line, 5 s: runs end to end (the suite)")
    a = ap.parse_args()
    lines, seconds = (1, 5.0) if a.smoke else (a.lines, a.seconds)
    r = asyncio.run(measure(lines, seconds))
    print(f"sdschat from {Path(sdschat.__file__).parent}")
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items())) or "none"
    print(
        f"alice alone for {seconds:g} s after {lines} line(s): {r['frames']} frames, {r['bytes']:,} bytes on the "
        f"broker ({r['frames'] / (seconds / 3600):,.0f} frames an hour); published: {kinds}"
    )
    if r["held"] is not None:
        print(f"resends held while nobody was here: {r['held']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
