"""How fast the chat's message view is with a 100,000-message history (headless).

    .venv/bin/python bench/ui_history.py [--messages 100000] [--size 120x40]

Prints: open (load + first paint), append one message (model + layout +
repaint), repaint after one acknowledgement (the one line), and how many
lines each step painted. Runs the real ``MessageView`` inside ``App.run_test``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from textual.app import App, ComposeResult

from sdschat.node import events as ev
from sdschat.ui.widgets.message_view import MessageView

WORDS = ("ack", "bloom", "lamport", "causal", "history", "repair", "resend", "gap", "sync", "buffer", "hello",
         "there", "reliable", "message", "delivered", "missing", "filter", "peer", "channel", "epoch")


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
        out.append(ev.ChatMessage(f"{i:064x}", pid, nick, text, "msg", t0 + i * 1000, i + 1, own,
                                  ev.ACKNOWLEDGED if own else ev.RECEIVED))
    return out


class BenchApp(App):
    def compose(self) -> ComposeResult:
        yield MessageView(id="view")


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
            msg = ev.ChatMessage(f"f{k:063x}", last.sender_id, "alice", f"appended message {k} " * 3, "msg",
                                 last.sent_at_ms + 1000 * (k + 1), last.lamport_timestamp + k + 1, True,
                                 ev.UNACKNOWLEDGED)
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
        msg = ev.ChatMessage("0" * 63 + "g", history[1].sender_id, "bob", "repaired in the middle", "msg",
                             history[n // 2].sent_at_ms, mid_l, False, ev.RECEIVED, repaired=True)
        t = time.perf_counter()
        view.timeline.add_message(msg)
        view.commit()
        out["insert_middle_ms"] = (time.perf_counter() - t) * 1000
    return out


class StubNode:
    """The node API the chat screen uses, over a prepared history (no network, no database)."""

    def __init__(self, history: list[ev.ChatMessage]) -> None:
        self.history = history
        self.nick = "alice"
        self.participant_id = history[0].sender_id
        self.broker_url = "mqtt://bench"
        self.listeners = []
        self.failure = None

        class _Imp:
            loss_in = loss_out = delay_ms = jitter_ms = duplicate = 0.0
            offline = False

        self.impairment = _Imp()

    def messages(self):
        return sorted(self.history, key=lambda m: (m.lamport_timestamp, m.message_id))  # as Node.messages() does

    def participants(self):
        return []

    def health(self):
        return {"connection": "connected", "log": len(self.history)}

    def add_listener(self, cb):
        self.listeners.append(cb)
        return lambda: None

    def emit(self, event) -> None:  # what Node._emit does, on the loop thread
        for cb in self.listeners:
            cb(event)

    def set_impairment(self, **kw):
        pass

    def set_nick(self, nick):
        self.nick = nick

    async def send_text(self, text, kind="msg"):
        return ""

    async def send_typing(self):
        pass


async def run_chat_screen(n: int, width: int, height: int, appends: int) -> dict:
    """The same through the whole chat screen: node event -> bridge -> pane handler -> view -> frame."""
    from sdschat.ui.app import ChatApp

    node = StubNode(make_history(n))
    app = ChatApp(node, blink=False)
    out: dict = {}
    t = time.perf_counter()
    async with app.run_test(size=(width, height)) as pilot:
        clock = FrameClock(app)
        view = app.pane.view
        await pilot.pause()
        out["open_s"] = time.perf_counter() - t  # app start, node.messages(), load, first frames
        last = node.history[-1]
        frames = []
        for k in range(appends):
            msg = ev.ChatMessage(f"e{k:063x}", last.sender_id, "alice", f"sent from the screen {k}", "msg",
                                 last.sent_at_ms + 1000, last.lamport_timestamp + k + 1, True, ev.UNACKNOWLEDGED)
            mark = clock.mark()
            t = time.perf_counter()
            node.emit(ev.MessageShown(msg))
            frames.append(await clock.next_frame(mark) - t)
            await pilot.pause()
        out["append_ms"] = statistics.median(frames) * 1000
        frames = []
        for k in range(appends):
            before = view.painted_lines
            mark = clock.mark()
            t = time.perf_counter()
            node.emit(ev.AckStateChanged(f"e{k:063x}", ev.ACKNOWLEDGED))
            if view.at_bottom:
                frames.append(await clock.next_frame(mark) - t)
            await pilot.pause()
        out["ack_ms"] = statistics.median(frames) * 1000 if frames else float("nan")
        out["ack_lines"] = view.painted_lines - before
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--appends", type=int, default=20)
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    r = asyncio.run(run(a.messages, w, h, a.appends))
    print(f"history: {a.messages:,} messages, {r['lines']:,} lines at {w}x{h} (headless App.run_test)")
    print(f"open: load + layout {r['load_s'] * 1000:.0f} ms, first frame on screen after {r['open_s'] * 1000:.0f} ms"
          f" ({r['open_painted']} lines painted)")
    print(f"append one message: commit {r['append_commit_ms']:.2f} ms, on screen after {r['append_frame_ms']:.1f} ms"
          f" median ({r['append_frame_max_ms']:.1f} ms max)")
    print(f"one ack: commit {r['ack_commit_ms']:.2f} ms, on screen after {r['ack_frame_ms']:.1f} ms median;"
          f" {r['ack_lines_painted']} line(s) repainted")
    print(f"repair sliding into the middle of the history: commit {r['insert_middle_ms']:.1f} ms")
    c = asyncio.run(run_chat_screen(a.messages, w, h, a.appends))
    print(f"whole chat screen (node event -> bridge -> pane -> view): app up with the history in {c['open_s'] * 1000:.0f} ms;"
          f" append on screen after {c['append_ms']:.1f} ms; ack on screen after {c['ack_ms']:.1f} ms"
          f" ({c['ack_lines']} line repainted)")

if __name__ == "__main__":
    main()
