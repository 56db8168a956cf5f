"""The message view: big histories, one-line repaints, sticking to the bottom, "N new", restarts."""

from __future__ import annotations

import random
import time

from textual.app import App, ComposeResult
from ui_helpers import UTC, cluster, line_with, lines_of, wait_until, widget_text

from sdschat.node import events as ev
from sdschat.ui.app import ChatApp
from sdschat.ui.widgets import MessageView, StatusLine

WORDS = ("ack", "bloom", "lamport", "causal", "repair", "resend", "gap", "sync", "hello", "there", "message")


def history(n: int) -> list[ev.ChatMessage]:
    rng = random.Random(5)
    senders = [(f"{i:02x}" * 16, nick) for i, nick in enumerate(("alice", "bob", "carol"))]
    out = []
    for i in range(n):
        pid, nick = senders[i % 3]
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 25)))
        out.append(
            ev.ChatMessage(
                f"{i:064x}",
                pid,
                nick,
                text,
                "msg",
                1_763_805_600_000 + i * 1000,
                i + 1,
                i % 3 == 0,
                ev.ACKNOWLEDGED if i % 3 == 0 else ev.RECEIVED,
            )
        )
    return out


class ViewApp(App):
    def compose(self) -> ComposeResult:
        yield MessageView(tz=UTC)


def test_a_100k_history_opens_fast_and_one_ack_repaints_one_line(run) -> None:
    msgs = history(100_000)

    async def scenario():
        app = ViewApp()
        async with app.run_test(size=(120, 40)) as pilot:
            view = app.query_one(MessageView)
            await pilot.pause()
            # what makes it fast, not how long it took (the times are bench/ui_history.py's): only what is on
            # screen is painted
            t = time.process_time()
            view.load(msgs)
            await pilot.pause()
            print(f"opened 100,000 messages in {time.process_time() - t:.2f}s of CPU")
            assert view.painted_lines <= 45  # only what is on screen
            assert view.visible_text()[-1] or view.visible_text()[-2]  # at the bottom, not blank

            last = msgs[-1]
            mine = ev.ChatMessage(
                "f" * 64,
                last.sender_id,
                "alice",
                "a new one",
                "msg",
                last.sent_at_ms + 1000,
                last.lamport_timestamp + 1,
                True,
                ev.UNACKNOWLEDGED,
            )
            painted = view.painted_lines
            view.timeline.add_message(mine)
            view.commit(to_bottom=True)
            await pilot.pause()
            assert view.painted_lines - painted <= 45  # a new line at the end: at most the screen, not the history
            assert "○" in view.visible_text()[-1]

            painted, regions = view.painted_lines, view.partial_refreshes
            view.timeline.set_state(mine.message_id, ev.ACKNOWLEDGED)
            view.commit()
            await pilot.pause()
            assert view.painted_lines - painted == 1  # the one line of that message
            assert view.partial_refreshes - regions == 1
            assert "●" in view.visible_text()[-1]

    run(scenario())


def test_scrolled_up_view_stays_put_and_counts_new_messages(run) -> None:
    msgs = history(300)

    async def scenario():
        app = ViewApp()
        async with app.run_test(size=(100, 20)) as pilot:
            view = app.query_one(MessageView)
            view.load(msgs)
            await pilot.pause()
            assert view.at_bottom
            view.scroll_to(y=100, animate=False)
            await pilot.pause()
            assert not view.at_bottom
            top = view.visible_text()[0]
            last = msgs[-1]
            for k in range(3):
                view.timeline.add_message(
                    ev.ChatMessage(
                        f"n{k}",
                        last.sender_id,
                        "bob",
                        f"new {k}",
                        "msg",
                        last.sent_at_ms,
                        last.lamport_timestamp + 1 + k,
                        False,
                        ev.RECEIVED,
                    )
                )
                view.commit(new_messages=1)
            # a repaired message slides in above the viewport: what the user reads does not move
            view.timeline.add_message(
                ev.ChatMessage(
                    "r",
                    last.sender_id,
                    "bob",
                    "repaired early",
                    "msg",
                    msgs[0].sent_at_ms,
                    1,
                    False,
                    ev.RECEIVED,
                    repaired=True,
                )
            )
            view.commit()
            await pilot.pause()
            assert view.visible_text()[0] == top
            assert view.new_below == 3
            view.scroll_to_latest()
            await pilot.pause()
            assert view.new_below == 0 and "new 2" in view.visible_text()[-1]

    run(scenario())


def test_new_indicator_in_the_chat_screen_and_history_after_restart(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            for i in range(60):
                await bob.send_text(f"backlog {i}")
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(100, 24)) as pilot:
                await wait_until(pilot, lambda: len(alice.messages()) == 60, what="backlog")
                view = app.pane.view
                await pilot.press("pageup", "pageup")
                assert not view.at_bottom
                await bob.send_text("while you were reading")
                status = app.pane.query_one(StatusLine)
                await wait_until(pilot, lambda: "↓ 1 new" in widget_text(status), what="N new")
                await pilot.press("ctrl+end")
                await pilot.pause()
                assert view.at_bottom and "while you were reading" in view.visible_text()[-1].replace("\xa0", " ")
                assert "↓" not in widget_text(status)
            key = alice.key
        # the same database again: the history comes back (from node.messages()) in Lamport order
        async with cluster(tmp_path, key=key) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(100, 24)) as pilot:
                await pilot.pause()
                lines = lines_of(app)
                assert lines.index(line_with(lines, "backlog 0")) < lines.index(line_with(lines, "backlog 59"))
                assert line_with(lines, "while you were reading")

    run(scenario())


def test_a_message_at_the_end_of_a_long_history_leaves_the_scrollbar_unpainted(run) -> None:
    """Every message changes the scroll range and position; on a long history the thumb stays where it is on
    screen, so the bar is not repainted (it was 1-3 ms of the frame showing the message). On a short one the
    thumb moves and is repainted."""

    async def scenario():
        for size, expect_repaints in ((20_000, False), (40, True)):
            app = ViewApp()
            async with app.run_test(size=(100, 30)) as pilot:
                view = app.query_one(MessageView)
                view.load(history(size))
                await pilot.pause()
                bar = view.vertical_scrollbar
                assert bar.display
                last = view.timeline.items[-1].msg
                repaints = []
                original = bar.refresh
                for i in range(6):
                    if i == 1:  # the first tells the bar the loaded range: count from the second on
                        bar.refresh = lambda *a, **k: (repaints.append(1), original(*a, **k))[1]
                    view.timeline.add_message(
                        ev.ChatMessage(
                            f"{i:064x}"[::-1],
                            last.sender_id,
                            "bob",
                            f"new {i}",
                            "msg",
                            last.sent_at_ms + 1000 * (i + 1),
                            last.lamport_timestamp + i + 1,
                            False,
                            ev.RECEIVED,
                        )
                    )
                    view.commit(to_bottom=True)
                    await pilot.pause()
                bar.refresh = original
                assert "new 5" in view.visible_text()[-1] or "new 5" in view.visible_text()[-2]
                assert bar.window_virtual_size == view.virtual_size.height  # the bar knows the new range
                assert bar.position == bar.validate_position(view.scroll_y)
                assert len(repaints) == (5 if expect_repaints else 0), (size, len(repaints))

    run(scenario())
