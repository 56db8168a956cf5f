"""What a received frame costs a node, replayed: the main thread's CPU a frame, without a broker's or a peer's noise.

Two nodes chat over the embedded broker (alice sends --lines lines, bob one for every three of hers, a few ms
apart) while every frame each receives is recorded. Then a fresh node (its own database, the same channel key)
is handed the recorded frames in arrival order, 5 a loop turn as a busy channel's frames come, straight into its
receiver, and its writer flushes at the end. Timed: the main thread's CPU (``time.thread_time``) over the
receiving and the final flush, and the process's (the database's thread too), per frame; and apart, unpacking
the frames with the two Ed25519 checks every received message needs (the publisher's over the frame, the
author's over the content), the floor of this path. Repeated --runs times on fresh nodes; medians.

This is the receive path of ``bench/node_latency.py``'s nodes, measured to a few per cent where that bench's
whole-process CPU moves by 10-20% from run to run on a shared host.

    python bench/receive_path.py [--lines 1500] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.node.authored import open_authored
from sdschat.node.frame import unpack
from sdschat.sds import native, wire
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


async def _replay(key: ChannelKey, folder: Path, url: str, frames, run: int) -> tuple[float, float, int]:
    """Main-thread and process CPU (s) of a fresh node receiving ``frames``, and the messages it then holds."""
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
        return main, proc, carol.channel.log_size()
    finally:
        await carol.stop()


def _checks(key: ChannelKey, frames) -> float:
    """CPU (s) of unpacking every frame of ``frames`` and checking its content: the publisher's signature over the
    frame and the author's over the content, with the inflating and decoding around them."""
    plain = [key.open(payload) for payload, _, _ in frames]
    t = time.process_time()
    for data in plain:
        _, _, sds_frame = unpack(data, key.channel_binding)
        msg = wire.decode(sds_frame)
        if msg.content:
            open_authored(msg, key.channel_binding)
    return time.process_time() - t


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
        mains, procs = [], []
        for run in range(args.runs):
            main, proc, held = await _replay(key, folder, url, frames, run)
            mains.append(main * 1e6 / len(frames))
            procs.append(proc * 1e6 / len(frames))
            print(
                f"run {run + 1}: main thread {mains[-1]:.0f} us a frame, process {procs[-1]:.0f} us; {held} in the log"
            )
        checks = _checks(key, frames) * 1e6 / len(frames)
    finally:
        await broker.close()
    print(f"engine: {native.BUILD}; {len(frames):,} frames replayed, {CHUNK} a loop turn")
    print(
        f"received frame: main thread {statistics.median(mains):.0f} us median, "
        f"process {statistics.median(procs):.0f} us (the database's thread included) over {args.runs} run(s)"
    )
    print(f"of which unpacking it with its two signature checks (frame and content): {checks:.0f} us a frame")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
