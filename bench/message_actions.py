"""Edits and reactions between two real nodes (in one process) over the embedded broker.

Prints (1) the time from an edit (``Node.edit`` called) to its being shown on the other member (the
``MessageChanged`` event carrying the new text there), p50/p99 over N edits, one at a time; and (2) the size of the
receiving member's database after R reactions to one message (the file after the node stopped: the write-ahead log
folded in), in bytes and bytes per reaction over a database that holds the message alone. Reactions cycle through 12
emoji from two members, so some take an earlier one back: the rows a toggle leaves are counted too.

    python bench/message_actions.py [--edits 200] [--reactions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from kit import percentile

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig
from sdschat.node import events as ev
from sdschat.transport import EmbeddedBroker

EMOJI = ("👍", "🎉", "❤️", "😂", "🚀", "👀", "🙏", "🔥", "✅", "💯", "🤔", "👋")


async def _pair(folder: Path, url: str, tag: str) -> tuple[Node, Node]:
    key = ChannelKey.generate(f"actions-{tag}")
    a = await Node.start(NodeConfig("alice", key, folder / f"{tag}-alice.db", url))
    b = await Node.start(NodeConfig("bob", key, folder / f"{tag}-bob.db", url))
    return a, b


async def _shown(b: Node, mid: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while mid not in b.book.messages:
        if time.monotonic() > deadline:
            raise SystemExit(f"message {mid[:8]} never reached the other member")
        await asyncio.sleep(0.005)


async def edit_latency(folder: Path, url: str, n: int) -> list[float]:
    """Milliseconds from each edit to the other member showing its text."""
    a, b = await _pair(folder, url, "edit")
    samples: list[float] = []
    try:
        mid = await a.send_text("the line to edit")
        await _shown(b, mid)
        waiting: dict[str, asyncio.Future] = {}

        def seen(e: ev.NodeEvent) -> None:
            if isinstance(e, ev.MessageChanged) and e.message.message_id == mid:
                fut = waiting.pop(e.message.text, None)
                if fut is not None and not fut.done():
                    fut.set_result(time.perf_counter())

        b.add_listener(seen)
        loop = asyncio.get_running_loop()
        for i in range(n):
            text = f"edit number {i}"
            waiting[text] = loop.create_future()
            t0 = time.perf_counter()
            fut = waiting[text]
            await a.edit(mid, text)
            shown_at = await asyncio.wait_for(fut, 30)
            samples.append((shown_at - t0) * 1000)
    finally:
        await a.stop()
        await b.stop()
    return samples


async def reactions_size(folder: Path, url: str, n: int) -> tuple[int, int]:
    """The receiver's database size before the reactions (the message alone) and after ``n`` of them."""
    a, b = await _pair(folder, url, "react")
    db = b.config.db_path
    try:
        mid = await a.send_text("the line to react to")
        await _shown(b, mid)
        await b.scrub()
        before = db.stat().st_size
        mine = 0
        for i in range(n):
            who = a if i % 2 == 0 else b
            last = await who.react(mid, EMOJI[(i // 2) % len(EMOJI)])
            mine += who is a
        await _shown(b, last)
        deadline = time.monotonic() + 120
        while b.pending() or a.pending():  # every reaction delivered and acknowledged
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
    finally:
        await a.stop()
        await b.stop()
    return before, db.stat().st_size


async def main_async(edits: int, reactions: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="sdschat-bench-actions-"))
    broker = await EmbeddedBroker.start()
    try:
        samples = await edit_latency(folder, broker.url, edits)
        print(
            f"edit to shown on the other member over {len(samples)} edits: "
            f"p50 {percentile(samples, 0.5):.1f} ms, p99 {percentile(samples, 0.99):.1f} ms"
        )
        before, after = await reactions_size(folder, broker.url, reactions)
        per = (after - before) / max(1, reactions)
        print(
            f"database after {reactions:,} reactions: {after:,} bytes, {per:,.0f} bytes per reaction "
            f"(the message alone: {before:,} bytes)"
        )
    finally:
        await broker.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=200)
    ap.add_argument("--reactions", type=int, default=10_000)
    ap.add_argument("--smoke", action="store_true", help="a few edits and reactions (the test suite runs this)")
    args = ap.parse_args()
    if args.smoke:
        args.edits, args.reactions = 5, 40
    asyncio.run(main_async(args.edits, args.reactions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
