"""Search and deep history at scale (headless): 10 channels of 100,000 messages, and one channel of 1,000,000.

    .venv/bin/python bench/search_history.py [--channels 10] [--messages 100000] [--big 1000000]
                                             [--keep DIR] [--smoke]

1. Search: ``--channels`` databases of ``--messages`` messages each (written
   through the store, so the FTS5 index is built by the same triggers as live
   traffic). With the stores open (the window has them open), the time until
   the first 50 results of every channel are merged, newest first, for a rare
   word, a common word, two common words, a prefix and a phrase (median of 7);
   and the same from a cold start as ``sdschat search`` does it (open the 10
   databases, search, close).
2. Deep history: one channel of ``--big`` messages. The node's start-up with the
   engine restored first (``sdschat chat``), then opened as the window opens its
   first channel (the engine restoring in the background): the chat screen's
   first frame with the last page on screen, when the engine is ready, and the
   longest stall of the event loop meanwhile; then one page up
   (scroll to the top of what is loaded: the next 400 messages are read from the
   database and laid out) to the frame that shows them (median of 7), and a jump
   to a search result in the middle of the channel (its neighbours loaded
   around it) to its frame.

``--keep DIR`` keeps the databases there and reuses them on the next run
(filling 2,000,000 messages takes a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import tempfile
import time
from pathlib import Path

import sdschat.ui  # noqa: F401  (first: it sets Textual's frame rate)

# isort: split
from ui_history import FrameClock, fill

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, merge_hits, search_store
from sdschat.node import events as ev
from sdschat.store import Store
from sdschat.transport import EmbeddedBroker

WORDS = (
    "ack",
    "bloom",
    "lamport",
    "causal",
    "history",
    "repair",
    "resend",
    "gap",
    "sync",
    "buffer",
    "hello",
    "there",
    "reliable",
    "message",
    "delivered",
    "missing",
    "filter",
    "peer",
    "channel",
    "epoch",
    "lunch",
    "deploy",
    "friday",
    "coffee",
    "review",
    "merge",
    "release",
    "ticket",
    "standup",
    "incident",
)
QUERIES = (
    ("rare word", "zanzibar"),
    ("common word", "repair"),
    ("two common words", "deploy friday"),
    ("prefix", "relea*"),
    ("phrase", '"causal history"'),
)
RUNS = 7


def history(n: int, seed: int, start: int = 0, t0: int = 1_763_000_000_000) -> list[ev.ChatMessage]:
    """Messages ``start`` .. ``start + n`` of a channel: chat lines of ~80 characters from five people; one in
    20,000 says "zanzibar"."""
    rng = random.Random(seed * 1_000_003 + start)
    senders = [(f"{i:02x}" * 32, nick) for i, nick in enumerate(("alice", "bob", "carol", "dave", "erin"))]
    out = []
    for i in range(start, start + n):
        pid, nick = senders[i % 5]
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        if i % 20_000 == 7_777:
            words[rng.randrange(len(words))] = "zanzibar"
        out.append(
            ev.ChatMessage(
                f"{seed:08x}{i:056x}",
                pid,
                nick,
                " ".join(words),
                "msg",
                t0 + i * 1000,
                i + 1,
                pid == senders[0][0],
                ev.RECEIVED,
            )
        )
    return out


async def make_db(db: Path, key: ChannelKey, n: int, seed: int, broker_url: str) -> None:
    """A participant's database holding ``n`` messages (kept if it is there from an earlier ``--keep`` run)."""
    if db.exists():
        return
    node = await Node.start(NodeConfig("alice", key, db, broker_url))  # the channel's rows, as a first start
    await node.stop()
    for start in range(0, n, 100_000):
        await fill(db, key, history(min(100_000, n - start), seed, start))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def bench_search(folder: Path, channels: int, messages: int, broker_url: str) -> dict:
    keys = [ChannelKey(bytes([i + 1]) * 32, f"chan-{i}") for i in range(channels)]
    t = time.perf_counter()
    for i, key in enumerate(keys):
        await make_db(folder / f"chan-{i}.db", key, messages, i + 1, broker_url)
    out: dict = {
        "fill_s": time.perf_counter() - t,
        "bytes": sum((folder / f"chan-{i}.db").stat().st_size for i in range(channels)),
    }
    stores = [await Store.open(folder / f"chan-{i}.db") for i in range(channels)]
    try:
        for label, query in QUERIES:
            samples, found = [], 0
            for _ in range(RUNS):
                t = time.perf_counter()
                lists = [
                    await search_store(s, k.channel_id, k.channel_name, query, limit=50) for s, k in zip(stores, keys)
                ]
                hits = merge_hits(lists, 50)
                samples.append(time.perf_counter() - t)
                found = len(hits)
            out[label] = (median_ms(samples), max(samples) * 1000, found)
    finally:
        for s in stores:
            await s.close()
    samples = []
    for _ in range(RUNS):
        t = time.perf_counter()
        lists = []
        for i, k in enumerate(keys):
            async with await Store.open(folder / f"chan-{i}.db", create=False) as s:
                lists.append(await search_store(s, k.channel_id, k.channel_name, "deploy friday", limit=50))
        merge_hits(lists, 50)
        samples.append(time.perf_counter() - t)
    out["cold"] = median_ms(samples)
    return out


async def bench_deep(folder: Path, big: int, broker) -> dict:
    from sdschat.ui.app import ChatApp

    key = ChannelKey(b"\x77" * 32, "big")
    db = folder / "big.db"
    t = time.perf_counter()
    await make_db(db, key, big, 99, broker.url)
    out: dict = {"fill_s": time.perf_counter() - t, "bytes": db.stat().st_size}
    t = time.perf_counter()
    node = await Node.start(NodeConfig("alice", key, db, broker.url))
    out["node_start_s"] = time.perf_counter() - t
    await node.stop()
    stalls: list[float] = []

    async def probe() -> None:  # how long the event loop (the UI's) is held up while the engine restores
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            stalls.append(now - last - 0.005)
            last = now

    t = time.perf_counter()
    probing = asyncio.create_task(probe())
    node = await Node.start(NodeConfig("alice", key, db, broker.url), restore_in_background=True)
    try:
        app = ChatApp(node, blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            clock = FrameClock(app)
            view = app.pane.view
            while not view.timeline.items:
                await pilot.pause(0.01)
            mark = clock.mark()
            out["open_s"] = await clock.next_frame(mark) - t
            await node.wait_ready()
            out["ready_s"] = time.perf_counter() - t
            gc.freeze()  # as the window (and `sdschat chat`) do once the engine is up
            probing.cancel()
            out["stall_ms"] = max(stalls) * 1000
            samples = []
            paged: list[float] = []  # when each older page went into the view (a worker does it)
            prepend = view.prepend

            def timed_prepend(*args, **kwargs):
                added = prepend(*args, **kwargs)
                paged.append(time.perf_counter())
                return added

            view.prepend = timed_prepend
            for _ in range(RUNS):
                before = len(paged)
                t = time.perf_counter()
                view.scroll_to(y=0, animate=False, force=True)
                while len(paged) == before:
                    await pilot.pause(0.001)
                samples.append(await clock.frame_after(paged[-1]) - t)
                await pilot.pause(0.05)
            out["page_up"] = (median_ms(samples), max(samples) * 1000, len(view.timeline.items))
            hits = await node.search("zanzibar", limit=200)
            target = hits[len(hits) // 2].message
            t = time.perf_counter()
            ok = await app.pane.jump_to(target.message_id, (target.lamport_timestamp, target.message_id))
            while view.cursor is None:
                await pilot.pause(0.001)
            out["jump_ms"] = (await clock.next_frame(clock.mark()) - t) * 1000
            out["jump_ok"] = ok and view.cursor.msg.message_id == target.message_id
    finally:
        await node.stop()
    return out


async def run(a, folder: Path) -> None:
    broker = await EmbeddedBroker.start()
    try:
        await report(a, folder, broker)
    finally:
        await broker.close()


async def report(a, folder: Path, broker) -> None:
    s = await bench_search(folder, a.channels, a.messages, broker.url)
    total = a.channels * a.messages
    print(
        f"search over {total:,} messages in {a.channels} channels ({s['bytes'] / total:.0f} bytes per message on"
        f" disk, index included; filled in {s['fill_s']:.0f} s)"
    )
    for label, _ in QUERIES:
        med, worst, found = s[label]
        print(f"  {label:<17} first results {med:7.1f} ms median ({worst:.1f} ms max), {found} results")
    print(f"  cold, as `sdschat search` (open {a.channels} databases, search, close): {s['cold']:.0f} ms median")
    d = await bench_deep(folder, a.big, broker)
    print(f"deep history: one channel of {a.big:,} messages ({d['bytes'] / a.big:.0f} bytes per message)")
    print(f"  node start-up with the engine restored first: {d['node_start_s'] * 1000:.0f} ms")
    print(
        f"  open as the window does (the engine restores in the background): the last page on screen "
        f"{d['open_s'] * 1000:.0f} ms after start; engine ready after {d['ready_s'] * 1000:.0f} ms; the UI's loop "
        f"held up at most {d['stall_ms']:.0f} ms meanwhile"
    )
    med, worst, shown = d["page_up"]
    print(f"  one page up: {med:.1f} ms median ({worst:.1f} ms max) to the frame that shows it ({shown:,} loaded)")
    print(f"  jump to a search result mid-channel: {d['jump_ms']:.1f} ms to its frame (cursor on it: {d['jump_ok']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=10)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="keep (and reuse) the databases in this folder")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds (the test suite runs this)")
    a = ap.parse_args()
    if a.smoke:
        a.channels, a.messages, a.big = 2, 3_000, 25_000
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
        asyncio.run(run(a, a.keep))
        return
    with tempfile.TemporaryDirectory(prefix="sdschat-search-bench-") as tmp:
        asyncio.run(run(a, Path(tmp)))


if __name__ == "__main__":
    main()
