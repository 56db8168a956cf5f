"""The message inspector on a long channel: how soon `i` shows a message's life, and `sdschat inspect` cold.

    .venv/bin/python bench/inspector.py [--messages 100000] [--smoke]

A channel of --messages messages (written through the store's public API, as
bench/ui_history.py does), each with the events a node records for a
received message (received, delivered) and, for every fifth one, an own
message's (sent, acked); then compacted to the node's default window (the newest
10,000 event rows in full), so old messages are read from the compacted first
times and recent ones from full rows. The node starts on it, the chat screen
opens, and for a recent and an old message: the time from the key press on the
message cursor to the first frame of the inspector with its timeline (median of
7). Then ``sdschat inspect --db FILE ID`` as a process, cold (median of 3).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sdschat.ui  # noqa: F401  (first: it sets Textual's frame rate)

# isort: split
from ui_history import FrameClock, fill

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig
from sdschat.node import events as ev
from sdschat.store import EventRow, Store

RUNS = 7
ME = "aa" * 16


def history(n: int, t0: int = 1_763_000_000_000) -> list[ev.ChatMessage]:
    senders = [(ME, "alice"), ("bb" * 16, "bob"), ("cc" * 16, "carol")]
    return [
        ev.ChatMessage(
            f"{i:064x}",
            senders[i % 3][0],
            senders[i % 3][1],
            f"message number {i} of the bench",
            "msg",
            t0 + i * 1000,
            i + 1,
            False,
            ev.RECEIVED,
        )
        for i in range(n)
    ]


async def make(db: Path, key: ChannelKey, n: int, url: str) -> list[ev.ChatMessage]:
    node = await Node.start(NodeConfig("alice", key, db, url))  # the channel's rows and identity
    me = node.participant_id
    await node.stop()
    msgs = history(n)
    await fill(db, key, msgs)
    store = await Store.open(db)
    try:
        for i in range(0, n, 5_000):
            rows = []
            for m in msgs[i : i + 5_000]:
                t = m.sent_at_ms
                rows += [
                    EventRow("received", t + 20, m.message_id, m.sender_id),
                    EventRow("delivered", t + 21, m.message_id, m.sender_id),
                ]
                if m.lamport_timestamp % 5 == 0:
                    rows += [
                        EventRow("sent", t, m.message_id, me, detail={"history": [f"{j:064x}" for j in range(3)]}),
                        EventRow(
                            "acked",
                            t + 300,
                            m.message_id,
                            me,
                            detail={"by_bloom": False, "by": "bb" * 16, "frame": "f" * 64, "via": "sync"},
                        ),
                    ]
            await store.apply(key.channel_id, events=rows)
        await store.compact_events(10_000)
    finally:
        await store.close()
    return msgs


async def bench(folder: Path, n: int) -> dict:
    from sdschat.transport import EmbeddedBroker
    from sdschat.ui.app import ChatApp
    from sdschat.ui.screens.inspector import InspectorScreen

    broker = await EmbeddedBroker.start()
    key = ChannelKey(b"\x55" * 32, "inspect")
    db = folder / "inspect.db"
    out: dict = {}
    try:
        msgs = await make(db, key, n, broker.url)
        node = await Node.start(NodeConfig("alice", key, db, broker.url))
        try:
            app = ChatApp(node, blink=False)
            async with app.run_test(size=(140, 40)) as pilot:
                clock = FrameClock(app)
                view = app.pane.view
                while not view.timeline.items:
                    await pilot.pause(0.01)
                for label, target in (("recent", msgs[-3]), ("old", msgs[n // 2])):
                    samples = []
                    for _ in range(RUNS):
                        ok = await app.pane.jump_to(target.message_id, (target.lamport_timestamp, target.message_id))
                        assert ok
                        while view.cursor is None:
                            await pilot.pause(0.001)
                        mark = clock.mark()
                        t = time.perf_counter()
                        await pilot.press("i")
                        while not (isinstance(app.screen, InspectorScreen) and app.screen.lines):
                            await pilot.pause(0.001)
                        shown = app.screen.lines_at
                        while True:  # the first frame written after the timeline was put on the screen
                            frame = await clock.next_frame(mark)
                            if frame >= shown:
                                break
                            mark += 1
                        samples.append(frame - t)
                        lines = app.screen.lines
                        await pilot.press("escape")
                        await pilot.pause(0.05)
                    out[label] = (
                        statistics.median(samples) * 1000,
                        max(samples) * 1000,
                        sum(1 for line in lines if " s  " in line),
                    )
        finally:
            await node.stop()
        cmd = [sys.executable, "-m", "sdschat", "inspect", "--db", str(db), msgs[n // 2].message_id]
        cold = []
        for _ in range(3):
            t = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            cold.append(time.perf_counter() - t)
            assert r.returncode == 0, r.stderr
        out["cold"] = statistics.median(cold) * 1000
    finally:
        await broker.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--smoke", action="store_true", help="2,000 messages")
    a = ap.parse_args()
    n = 2_000 if a.smoke else a.messages
    with tempfile.TemporaryDirectory(prefix="sdschat-inspect-") as tmp:
        r = asyncio.run(bench(Path(tmp), n))
    print(f"inspector on a channel of {n:,} messages (events compacted beyond the newest 10,000 rows)")
    for label in ("recent", "old"):
        med, worst, steps = r[label]
        print(
            f"  {label} message: key press to the inspector's frame {med:.1f} ms median ({worst:.1f} ms max), "
            f"{steps} timeline steps"
        )
    print(f"  `sdschat inspect --db FILE ID`, a cold process: {r['cold']:.0f} ms median")


if __name__ == "__main__":
    main()
