"""Bytes on the broker per chat message, everything included (envelope, signatures, padding, syncs).

    .venv/bin/python bench/wire_bytes.py [--messages 300] [--chars N] [--members 3] [--loss 0.3] [--smoke]

--members nodes (3) over the embedded broker (the node's default settings)
send --messages messages round robin, 5 a second, of 10-800 characters (seeded:
the same texts every run), or each of exactly --chars characters; --loss drops
that share of the frames each node receives. A raw MQTT client subscribed to
everything adds up each payload the broker relays (what the broker carries,
once per frame, whoever receives it), until 15 s after the last send.
Printed: the frames, the bytes, the bytes per message and the median frame.

The issue 46 figure: ``--messages 90 --chars 80`` (three members, 30 lines each).

It uses only what every sdschat since 0.1's node has (``Node``, ``NodeConfig``,
``EmbeddedBroker``), so it compares versions: from another checkout,
``PYTHONPATH=OTHER_TREE .venv/bin/python bench/wire_bytes.py`` (the issue 17
before/after in the README was measured so).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from pathlib import Path

from kit import broker_tap

import sdschat
from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig

WORDS = "the quick brown fox jumps over a lazy dog and then some more words follow here".split()


def texts(n: int, seed: int = 1, chars: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        want = chars or rng.randint(10, 800)
        text = ""
        while len(text) < want:
            text += rng.choice(WORDS) + " "
        out.append(text[:want])
    return out


async def measure(messages: int, settle_s: float, chars: int = 0, members: int = 3, loss: float = 0.0) -> dict:
    sizes: list[int] = []
    key = ChannelKey.generate("wire-bytes")
    async with broker_tap("#", lambda payload: sizes.append(len(payload))) as (url, nodes):
        with tempfile.TemporaryDirectory(prefix="sdschat-wire-bytes-") as tmp:
            for i in range(members):
                nick = ("alice", "bob", "carol")[i] if i < 3 else f"member{i}"
                nodes.append(
                    await Node.start(
                        NodeConfig(
                            nick=nick,
                            key=key,
                            db_path=Path(tmp) / f"{nick}.db",
                            broker_url=url,
                            seed=i,
                            impairment={"loss_in": loss} if loss else {},
                        )
                    )
                )
            await asyncio.sleep(2)
            sizes.clear()  # joins and greetings: not chat
            lines = texts(messages, chars=chars)
            for i, text in enumerate(lines):
                await nodes[i % members].send_text(text)
                await asyncio.sleep(0.2)
            await asyncio.sleep(settle_s)
            while nodes:
                await nodes.pop().stop()
    chars = sum(map(len, lines))
    return {
        "frames": len(sizes),
        "bytes": sum(sizes),
        "messages": messages,
        "chars": chars,
        "median_frame": statistics.median(sizes) if sizes else 0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--chars", type=int, default=0, help="every line this long (default: 10-800 characters)")
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--loss", type=float, default=0.0, help="share of the frames each member loses on receipt")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds counted after the last send")
    ap.add_argument("--smoke", action="store_true", help="20 messages, a short settle: runs end to end (the suite)")
    a = ap.parse_args()
    messages, settle = (20, 3.0) if a.smoke else (a.messages, a.settle)
    r = asyncio.run(measure(messages, settle, a.chars, a.members, a.loss))
    print(f"sdschat from {Path(sdschat.__file__).parent}")
    print(f"{a.members} members, loss {a.loss:.0%}")
    print(
        f"{r['frames']} frames, {r['bytes']:,} bytes on the broker for {r['messages']} messages of "
        f"{r['chars'] / r['messages']:.0f} characters on average: {r['bytes'] / r['messages']:,.0f} bytes a "
        f"message; median frame {r['median_frame']:,.0f} bytes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
