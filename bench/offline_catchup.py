"""A window closed while others write: what arrives from the broker's kept session when it opens again.

    .venv/bin/python bench/offline_catchup.py [--lines 30] [--runs 5] [--queued 1000] [--smoke]

mosquitto on loopback (its default per-client queue, ``max_queued_messages 1000``). bob's window (the
window's own client, ``ProfileClient``: a kept session, QoS 1) opens and closes; alice writes --lines lines of
80 characters and leaves; bob's window opens again. Timed: from the start of bob's window (its client:
profile, databases, connection, the channel's node) to the last line in its channel. No store node runs, and
alice is gone:
only the broker can bring them. --runs times, medians printed; then the same with ``keep_days = 0`` (no kept
session), where nothing arrives.

Broker memory: bob away, alice writes --queued lines; mosquitto's resident memory (``VmRSS``) before and after,
divided by the lines, is what one queued line costs the broker (the sealed frame and mosquitto's bookkeeping).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from kit import Broker

from sdschat.cli.window import ProfileClient
from sdschat.profile import Profile, resolve_paths

LINE = "the quick brown fox jumps over the lazy dog while bob is away, line {i:05d} of the day"[:80]


def rss_kb(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    raise RuntimeError("no VmRSS")


def chat(node) -> int:
    return sum(1 for m in node.messages() if m.kind == "msg")


async def open_window(profile: Profile) -> ProfileClient:
    window = await ProfileClient.start(Profile.load(profile.paths), all_channels=False)
    await window.start_others(lambda node: None, lambda name, reason: None)
    return window


async def write(alice: Profile, lines: int) -> None:
    writer = await ProfileClient.start(alice)
    try:
        for i in range(lines):
            await writer.nodes[0].send_text(LINE.format(i=i))
        await writer.nodes[0].writer.flush()
        await asyncio.sleep(0.5)  # (the last publishes acknowledged by the broker)
    finally:
        await writer.stop()


async def one_run(work: Path, url: str, lines: int, keep_days: float, wait_s: float) -> tuple[float, int]:
    """(seconds from the window's start to all shown, lines shown)."""
    secret = os.urandom(32)
    alice = Profile.create(resolve_paths(work / "alice"), "alice", url)
    bob = Profile.create(resolve_paths(work / "bob"), "bob", url)
    bob.session_days = keep_days
    bob.save()
    for p in (alice, bob):
        p.add_channel("team", secret)
    await (await open_window(bob)).stop()
    await write(alice, lines)
    t0 = time.monotonic()
    window = await open_window(bob)
    try:
        node = window.nodes[0]
        while chat(node) < lines and time.monotonic() - t0 < wait_s:
            await asyncio.sleep(0.01)
        return time.monotonic() - t0, chat(node)
    finally:
        await window.stop()


async def broker_memory(work: Path, broker: Broker, queued: int) -> float:
    secret = os.urandom(32)
    alice = Profile.create(resolve_paths(work / "alice"), "alice", broker.url)
    bob = Profile.create(resolve_paths(work / "bob"), "bob", broker.url)
    for p in (alice, bob):
        p.add_channel("team", secret)
    await (await open_window(bob)).stop()
    await asyncio.sleep(1.0)
    before = rss_kb(broker.proc.pid)
    await write(alice, queued)
    await asyncio.sleep(1.0)
    after = rss_kb(broker.proc.pid)
    return (after - before) * 1024 / queued


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=30)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--queued", type=int, default=1000, help="lines queued for the broker-memory figure")
    ap.add_argument("--smoke", action="store_true", help="5 lines, one run, 50 queued: runs end to end (the suite)")
    a = ap.parse_args()
    if a.smoke:
        a.lines, a.runs, a.queued = 5, 1, 50
    with tempfile.TemporaryDirectory(prefix="sdschat-offline-") as tmp:
        broker = Broker(Path(tmp) / "broker", max_queued=1000)
        broker.start()
        try:
            kept = [asyncio.run(one_run(Path(tmp) / f"kept{i}", broker.url, a.lines, 7.0, 20.0)) for i in range(a.runs)]
            clean = asyncio.run(one_run(Path(tmp) / "clean", broker.url, a.lines, 0.0, 3.0 if a.smoke else 12.0))
            per_line = asyncio.run(broker_memory(Path(tmp) / "memory", broker, a.queued))
        finally:
            broker.close()
    shown = min(k[1] for k in kept)
    times = [k[0] * 1000 for k in kept]
    print(
        f"kept session: {shown} of {a.lines} lines shown in every one of {a.runs} runs; window start to the last "
        f"line {statistics.median(times):.0f} ms median (min {min(times):.0f}, max {max(times):.0f})"
    )
    print(
        f"no kept session (keep_days = 0): {clean[1]} of {a.lines} lines after {clean[0]:.1f} s "
        f"(no store node, the sender gone)"
    )
    print(f"broker memory: {per_line:,.0f} bytes per queued line ({a.queued} lines queued for one absent member)")
    return 0 if shown == a.lines and clean[1] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
