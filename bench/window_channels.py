"""Bare ``sdschat`` with many channels (headless): open, switch, background traffic, memory, live latency.

    .venv/bin/python bench/window_channels.py [--channels 10] [--messages 100000] [--runs 5] [--seconds 30]
        [--size 140x40] [--smoke]

1. One profile, ``--channels`` channels of ``--messages`` messages each in their
   databases (written by a separate process, so its memory is not counted),
   on an embedded broker: the real :class:`ChannelWindow` on the real
   ``ProfileClient`` in ``App.run_test``.
   - first paint: from starting the client (as bare ``sdschat`` does: the
     first channel, then the window, then the others) to the first frame after
     the active channel's history is on screen; and until every channel is up;
   - channel switch: Alt+k (Alt+Right from the tenth on) to the frame showing
     channel k (every channel, twice);
   - background traffic: a peer sends into a channel not on screen: lines the
     active channel's view repainted (target 0);
   - memory: the process's peak resident set (ru_maxrss).
   Before that, the whole process, as a person starts it: the real ``sdschat --home DIR`` command on
   the same profile, in a pseudo-terminal of the same size, ``--runs`` times: from spawning it
   (interpreter start and imports included) to the first output that shows the channel list and the
   active channel's last message (and to its first output of any kind); median and max. Each run
   quits with Ctrl+Q once it has painted.
2. Two profiles on mosquitto, ``--channels`` channels each, the peer's bots
   sending ``--rate`` messages a second in all (round robin over the channels)
   from a process of their own: send-to-shown latency of the messages of the
   channel on screen (the send call to the first frame after the pane applied
   the message; both processes read the machine's monotonic clock), p50 and
   p99, and by stage.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import fcntl
import multiprocessing
import os
import pty
import re
import resource
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import sdschat.ui  # noqa: F401  (first: it sets Textual's frame rate, which Textual reads when imported)

# isort: split
from kit import Broker, percentile
from ui_history import FrameClock, fill, make_history, record_applied

from sdschat.cli.window import ProfileClient
from sdschat.cli.wiring import profile_node_config
from sdschat.node import Node
from sdschat.profile import Profile, resolve_paths
from sdschat.transport import EmbeddedBroker
from sdschat.ui.window import ChannelWindow

SIZE = (140, 40)


def channel_names(n: int) -> list[str]:
    return [f"chan-{i}" for i in range(n)]


async def _fill_profile(
    home: Path, broker_url: str, channels: int, messages: int, keep_days: float | None = None
) -> list[bytes]:
    profile = Profile.create(resolve_paths(home), "alice", broker_url)
    if keep_days is not None:  # (an embedded broker keeps no session: no MQTT 5 probe, as in earlier figures)
        profile.session_days = keep_days
        profile.save()
    secrets = []
    for i, name in enumerate(channel_names(channels)):
        secret = os.urandom(32)
        secrets.append(secret)
        entry = profile.add_channel(name, secret)
        node = await Node.start(profile_node_config(profile, entry, use_store=False))  # the channel's rows
        await node.stop()
        await fill(node.config.db_path, node.key, make_history(messages, seed=i + 1))
        profile.mark_read(name, int(time.time() * 1000))  # a history already read: unread counts what comes next
    return secrets


def fill_profile(
    home: str, broker_url: str, channels: int, messages: int, keep_days: float | None = None
) -> list[bytes]:
    return asyncio.run(_fill_profile(Path(home), broker_url, channels, messages, keep_days))


#: escape sequences (CSI, OSC, two-byte) taken out of what the terminal receives, leaving the painted text
ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_=>]")


def sdschat_command() -> str:
    """The installed ``sdschat`` console script of this interpreter's environment (the venv's)."""
    here = Path(sys.executable).with_name("sdschat")
    found = str(here) if here.exists() else shutil.which("sdschat")
    if found is None:
        raise SystemExit("bench: no `sdschat` command next to this Python (pip install -e . first)")
    return found


def first_paint_markers(messages: int) -> list[bytes]:
    """What the first useful frame of bare ``sdschat`` shows: the first channel's row in the channel list and the
    start of that channel's last message (its nick, then its first words: the line the view ends on)."""
    last = make_history(messages, seed=1)[-1]  # channel 0's history (see _fill_profile)
    return [b"Channels", f"#{channel_names(1)[0]}".encode(), f"{last.nick} {' '.join(last.text.split()[:5])}".encode()]


def process_first_paint(home: str, markers: list[bytes], timeout: float = 60.0) -> dict:
    """Spawn ``sdschat --home HOME`` in a pseudo-terminal of :data:`SIZE`; seconds from the spawn to its first
    output, and to the first output in which every marker is painted; then Ctrl+Q and wait for it to exit."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sdschat_command(), "--home", home],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    out = {"first_output_s": None, "paint_s": None, "exit": None}
    seen = b""
    try:
        while time.perf_counter() - t0 < timeout and out["paint_s"] is None:
            if not select.select([master], [], [], 0.02)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the child closed the terminal
                break
            now = time.perf_counter()
            if out["first_output_s"] is None:
                out["first_output_s"] = now - t0
            seen += chunk
            text = ESCAPES.sub(b"", seen).replace("\u00a0".encode(), b" ")
            if all(m in text for m in markers):
                out["paint_s"] = now - t0
        if out["paint_s"] is None:
            tail = ESCAPES.sub(b"", seen)[-800:].decode(errors="replace")
            raise SystemExit(f"bench: `sdschat` never painted {markers} within {timeout:.0f} s; it wrote: {tail!r}")
        os.write(master, b"\x11")  # Ctrl+Q
        deadline = time.perf_counter() + 60
        while proc.poll() is None and time.perf_counter() < deadline:  # keep reading: a full pty blocks its writes
            if select.select([master], [], [], 0.05)[0]:
                try:
                    os.read(master, 1 << 16)
                except OSError:
                    break
        out["exit"] = proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    return out


def process_runs(home: str, messages: int, runs: int) -> list[dict]:
    markers = first_paint_markers(messages)
    results = []
    for _ in range(runs):
        r = process_first_paint(home, markers)
        if r["exit"] != 0:
            raise SystemExit(f"bench: `sdschat` exited with status {r['exit']} after Ctrl+Q")
        results.append(r)
    return results


async def _until(pilot, predicate, timeout: float = 60.0) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("bench: timed out")
        await pilot.pause(0.005)


async def open_and_switch(work: Path, channels: int, messages: int, background: int, runs: int) -> dict:
    broker = await EmbeddedBroker.start()
    out: dict = {}
    try:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            t = time.perf_counter()
            secrets = await asyncio.get_running_loop().run_in_executor(
                pool, fill_profile, str(work / "alice"), broker.url, channels, messages, 0
            )  # the broker answers meanwhile
            out["fill_s"] = time.perf_counter() - t
        # the whole process first (its own connection to this broker, which keeps answering meanwhile)
        out["process"] = await asyncio.get_running_loop().run_in_executor(
            None, process_runs, str(work / "alice"), messages, runs
        )
        alice = Profile.load(resolve_paths(work / "alice"))
        bob = Profile.create(resolve_paths(work / "bob"), "bob", broker.url)
        bob.add_channel(channel_names(channels)[-1], secrets[-1])
        bobs = await ProfileClient.start(bob)

        t0 = time.perf_counter()
        client = await ProfileClient.start(alice, all_channels=False)  # as bare `sdschat` does
        out["client_start_s"] = time.perf_counter() - t0
        try:
            app = ChannelWindow(client, blink=False)
            clock = FrameClock(app)
            async with app.run_test(size=SIZE) as pilot:
                await _until(
                    pilot, lambda: app.active_pane() is not None and len(app.active_pane().view.timeline.items) > 0
                )
                mark = clock.mark()
                out["first_paint_s"] = await clock.next_frame(mark, 30) - t0
                out["shown"] = len(app.active_pane().view.timeline.items)
                await _until(pilot, lambda: len(app.panes) == channels, 300)
                out["all_up_s"] = time.perf_counter() - t0

                switches = []
                for _ in range(2):
                    for k in [*range(1, channels), 0]:
                        await pilot.pause()
                        mark = clock.mark()
                        t = time.perf_counter()
                        await pilot.press(f"alt+{k + 1}" if k < 9 else "alt+right")  # the 10th on: from the one before
                        pane = app.active_pane()
                        if pane is not app.panes[k]:
                            raise SystemExit(f"bench: the key did not switch to channel {k + 1}")
                        await _until(pilot, lambda p=pane: len(p.view.timeline.items) > 0)
                        switches.append(await clock.next_frame(mark, 30) - t)
                out["switch_ms"] = [s * 1000 for s in switches]
                out["first_switches_ms"] = out["switch_ms"][:channels]

                # channel 1 on screen; the peer talks in the last channel
                view = app.active_pane().view
                before = view.painted_lines
                rows = app.channel_list.rows
                for i in range(background):
                    await bobs.nodes[0].send_text(f"background message {i}")
                await _until(pilot, lambda: rows[-1].unread >= background, 30)
                await pilot.pause(0.3)
                out["background_unread"] = rows[-1].unread
                out["background_painted"] = view.painted_lines - before
                await pilot.press("ctrl+q")
        finally:
            await client.stop()
            await bobs.stop()
        out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    finally:
        await broker.close()
    return out


async def _bob(home: str, seconds: float, rate: float, start_at: float) -> int:
    bobs = await ProfileClient.start(Profile.load(resolve_paths(Path(home))))
    try:
        count = int(seconds * rate)
        while time.perf_counter() < start_at:
            await asyncio.sleep(0.01)
        for i in range(count):
            wait = start_at + i / rate - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            # CLOCK_MONOTONIC is the machine's: the window's process reads the same clock
            await bobs.nodes[i % len(bobs.nodes)].send_text(f"live {i} {time.perf_counter():.6f}")
        await asyncio.sleep(2)  # resends, acks
        return count
    finally:
        await bobs.stop()


def bob_process(home: str, seconds: float, rate: float, start_at: float) -> int:
    return asyncio.run(_bob(home, seconds, rate, start_at))


async def live_latency(work: Path, channels: int, seconds: float, rate: float) -> dict:
    broker = Broker(work / "mosquitto")
    broker.start()
    alices = pool = None
    try:
        # the peer's process, spawned before the app owns the terminal; it writes alice's history first (a
        # screenful and more in every channel, as in a profile in daily use)
        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        secrets = await asyncio.get_running_loop().run_in_executor(
            pool, fill_profile, str(work / "live-alice"), broker.url, channels, 200
        )
        alice = Profile.load(resolve_paths(work / "live-alice"))
        bob = Profile.create(resolve_paths(work / "live-bob"), "bob", broker.url)
        for name, secret in zip(channel_names(channels), secrets):
            bob.add_channel(name, secret)
        alices = await ProfileClient.start(alice)
        app = ChannelWindow(alices, blink=False)
        clock = FrameClock(app)
        sent: dict[str, float] = {}
        emitted: dict[str, float] = {}
        applied: dict[str, float] = {}

        def on_event(e) -> None:
            text = getattr(getattr(e, "message", None), "text", "")
            if text.startswith("live ") and text not in emitted:
                emitted[text] = time.perf_counter()
                sent[text] = float(text.rsplit(" ", 1)[1])

        alices.nodes[0].add_listener(on_event)
        async with app.run_test(size=SIZE) as pilot:
            record_applied(app.active_pane(), applied, sent.__contains__)
            await _until(pilot, lambda: all(r.connection == "connected" for r in app.channel_list.rows), 30)
            frames_from = clock.mark()
            start_at = time.perf_counter() + 3.0  # the peer's process and its channels start meanwhile
            count = await asyncio.get_running_loop().run_in_executor(
                pool, bob_process, str(work / "live-bob"), seconds, rate, start_at
            )
            expected = len(range(0, count, channels))
            await _until(pilot, lambda: len(applied) >= expected, 30)
            await pilot.pause(0.2)
            frames = clock.frames[frames_from:]
            latencies = []
            stages = {"to the receiving node": [], "to the pane": [], "to a frame": []}
            for text, t_sent in sent.items():
                t_applied = applied[text]
                shown = next((f for f in frames if f >= t_applied), None)
                if shown is not None:
                    latencies.append((shown - t_sent) * 1000)
                    stages["to the receiving node"].append((emitted[text] - t_sent) * 1000)
                    stages["to the pane"].append((t_applied - emitted[text]) * 1000)
                    stages["to a frame"].append((shown - t_applied) * 1000)
            await pilot.press("ctrl+q")
        return {
            "sent": count,
            "measured": len(latencies),
            "p50_ms": percentile(latencies, 0.5),
            "p99_ms": percentile(latencies, 0.99),
            "max_ms": max(latencies),
            "stages": {k: (percentile(v, 0.5), percentile(v, 0.99)) for k, v in stages.items()},
        }
    finally:
        if pool is not None:
            pool.shutdown()
        if alices is not None:
            await alices.stop()
        broker.kill()


def main() -> int:
    global SIZE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=10)
    ap.add_argument("--messages", type=int, default=100_000, help="history of each channel")
    ap.add_argument("--runs", type=int, default=5, help="whole-process launches of `sdschat` timed to first paint")
    ap.add_argument("--background", type=int, default=20, help="messages sent into a background channel")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the live part")
    ap.add_argument("--rate", type=float, default=50.0, help="live messages a second, all channels together")
    ap.add_argument("--size", default=f"{SIZE[0]}x{SIZE[1]}", help="the terminal, COLUMNSxROWS (e.g. 80x24)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    a = ap.parse_args()
    SIZE = tuple(int(n) for n in a.size.lower().split("x"))
    if a.smoke:
        a.channels, a.messages, a.background, a.seconds, a.rate, a.runs = 3, 300, 3, 2.0, 20.0, 2
    with tempfile.TemporaryDirectory(prefix="sdschat-window-bench-") as tmp:
        r = asyncio.run(open_and_switch(Path(tmp), a.channels, a.messages, a.background, a.runs))
        sw = r["switch_ms"]
        print(
            f"profile: {a.channels} channels x {a.messages:,} messages (written in {r['fill_s']:.1f} s); "
            f"window {SIZE[0]}x{SIZE[1]} (headless App.run_test)"
        )
        paint = [x["paint_s"] * 1000 for x in r["process"]]
        first = [x["first_output_s"] * 1000 for x in r["process"]]
        if paint:  # (--runs 0: not timed)
            print(
                f"whole process, `sdschat --home DIR` in a {SIZE[0]}x{SIZE[1]} pty, spawn to first paint (channel list "
                f"and the last message on screen): {statistics.median(paint):.0f} ms median, {max(paint):.0f} ms "
                f"max over {len(paint)} runs [target < 1000 ms] (first output {statistics.median(first):.0f} ms "
                f"median; runs: {', '.join(f'{x:.0f}' for x in paint)} ms)"
            )
        print(
            f"first paint: {r['first_paint_s'] * 1000:.0f} ms from starting the client "
            f"(client up in {r['client_start_s'] * 1000:.0f} ms; {r['shown']:,} messages in the active view) "
            f"[target < 1000 ms]; all {a.channels} channels up after {r['all_up_s']:.1f} s"
        )
        print(
            f"channel switch: {statistics.median(sw):.1f} ms median, {max(sw):.1f} ms max over {len(sw)} "
            f"switches (first visits: {', '.join(f'{x:.0f}' for x in r['first_switches_ms'])} ms) [target < 50 ms]"
        )
        print(
            f"background channel: {r['background_unread']} messages arrived (unread counted), active view "
            f"repainted {r['background_painted']} lines [target 0]"
        )
        print(f"peak RSS: {r['rss_mb']:.0f} MB [target < 300 MB]")
        live = asyncio.run(live_latency(Path(tmp), a.channels, a.seconds, a.rate))
        print(
            f"live, two profiles on mosquitto, {a.channels} channels each, {a.rate:g} msg/s for {a.seconds:g} s: "
            f"send-to-shown in the channel on screen p50 {live['p50_ms']:.1f} ms, p99 {live['p99_ms']:.1f} ms, "
            f"max {live['max_ms']:.1f} ms ({live['measured']} of {live['sent']} messages) [target p99 < 20 ms]"
        )
        print("  stages, p50 / p99 ms: " + "; ".join(f"{k} {a:.1f} / {b:.1f}" for k, (a, b) in live["stages"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
