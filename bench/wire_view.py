"""What the wire view costs at 1,000 frames/s: recording each frame, and repainting the view 4 times a second.

    .venv/bin/python bench/wire_view.py [--smoke]

1. Recording: real sealed frames from a second node (content frames with a
   causal history, and sync frames carrying the node's 19 KB bloom filter),
   decoded as the receive pipeline has them; the work the wire record adds
   per frame (the record, the bloom filter's fill, the ring), median of 5
   rounds; and the whole receive pipeline per frame for scale.
2. Repainting: the wire view open on a full ring (5,000 frames) in a 160x45
   terminal: the CPU time from its refresh to the frame written (less that of
   an idle wait as long), median of 20.
3. The share of one core at 1,000 frames/s: 1,000 x (1) + 4 x (2).
4. Live (``--live SECONDS``, skipped by ``--smoke``): alice's chat on mosquitto, bob
   sending 50 messages a second from a process of his own, and a hostile member
   (``bot --hostile flood``, a third process) putting 1,000 junk frames a second on
   the channel, each refused and recorded by alice's node; send-to-shown latency of
   bob's messages in alice's chat (the send call to the first frame after her pane
   applied the message; both processes read the machine's monotonic clock) and
   send-to-chat-pane (to the pane applying it: with the wire view open the chat is
   not on screen, but it must keep up), p50 and p99, with the wire view closed and
   open (F5), alternated.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

import sdschat.ui  # noqa: F401

# isort: split
from kit import Broker, percentile
from ui_history import FrameClock, record_applied

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig
from sdschat.transport import EmbeddedBroker


async def frames_of(sender: Node, n: int) -> list[bytes]:
    """``n`` sealed frames ``sender`` published (its own messages and syncs), captured from its outbox."""
    from sdschat.node.frame import pack

    out = []
    for i in range(n):
        await sender.send_text(f"frame {i}: about eighty characters of chat to make it realistic enough, ok")
        while not sender.outbox.empty():
            item = sender.outbox.get_nowait()
            out.append(sender.key.seal(pack(sender.identity, sender.key.channel_binding, item.data, item.reason)))
        if i % 10 == 0:  # a sync frame too, with its bloom filter
            for e in sender.channel.tick(sender.now() + 60_000):
                if getattr(e, "reason", "") == "sync":
                    out.append(sender.key.seal(pack(sender.identity, sender.key.channel_binding, e.data, "sync")))
    return out


async def bench(folder: Path, n: int) -> dict:
    from sdschat.ui.app import ChatApp
    from sdschat.ui.screens.wire import WireScreen

    broker = await EmbeddedBroker.start()
    key = ChannelKey.generate("wire")
    a = await Node.start(NodeConfig("alice", key, folder / "a.db", broker.url, use_store=False))
    b = await Node.start(NodeConfig("bob", key, folder / "b.db", broker.url, use_store=False))
    out: dict = {}
    try:
        b.set_impairment(offline=True)
        frames = await frames_of(b, n)
        # the work the wire record adds per frame, on the frames as the receive pipeline has them decoded
        from sdschat.node.frame import unpack
        from sdschat.node.receive import _outcome
        from sdschat.node.wirelog import WireFrame, WireLog, bloom_fill, kind_of
        from sdschat.sds import wire

        decoded = []
        for env in frames:
            publisher, reason, frame = unpack(a.key.open(env), a.key.channel_binding)
            decoded.append((publisher, reason, wire.decode(frame), len(env)))
        rounds = []
        for _ in range(5):
            log = WireLog()
            t = time.perf_counter()
            for publisher, reason, msg, size in decoded:
                log.add(
                    WireFrame(
                        0,
                        "in",
                        kind_of(reason, None),
                        msg.sender_id,
                        publisher,
                        msg.message_id,
                        msg.lamport_timestamp,
                        len(msg.causal_history),
                        bloom_fill(msg.bloom_filter),
                        len(msg.repair_request),
                        size,
                        _outcome(msg, ()),
                    )
                )
            rounds.append((time.perf_counter() - t) / len(decoded))
        out["per_frame_us"] = statistics.median(rounds) * 1e6
        node = await Node.start(NodeConfig("c", key, folder / "c.db", broker.url, use_store=False))
        node.set_impairment(offline=True)
        t = time.perf_counter()
        for env in frames:
            node.receiver.on_frame(env)
        out["receive_us"] = (time.perf_counter() - t) / len(frames) * 1e6
        await node.stop()
        a.set_impairment(offline=True)
        for env in frames * (1 + 5000 // len(frames)):
            a.receiver.on_frame(env)
        out["ring"] = len(a.wire.frames)
        app = ChatApp(a, blink=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press("f5")
            screen = app.screen
            assert isinstance(screen, WireScreen)
            clock = FrameClock(app)
            samples, idle = [], []
            for _ in range(20):  # CPU time from the refresh to its frame on screen, less an idle wait as long
                mark = clock.mark()
                c, t = time.process_time(), time.perf_counter()
                screen.refresh_view()
                await clock.next_frame(mark)
                samples.append(time.process_time() - c)
                wall = time.perf_counter() - t
                c = time.process_time()
                await asyncio.sleep(wall)
                idle.append(time.process_time() - c)
                await pilot.pause(0.01)
            out["repaint_ms"] = max(0.0, statistics.median(samples) - statistics.median(idle)) * 1000
            out["rows"] = len(screen.rows)
    finally:
        for node in (a, b):
            await node.stop()
        await broker.close()
    return out


SECRET = bytes(range(32))


async def _peer(url: str, seconds: float, rate: float, start_at: float, role: str, folder: str) -> int:
    """bob (``role`` "chat": ``rate`` messages a second carrying their send time) or mallory ("flood": 1,000 junk
    frames a second) from ``start_at`` (perf_counter) for ``seconds``."""
    from sdschat.node.hostile import HostileMember

    node = await Node.start(
        NodeConfig(role, ChannelKey(SECRET, "wire"), Path(folder) / f"{role}.db", url, use_store=False)
    )
    try:
        await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
        if role == "flood":
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(seconds, stop.set)
            published = await HostileMember(node, "flood", rate=1000.0, seed=1).run(stop)
            return sum(published.values())
        count = int(seconds * rate)
        for i in range(count):
            wait = start_at + i / rate - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            await node.send_text(f"live {i} {time.perf_counter():.6f}")  # CLOCK_MONOTONIC: the machine's
        await asyncio.sleep(1)
        return count
    finally:
        await node.stop()


def peer_process(*args) -> int:
    return asyncio.run(_peer(*args))


async def live(folder: Path, seconds: float, wire_open: bool) -> dict:
    """Section 4, one run: send-to-shown of bob's messages in alice's chat under a 1,000 frames/s flood."""
    from sdschat.ui.app import ChatApp
    from sdschat.ui.screens.wire import WireScreen

    broker = Broker(folder / "mosquitto")
    broker.start()
    pool = concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    alice = await Node.start(
        NodeConfig("alice", ChannelKey(SECRET, "wire"), folder / "alice.db", broker.url, use_store=False)
    )
    try:
        app = ChatApp(alice, blink=False)
        clock = FrameClock(app)
        applied: dict[str, float] = {}
        async with app.run_test(size=(160, 45)) as pilot:
            record_applied(app.pane, applied, lambda text: text.startswith("live "))
            if wire_open:
                await pilot.press("f5")
                assert isinstance(app.screen, WireScreen)
            frames_from = clock.mark()
            loop = asyncio.get_running_loop()
            start_at = time.perf_counter() + 4.0  # the peers' processes start meanwhile
            work = [
                loop.run_in_executor(pool, peer_process, broker.url, seconds, 50.0, start_at, role, str(folder))
                for role in ("chat", "flood")
            ]
            count, junk = await asyncio.gather(*work)
            deadline = time.perf_counter() + 20
            while len(applied) < count and time.perf_counter() < deadline:
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            frames = clock.frames[frames_from:]
            sent = {text: float(text.rsplit(" ", 1)[1]) for text in applied}  # each text carries its send time
            latencies, to_pane = [], []
            for text, t_applied in applied.items():
                to_pane.append((t_applied - sent[text]) * 1000)
                shown = next((f for f in frames if f >= t_applied), None)
                if shown is not None and not wire_open:  # under the wire view the chat is not on screen
                    latencies.append((shown - sent[text]) * 1000)
            recorded = alice.wire.totals.get("rejected", 0)
        return {
            "sent": count,
            "measured": len(to_pane),
            "p50_ms": percentile(latencies, 0.5) if latencies else None,
            "p99_ms": percentile(latencies, 0.99) if latencies else None,
            "pane_p50_ms": percentile(to_pane, 0.5),
            "pane_p99_ms": percentile(to_pane, 0.99),
            "junk": junk,
            "junk_recorded": recorded,
        }
    finally:
        pool.shutdown()
        await alice.stop()
        broker.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=500, help="distinct frames captured (each fed once per round)")
    ap.add_argument("--smoke", action="store_true", help="50 frames, no live run")
    ap.add_argument(
        "--live", type=float, default=20.0, metavar="SECONDS", help="seconds of each live run (section 4; 0 skips it)"
    )
    a = ap.parse_args()
    n = 50 if a.smoke else a.frames
    with tempfile.TemporaryDirectory(prefix="sdschat-wire-") as tmp:
        r = asyncio.run(bench(Path(tmp), n))
    core = (1000 * r["per_frame_us"] / 1e6 + 4 * r["repaint_ms"] / 1000) * 100
    print(
        f"recording a frame: {r['per_frame_us']:.1f} us per frame (the whole receive pipeline: "
        f"{r['receive_us']:.0f} us per frame)"
    )
    print(
        f"repainting the wire view over a ring of {r['ring']:,} frames: {r['repaint_ms']:.1f} ms median "
        f"({r['rows']} rows on screen)"
    )
    print(f"at 1,000 frames/s with the view open: {core:.1f}% of one core for the wire view")
    if a.smoke or not a.live:
        return
    for wire_open in (False, True, False, True):
        with tempfile.TemporaryDirectory(prefix="sdschat-wire-live-") as tmp:
            r = asyncio.run(live(Path(tmp), a.live, wire_open))
        shown = (
            f"send-to-shown p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms; "
            if r["p50_ms"] is not None
            else "the chat is under the view; "
        )
        print(
            f"live, wire view {'open  ' if wire_open else 'closed'}: {shown}send-to-chat-pane p50 "
            f"{r['pane_p50_ms']:.1f} ms, p99 {r['pane_p99_ms']:.1f} ms ({r['measured']} of {r['sent']} messages at "
            f"50/s; {r['junk']:,} junk frames published, {r['junk_recorded']:,} refused and recorded)",
            flush=True,
        )


if __name__ == "__main__":
    main()
