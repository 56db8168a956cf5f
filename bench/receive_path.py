"""What a received frame costs a node, replayed: the main thread's CPU a frame, without a broker's or a peer's noise.

Two nodes chat over the embedded broker (alice sends --lines lines, bob one for every three of hers, a few ms
apart) while every frame each receives is recorded. Then a fresh node (its own database, the same channel key)
is handed the recorded frames in arrival order, 5 a loop turn as a busy channel's frames come, straight into its
receiver, and its writer flushes at the end. Timed: the main thread's CPU (``time.thread_time``) over the
receiving and the final flush, and the process's (the database's thread too), per frame. Repeated --runs times
on fresh nodes; medians.

Then where the main thread's time goes: each step of the path timed apart over the same frames -- opening the
envelope, taking the frame apart, the frame's check (the publisher's Ed25519 signature, for the share of frames
the node checks it for: a message its author published is taken on the author's content signature unless its
bloom filter decides something), decoding the SDS frame, the content's check (the author's Ed25519 signature over
it and its ordering), the engine's receive (a bare channel with the node's settings) -- and the node's own work as
what is left. With one Ed25519 verification timed on this host: the checks a received message needs are the
floor of this path, whatever the Python around them costs.

This is the receive path of ``bench/node_latency.py``'s nodes, measured to a few per cent where that bench's
whole-process CPU moves by 10-20% from run to run on a shared host.

    python bench/receive_path.py [--lines 1500] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kit import ed25519_us

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.node.authored import open_authored
from sdschat.node.frame import open_frame
from sdschat.node.payload import AppPayload
from sdschat.sds import MessageChannel, native, wire
from sdschat.transport import EmbeddedBroker

CHUNK = 5  # frames handed over in one loop turn


async def _node(name: str, key: ChannelKey, folder: Path, url: str) -> Node:
    return await Node.start(NodeConfig(name, key, folder / f"{name}.db", url, channel_config=node_channel_config()))


async def _record(key: ChannelKey, folder: Path, url: str, lines: int) -> list[tuple[bytes, str | None, str | None]]:
    """The frames alice and bob receive from each other while they chat, each once, in arrival order."""
    alice, bob = await _node("alice", key, folder, url), await _node("bob", key, folder, url)
    heard: list[tuple[float, tuple[bytes, str | None, str | None]]] = []

    def recording(node: Node) -> None:
        deliver = node.receiver.on_frame

        def on_frame(payload: bytes, source: str | None = None, topic: str | None = None) -> None:
            heard.append((time.monotonic(), (payload, source, topic)))
            deliver(payload, source, topic)

        node.receiver.on_frame = on_frame  # type: ignore[method-assign]

    try:
        await asyncio.sleep(0.5)
        recording(alice)
        recording(bob)
        for i in range(lines):
            await alice.send_text(f"line {i}: the quick brown fox jumps over the lazy dog, about 80 characters")
            if i % 3 == 0:
                await bob.send_text(f"reply {i} from bob, who answers with a line of about the same length")
            await asyncio.sleep(0.004)
        await asyncio.sleep(1.0)
    finally:
        await alice.stop()
        await bob.stop()
    frames: dict[bytes, tuple[bytes, str | None, str | None]] = {}
    for _, frame in sorted(heard, key=lambda h: h[0]):
        frames.setdefault(frame[0], frame)
    return list(frames.values())


async def _replay(key: ChannelKey, folder: Path, url: str, frames, run: int) -> tuple[float, float, int, int]:
    """Main-thread and process CPU (s) of a fresh node receiving ``frames``, the messages it then holds, and how
    many frames it took on their author's content signature (their frame signature not checked)."""
    carol = await _node(f"carol{run}", key, folder, url)
    try:
        await asyncio.sleep(0.3)
        await carol.writer.flush()
        main = proc = 0.0
        for i in range(0, len(frames), CHUNK):
            t, p = time.thread_time(), time.process_time()
            for payload, source, topic in frames[i : i + CHUNK]:
                carol.receiver.on_frame(payload, source, topic)
            main += time.thread_time() - t
            proc += time.process_time() - p
            await asyncio.sleep(0)
        t, p = time.thread_time(), time.process_time()
        await carol.writer.flush()
        main += time.thread_time() - t
        proc += time.process_time() - p
        return main, proc, carol.channel.log_size(), carol.counters["frames_on_content_signature"]
    finally:
        await carol.stop()


def _parts(key: ChannelKey, frames, checked: float) -> dict[str, float]:
    """The main thread's CPU (s) of each step a received frame goes through, each timed over every frame of
    ``frames`` on its own (``time.thread_time``): opening the envelope; taking the frame apart (its head
    inflated); the frame's check (the publisher's signature), for the share ``checked`` of the frames the node
    checks it for; decoding the SDS frame; the content's check (its id is its hash, the author's signature over
    it and the ordering, its payload decoded); the engine receiving it (a bare channel, the node's settings, its
    journal drained as the node drains it)."""
    clock = time.thread_time
    t = clock()
    plain = [key.open(payload) for payload, _, _ in frames]
    took = {"envelope": clock() - t}
    t = clock()
    opened = [open_frame(data) for data in plain]
    took["unpacking"] = clock() - t
    t = clock()
    for o in opened:
        o.verify(key.channel_binding)
    took["frame check"] = (clock() - t) * checked
    sds_frames = [o.sds_frame for o in opened]
    t = clock()
    pbs = [wire.parse_pb(f) for f in sds_frames]
    msgs = [wire.from_pb(pb) for pb in pbs]
    took["decoding"] = clock() - t
    t = clock()
    for msg in msgs:
        if msg.content:
            if msg.message_id != hashlib.sha256(msg.content).hexdigest():
                raise SystemExit(f"recorded frame {msg.message_id[:8]}: its id is not its content's hash")
            AppPayload.decode(open_authored(msg, key.channel_binding).message)
    took["content check"] = clock() - t
    channel = MessageChannel(pbs[0].channel_id, "replay" + "0" * 26, node_channel_config(), 0, journal=True)
    now = int(time.time() * 1000)
    t = clock()
    for i, pb in enumerate(pbs):
        channel.receive_parsed(pb, now + i)
        channel.drain_journal()
    took["engine"] = clock() - t
    return took


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1500, help="alice's lines (bob sends one for every three)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the test suite runs this)")
    args = ap.parse_args()
    if args.smoke:
        args.lines, args.runs = 30, 1
    folder = Path(tempfile.mkdtemp(prefix="sdschat-receive-"))
    broker = await EmbeddedBroker.start()
    try:
        url = f"mqtt://127.0.0.1:{broker.port}"
        key = ChannelKey.generate("receive-path")
        frames = await _record(key, folder, url, args.lines)
        mains, procs, taken = [], [], []
        for run in range(args.runs):
            main, proc, held, on_content = await _replay(key, folder, url, frames, run)
            taken.append(on_content)
            mains.append(main * 1e6 / len(frames))
            procs.append(proc * 1e6 / len(frames))
            print(
                f"run {run + 1}: main thread {mains[-1]:.0f} us a frame, process {procs[-1]:.0f} us; {held} in the log"
            )
        checked = 1 - statistics.median(taken) / len(frames)
        parts = {name: took * 1e6 / len(frames) for name, took in _parts(key, frames, checked).items()}
    finally:
        await broker.close()
    main_us = statistics.median(mains)
    one = ed25519_us(50 if args.smoke else 500, 600)[0]
    print(f"engine: {native.BUILD}; {len(frames):,} frames replayed, {CHUNK} a loop turn")
    print(
        f"received frame: main thread {main_us:.0f} us median, "
        f"process {statistics.median(procs):.0f} us (the database's thread included) over {args.runs} run(s)"
    )
    checks = parts["unpacking"] + parts["frame check"] + parts["content check"]
    print(
        f"frame signatures checked: {100 * checked:.0f}% of the frames; the rest were taken on their author's "
        "content signature alone (their filter decided nothing)"
    )
    print(f"of which unpacking it with its signature checks (frame when checked, content): {checks:.0f} us a frame")
    rest = main_us - sum(parts.values())
    print(
        "where the main thread's time goes, us a frame (each step timed apart): "
        + ", ".join(f"{name} {us:.0f}" for name, us in parts.items())
        + f"; the node's own work (the rest: the message book, events, rows, presence, the wire log) {rest:.0f}"
    )
    needs = 1 + checked
    print(
        f"one Ed25519 verification on this host: {one:.0f} us; a received message needs {needs:.2f} on average, "
        f"{100 * needs * one / main_us:.0f}% of the main thread's time a frame"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
