"""How fast the chat's message view is with a 100,000-message history (headless).

    .venv/bin/python bench/ui_history.py [--messages 100000] [--size 120x40] [--smoke]

Prints: open (load + first paint), append one message (model + layout +
repaint), repaint after one acknowledgement (the one line), and how many
lines each step painted, for the real ``MessageView`` inside ``App.run_test``;
then the whole chat screen on a real node whose database holds the history:
start-up with it, and a sent message from the node's event to the screen.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import random
import statistics
import tempfile
import time
from pathlib import Path

from textual.app import App, ComposeResult

from sdschat.node import events as ev
from sdschat.ui.widgets.message_view import MessageView

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
)


def make_history(n: int, seed: int = 1) -> list[ev.ChatMessage]:
    rng = random.Random(seed)
    senders = [(f"{i:02x}" * 32, nick) for i, nick in enumerate(("alice", "bob", "carol", "dave", "erin"))]
    t0 = 1_763_800_000_000
    out = []
    for i in range(n):
        pid, nick = senders[i % len(senders)]
        words = rng.randint(2, 30)
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        own = pid == senders[0][0]
        out.append(
            ev.ChatMessage(
                f"{i:064x}", pid, nick, text, "msg", t0 + i * 1000, i + 1, own, ev.ACKNOWLEDGED if own else ev.RECEIVED
            )
        )
    return out


class BenchApp(App):
    def compose(self) -> ComposeResult:
        yield MessageView(id="view")


def record_applied(pane, applied: dict[str, float], wanted) -> None:
    """Wrap ``pane.apply_events``: ``applied[text]`` is when a message whose text ``wanted(text)`` accepts was
    first applied to the pane (perf_counter), for send-to-shown latencies."""
    original = pane.apply_events

    def apply_events(events):
        original(events)
        now = time.perf_counter()
        for e in events:
            text = getattr(getattr(e, "message", None), "text", "")
            if text and text not in applied and wanted(text):
                applied[text] = now

    pane.apply_events = apply_events


class FrameClock:
    """Times when Textual actually writes a frame (wraps ``App._display``)."""

    def __init__(self, app: App) -> None:
        self.frames: list[float] = []
        original = app._display

        def display(screen, renderable) -> None:
            original(screen, renderable)
            self.frames.append(time.perf_counter())

        app._display = display

    def mark(self) -> int:
        return len(self.frames)

    async def frame_after(self, t: float, timeout: float = 5.0) -> float:
        """The first frame written at or after ``t`` (perf_counter): for a change made where the bench cannot
        see it happen (a worker), its frame may be written before the bench notices the change."""
        deadline = time.perf_counter() + timeout
        while True:
            i = bisect.bisect_left(self.frames, t)
            if i < len(self.frames):
                return self.frames[i]
            if time.perf_counter() > deadline:
                raise TimeoutError("no frame")
            await asyncio.sleep(0.0005)

    async def next_frame(self, mark: int, timeout: float = 5.0) -> float:
        deadline = time.perf_counter() + timeout
        while len(self.frames) <= mark:
            if time.perf_counter() > deadline:
                raise TimeoutError("no frame")
            await asyncio.sleep(0.0005)
        return self.frames[mark]


async def run(n: int, width: int, height: int, appends: int) -> dict:
    history = make_history(n)
    app = BenchApp()
    out: dict = {}
    async with app.run_test(size=(width, height)) as pilot:
        clock = FrameClock(app)
        view = app.query_one(MessageView)
        await pilot.pause()
        mark = clock.mark()
        t = time.perf_counter()
        view.load(history)
        out["load_s"] = time.perf_counter() - t
        out["open_s"] = await clock.next_frame(mark) - t
        await pilot.pause()
        out["lines"] = view.line_count
        out["open_painted"] = view.painted_lines

        commits, frames = [], []
        last = history[-1]
        for k in range(appends):
            msg = ev.ChatMessage(
                f"f{k:063x}",
                last.sender_id,
                "alice",
                f"appended message {k} " * 3,
                "msg",
                last.sent_at_ms + 1000 * (k + 1),
                last.lamport_timestamp + k + 1,
                True,
                ev.UNACKNOWLEDGED,
            )
            mark = clock.mark()
            t = time.perf_counter()
            view.timeline.add_message(msg)
            view.commit(new_messages=1)
            commits.append(time.perf_counter() - t)
            frames.append(await clock.next_frame(mark) - t)
            await pilot.pause()
        out["append_commit_ms"] = statistics.median(commits) * 1000
        out["append_frame_ms"] = statistics.median(frames) * 1000
        out["append_frame_max_ms"] = max(frames) * 1000

        commits, frames, painted, partial = [], [], [], []
        for k in range(appends):
            mid = f"f{k:063x}"
            before, before_p = view.painted_lines, view.partial_refreshes
            mark = clock.mark()
            t = time.perf_counter()
            view.timeline.set_state(mid, ev.ACKNOWLEDGED)
            view.commit()
            commits.append(time.perf_counter() - t)
            if view.partial_refreshes > before_p:  # visible: wait for the frame that shows it
                frames.append(await clock.next_frame(mark) - t)
            await pilot.pause()
            painted.append(view.painted_lines - before)
            partial.append(view.partial_refreshes - before_p)
        out["ack_commit_ms"] = statistics.median(commits) * 1000
        out["ack_frame_ms"] = statistics.median(frames) * 1000 if frames else float("nan")
        out["ack_visible"] = len(frames)
        out["ack_lines_painted"] = max(painted)

        # a repair in the middle of the history (a message sliding into its Lamport place)
        mid_l = history[n // 2].lamport_timestamp
        msg = ev.ChatMessage(
            "0" * 63 + "g",
            history[1].sender_id,
            "bob",
            "repaired in the middle",
            "msg",
            history[n // 2].sent_at_ms,
            mid_l,
            False,
            ev.RECEIVED,
            repaired=True,
        )
        t = time.perf_counter()
        view.timeline.add_message(msg)
        view.commit()
        out["insert_middle_ms"] = (time.perf_counter() - t) * 1000
    return out


async def fill(node_db: Path, key, history: list[ev.ChatMessage]) -> None:
    """Write a history into a node's database through the store's public API, messages and the engine's log
    (a real send loop would take minutes for 100,000 messages); the node reads it back as any history."""
    from sdschat.node import AppPayload
    from sdschat.sds.state import LogRow
    from sdschat.store import MessageRow, Store

    store = await Store.open(node_db)
    try:
        for i in range(0, len(history), 5_000):
            page = history[i : i + 5_000]
            rows = [
                MessageRow(
                    m.message_id,
                    m.sender_id,
                    m.lamport_timestamp,
                    AppPayload(m.kind, m.nick, m.text, m.sent_at_ms).encode(),
                    m.state,
                    received_at_ms=m.sent_at_ms,
                )
                for m in page
            ]
            # the engine's log holds them too, as it would after a real conversation (restored at start-up)
            ops = [("log", m.message_id, LogRow(m.message_id, m.lamport_timestamp, m.sender_id)) for m in page]
            ops.append(("lamport", None, page[-1].lamport_timestamp))
            await store.apply(key.channel_id, ops, messages=rows)
    finally:
        await store.close()


async def _screen(node, emitted: list, width: int, height: int, appends: int) -> dict:
    from sdschat.ui.app import ChatApp

    out: dict = {}
    app = ChatApp(node, blink=False)
    t = time.perf_counter()
    async with app.run_test(size=(width, height)) as pilot:
        clock = FrameClock(app)
        view = app.pane.view
        await pilot.pause()
        out["open_s"] = time.perf_counter() - t  # app start, node.history(), load, first frames
        out["shown"] = len(view.timeline.items)
        frames = []
        for k in range(appends):
            emitted.clear()
            mark = clock.mark()
            await node.send_text(f"sent from the screen {k}")
            shown = next(at for kind, at in emitted if kind is ev.MessageShown)
            frames.append(await clock.next_frame(mark) - shown)
            await pilot.pause()
        out["append_ms"] = statistics.median(frames) * 1000
    return out


async def run_chat_screen(n: int, width: int, height: int, appends: int) -> dict:
    """The same through the whole chat screen on a real node (SQLite file, embedded broker): node event ->
    bridge -> pane handler -> view -> frame."""
    from sdschat.crypto import ChannelKey
    from sdschat.node import Node, NodeConfig
    from sdschat.transport import EmbeddedBroker

    broker = await EmbeddedBroker.start()
    key = ChannelKey.generate("bench")
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="sdschat-ui-bench-") as tmp:
        db = Path(tmp) / "alice.db"
        node = await Node.start(NodeConfig("alice", key, db, broker.url))  # creates the channel's rows
        await node.stop()
        await fill(db, key, make_history(n))
        node = await Node.start(NodeConfig("alice", key, db, broker.url))
        emitted: list[tuple[type, float]] = []
        node.add_listener(lambda e: emitted.append((type(e), time.perf_counter())))
        try:
            out.update(await _screen(node, emitted, width, height, appends))
        finally:
            await node.stop()
            await broker.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--appends", type=int, default=20)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    a = ap.parse_args()
    if a.smoke:
        a.messages, a.appends = 2_000, 3
    w, h = (int(x) for x in a.size.split("x"))
    r = asyncio.run(run(a.messages, w, h, a.appends))
    print(f"history: {a.messages:,} messages, {r['lines']:,} lines at {w}x{h} (headless App.run_test)")
    print(
        f"open: load + layout {r['load_s'] * 1000:.0f} ms, first frame on screen after {r['open_s'] * 1000:.0f} ms"
        f" ({r['open_painted']} lines painted)"
    )
    print(
        f"append one message: commit {r['append_commit_ms']:.2f} ms, on screen after {r['append_frame_ms']:.1f} ms"
        f" median ({r['append_frame_max_ms']:.1f} ms max)"
    )
    print(
        f"one ack: commit {r['ack_commit_ms']:.2f} ms, on screen after {r['ack_frame_ms']:.1f} ms median;"
        f" {r['ack_lines_painted']} line(s) repainted"
    )
    print(f"repair sliding into the middle of the history: commit {r['insert_middle_ms']:.1f} ms")
    c = asyncio.run(run_chat_screen(a.messages, w, h, a.appends))
    print(
        f"whole chat screen on a real node (node event -> bridge -> pane -> view): app up with "
        f"{c['shown']:,} messages from its database in {c['open_s'] * 1000:.0f} ms; a sent message on screen "
        f"{c['append_ms']:.1f} ms after the node emits it"
    )


if __name__ == "__main__":
    main()
