"""The chat screen driving real nodes over an embedded broker: what a person sees."""

from __future__ import annotations

import json

from ui_helpers import cluster, fast_config, line_with, lines_of, wait_until, wait_until_node, widget_text

from sdschat.node import events as ev
from sdschat.ui.app import ChatApp
from sdschat.ui.messages import NodeEventsReady
from sdschat.ui.screens import HelpScreen, StatsScreen
from sdschat.ui.widgets import StatusLine

SIZE = (120, 30)  # the side panel shows from 120 columns (sdschat.ui.sizes)


async def miss_one(pilot, app, alice, bob, missed: str, after: str) -> None:
    """alice misses bob's ``missed``; his ``after`` names it, so it shows at once under a marker."""
    alice.set_impairment(loss_in=1.0)
    await bob.send_text(missed)
    await pilot.pause(0.3)
    alice.set_impairment(loss_in=0.0)
    await bob.send_text(after)
    await wait_until(pilot, lambda: line_with(lines_of(app), "possibly missing"), what="marker")


def glyph(line: str | None) -> str:
    """The state column of a message line ("HH:MM g...")."""
    assert line is not None
    return line[6]


def test_own_message_goes_from_unacknowledged_to_acknowledged_when_a_peer_replies(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                bob.set_impairment(loss_out=1.0)  # bob hears alice but cannot acknowledge yet
                await pilot.press(*"hello bob", "enter")
                seen = []

                def state() -> str | None:
                    line = line_with(lines_of(app), "hello bob")
                    if line is not None and (not seen or seen[-1] != glyph(line)):
                        seen.append(glyph(line))
                    return line

                await wait_until(pilot, lambda: state() is not None, what="own message shown")
                await pilot.pause(0.1)
                state()
                assert seen[0] in "◌○", seen  # sending, then unacknowledged: nobody has it yet
                await wait_until(pilot, lambda: line_with(bob_lines(bob), "hello bob"), what="bob received")
                await pilot.pause(0.2)
                assert glyph(state()) in "○↻"
                bob.set_impairment(loss_out=0.0)
                await bob.send_text("hi alice")
                await wait_until(pilot, lambda: state() and glyph(state()) == "●", what="acknowledged glyph")
                assert "○" in seen and seen[-1] == "●", seen
                assert line_with(lines_of(app), "hi alice")
                assert app.errors == []

    def bob_lines(bob):
        return [m.text for m in bob.messages()]

    run(scenario())


def test_missing_marker_appears_then_repair_slides_the_message_into_place(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("everyone gets this")
                await wait_until(pilot, lambda: line_with(lines_of(app), "everyone gets this"), what="first")
                await miss_one(pilot, app, alice, bob, "alice misses this", "did you see my last one?")
                lines = lines_of(app)
                marker = lines.index(line_with(lines, "possibly missing"))
                assert "1 message possibly missing · from bob" in lines[marker]
                assert "did you see my last one?" in lines[marker + 1]  # shown at once, under its marker
                assert glyph(lines[marker + 1]) == "⋯"  # waiting for its dependency
                assert not line_with(lines, "alice misses this")

                await wait_until(
                    pilot, lambda: not line_with(lines_of(app), "possibly missing"), timeout=8, what="repair"
                )
                lines = lines_of(app)
                repaired = line_with(lines, "alice misses this")
                assert repaired is not None and "↺ repaired" in repaired
                assert lines.index(repaired) < lines.index(line_with(lines, "did you see my last one?"))
                assert glyph(line_with(lines, "did you see my last one?")) == " "
                item = app.pane.view.timeline.by_mid[
                    [m for m in alice.messages() if m.text == "alice misses this"][0].message_id
                ]
                assert item.highlight_until_ms > 0  # briefly highlighted
                assert app.errors == []

    run(scenario())


def test_gap_filled_from_the_store_node_is_tagged_so(tmp_path, run) -> None:
    """With a store node on the broker, a missed message comes from it (by retrieval hint, before SDS-R's
    T_req is due): the line says "filled from the store", not "repaired ... (SDS-R)"."""
    from sdschat.storenode import StoreNode

    # the node's real SDS-R timing (T_min 2 s) and no early resends, so only the store can fill the gap first
    slow = fast_config(
        repair_t_min_ms=2_000,
        repair_t_max_ms=10_000,
        resend_unacknowledged_ms=60_000,
        resend_possibly_acknowledged_ms=60_000,
    )

    async def scenario():
        async with cluster(tmp_path, configs={"alice": slow, "bob": slow}) as (alice, bob):
            store = await StoreNode.start(alice.broker_url, tmp_path / "store.db")
            try:
                app = ChatApp(alice, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    await bob.send_text("everyone gets this")
                    await wait_until(pilot, lambda: line_with(lines_of(app), "everyone gets this"), what="first")
                    alice.set_impairment(loss_in=1.0)
                    await bob.send_text("the store keeps this")
                    await wait_until(pilot, lambda: store.counters["stored"] >= 2, what="stored")
                    await pilot.pause(0.1)
                    alice.set_impairment(loss_in=0.0)
                    await bob.send_text("next one")
                    await wait_until(
                        pilot, lambda: line_with(lines_of(app), "the store keeps this"), timeout=4, what="gap filled"
                    )
                    line = line_with(lines_of(app), "the store keeps this")
                    assert "↺ filled from the store" in line, line
                    assert "SDS-R" not in line
                    lines = lines_of(app)
                    assert lines.index(line) < lines.index(line_with(lines, "next one"))
                    assert not line_with(lines, "possibly missing")
                    assert alice.store_counters["repaired"] == 1 and alice.channel.stats["repairs_requested"] == 0
                    assert app.errors == []
            finally:
                await store.stop()

    run(scenario())


def test_gap_marker_is_the_same_after_a_restart(tmp_path, run) -> None:
    """A message waiting on a missed one shows "1 message possibly missing · from bob" above it; after alice
    restarts, the marker her node rebuilds from its database says the same, in the same place."""
    from sdschat.node import Node

    # nothing repairs the gap during the test: no early resends, SDS-R's T_req far away
    slow = fast_config(
        repair_t_min_ms=60_000,
        repair_t_max_ms=120_000,
        resend_unacknowledged_ms=60_000,
        resend_possibly_acknowledged_ms=60_000,
    )

    def marker_and_next(lines):
        marker = line_with(lines, "possibly missing")
        return marker, lines[lines.index(marker) + 1] if marker is not None else None

    async def scenario():
        async with cluster(tmp_path, configs={"alice": slow, "bob": slow}) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await miss_one(pilot, app, alice, bob, "never arrives", "the one after it")
                live = marker_and_next(lines_of(app))
            assert "1 message possibly missing · from bob" in live[0] and "the one after it" in live[1], live
            gaps = alice.open_gaps()
            assert len(gaps) == 1 and gaps[0].senders == (bob.participant_id,)
            config = alice.config
            await alice.stop()
            again = await Node.start(config)
            try:
                assert again.open_gaps() == gaps  # the engine state came back from the database
                app = ChatApp(again, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    await wait_until(pilot, lambda: line_with(lines_of(app), "the one after it"), what="history")
                    assert marker_and_next(lines_of(app)) == live
                    assert app.errors == []
            finally:
                await again.stop()

    run(scenario())


def test_marker_turns_into_lost_when_the_sender_never_comes_back(tmp_path, run) -> None:
    async def scenario():
        configs = {"alice": fast_config(lost_after_ms=700), "bob": fast_config(resend_unacknowledged_ms=5_000)}
        async with cluster(tmp_path, configs=configs) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await miss_one(pilot, app, alice, bob, "never arrives", "the one after it")
                bob.set_impairment(offline=True)  # and bob is gone for good: nobody can repair
                await wait_until(pilot, lambda: line_with(lines_of(app), "lost"), timeout=8, what="lost marker")
                lines = lines_of(app)
                lost = line_with(lines, "lost")
                assert "✗ 1 message lost · from bob" in lost
                assert not line_with(lines, "possibly missing")
                after = line_with(lines, "the one after it")
                assert lines.index(after) == lines.index(lost) + 1 and glyph(after) == " "  # delivered, marked
                assert lines[lines.index(lost) - 1].startswith("──")  # the day separator stays above the marker
                assert not line_with(lines, "never arrives")

    run(scenario())


def test_slash_commands(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice",)) as (alice,):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:

                async def command(text: str) -> None:
                    app.pane.input.load_text(text)
                    await pilot.press("enter")
                    await pilot.pause(0.05)

                await command("/nick carol")
                assert alice.nick == "carol"
                assert line_with(lines_of(app), "you are now known as carol")
                await pilot.pause()
                assert app.sub_title.endswith("carol")

                await command("/loss 30% 0.1")
                assert (alice.impairment.loss_in, alice.impairment.loss_out) == (0.3, 0.1)
                assert line_with(lines_of(app), "link: loss in 30% out 10%")

                await command("/delay 120 30")
                assert (alice.impairment.delay_ms, alice.impairment.jitter_ms) == (120, 30)

                await command("/offline")
                assert alice.impairment.offline is True
                await pilot.pause()
                assert "offline (you)" in widget_text(app.pane.query_one("SidePanel"))
                await command("/online")
                assert alice.impairment.offline is False

                await command("/loss lots")
                assert line_with(lines_of(app), "not a probability")
                await command("/frobnicate")
                assert line_with(lines_of(app), "unknown command /frobnicate")

                await command("/me waves")
                await wait_until(pilot, lambda: line_with(lines_of(app), "carol waves"), what="/me shown")
                assert alice.messages()[-1].kind == "me"

                out = tmp_path / "log.jsonl"
                await command(f"/export {out}")
                await wait_until(pilot, lambda: line_with(lines_of(app), "exported 1 messages"), what="export")
                assert json.loads(out.read_text().splitlines()[0])["text"] == "waves"

                await command("/stats")
                assert isinstance(app.screen, StatsScreen)
                await pilot.press("escape")
                await command("/help")
                assert isinstance(app.screen, HelpScreen)
                await pilot.press("escape")
                assert not isinstance(app.screen, HelpScreen)

                await command("/quit")
                await pilot.pause()
            assert app.return_code == 0
            assert app.errors == []

    run(scenario())


def test_input_newlines_history_and_completion(fake_node, run) -> None:
    async def scenario():
        app = ChatApp(fake_node, blink=False)
        async with app.run_test(size=SIZE) as pilot:
            box = app.pane.input
            await pilot.press(*"two", "ctrl+j", *"lines")
            assert box.text == "two\nlines"
            await pilot.press("alt+enter", "x")
            assert box.text == "two\nlines\nx"
            await pilot.press("enter")
            await pilot.pause(0.05)
            assert fake_node.sent == [("msg", "two\nlines\nx")] and box.text == ""
            await pilot.press(*"tail\\", "enter", "y", "enter")  # backslash-Enter: newline in any terminal
            await pilot.pause(0.05)
            assert fake_node.sent[-1] == ("msg", "tail\ny")
            await pilot.press("ctrl+up")
            assert box.text == "tail\ny"
            await pilot.press("up", "up")
            assert box.text == "two\nlines\nx"
            await pilot.press("down", "down", "down")
            await pilot.press("down", "down")
            assert box.text == ""
            await pilot.press(*"/ni", "tab")
            assert box.text == "/nick "
            await pilot.pause()
            assert "change your nick" in widget_text(app.pane.query_one("CommandHint"))

    run(scenario())


def test_typing_indicator_both_ways(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            bob_saw = []
            bob.add_listener(lambda e: bob_saw.append(e) if isinstance(e, ev.TypingSeen) else None)
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press(*"hel")
                await wait_until(pilot, lambda: bob_saw, what="bob sees alice typing")
                await pilot.press(*"lo there")
                await pilot.pause(0.2)
                assert len(bob_saw) == 1  # rate limited
                await bob.send_typing()
                status = app.pane.query_one(StatusLine)
                await wait_until(pilot, lambda: "bob is typing…" in widget_text(status), what="indicator")

    run(scenario())


def test_bursts_of_node_events_coalesce_into_one_handler_call(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice",)) as (alice,):
            posted = []
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE, message_hook=lambda m: posted.append(m)) as pilot:
                await pilot.pause()
                bridge = app.pane.bridge
                before = bridge.received
                posted.clear()
                for i in range(200):  # what a burst of acknowledgements looks like to the bridge
                    bridge._on_event(ev.AckStateChanged(f"m{i}", ev.ACKNOWLEDGED))
                await pilot.pause()
                drains = [m for m in posted if isinstance(m, NodeEventsReady)]
                assert bridge.received - before == 200
                assert len(drains) == 1

    run(scenario())


def test_link_panel_changes_the_nodes_impairment(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice",)) as (alice,):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("f2")
                panel = app.pane.query_one("ImpairmentPanel")
                assert panel.has_class("-shown")
                field = panel.query_one("#imp-loss_in")
                field.focus()
                await pilot.pause()
                field.value = "0.25"
                await pilot.press("enter")
                await pilot.pause(0.05)
                assert alice.impairment.loss_in == 0.25
                await pilot.click("#imp-offline")
                await pilot.pause(0.05)
                assert alice.impairment.offline is True
                field.value = "2"
                field.focus()
                await pilot.press("enter")
                await pilot.pause(0.05)
                assert alice.impairment.loss_in == 0.25 and field.has_class("-invalid")
                assert app.errors and "out of range" in app.errors[-1]

    run(scenario())


def test_command_palette_runs_the_same_commands(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice",)) as (alice,):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("ctrl+p")
                await pilot.pause(0.1)
                await pilot.press(*"go offline")
                await pilot.pause(0.3)
                await pilot.press("enter")
                await wait_until(pilot, lambda: alice.impairment.offline, what="offline via palette")
                await pilot.press("ctrl+p")
                await pilot.pause(0.1)
                await pilot.press(*"change nick")
                await pilot.pause(0.3)
                await pilot.press("enter")
                await pilot.pause(0.1)
                assert app.pane.input.text == "/nick "  # commands with an argument are prefilled
                assert app.pane.input.has_focus

    run(scenario())


def test_one_handler_surfaces_errors(fake_node, run) -> None:
    async def scenario():
        async def broken_send(text, kind="msg"):
            raise OSError("disk full")

        fake_node.send_text = broken_send
        app = ChatApp(fake_node, blink=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(*"hello", "enter")
            await wait_until(pilot, lambda: app.errors, what="error surfaced")
            assert "not sent: disk full" in app.errors[0]

            async def crash():
                raise RuntimeError("boom")

            app.pane.run_worker(crash(), exit_on_error=False)
            await wait_until(pilot, lambda: len(app.errors) == 2, what="worker error surfaced")
            assert "boom" in app.errors[1]
            import logging

            logging.getLogger("sdschat.node").error("database write failed: test")
            await wait_until(pilot, lambda: len(app.errors) == 3, what="log error surfaced")
            assert app.is_running  # errors are shown, the app keeps going

    run(scenario())


def test_long_history_opens_on_its_last_page_and_pages_in_as_you_scroll_up(tmp_path, run) -> None:
    """1,000 messages in alice's database: the screen opens on the newest 400 and reads older pages from the
    database when scrolled near the top, keeping what is on screen in place; all of it in the end, in order."""
    from sdschat.node import AppPayload, Node
    from sdschat.store import MessageRow, Store
    from sdschat.ui.widgets.chat_pane import HISTORY_PAGE

    async def scenario():
        async with cluster(tmp_path, nicks=("alice",)) as (alice,):
            config = alice.config
            await alice.stop()
            store = await Store.open(config.db_path)
            rows = [
                MessageRow(
                    f"{i:064x}",
                    "b0" * 32,
                    i + 1,
                    AppPayload("msg", "bob", f"old message {i}", 1_763_800_000_000 + i * 1000).encode(),
                    ev.RECEIVED,
                    received_at_ms=1,
                )
                for i in range(1000)
            ]
            await store.apply(config.key.channel_id, messages=rows)
            await store.close()
            again = await Node.start(config)
            try:
                app = ChatApp(again, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    view = app.pane.view
                    await wait_until(pilot, lambda: len(view.timeline.items) == HISTORY_PAGE, what="last page")
                    assert view.more_above and "old message 999" in "".join(view.visible_text())
                    for loaded in (800, 1000):
                        view.scroll_to(y=3, animate=False, force=True)
                        await pilot.pause()
                        top = view.visible_text()[0]
                        await wait_until(pilot, lambda n=loaded: len(view.timeline.items) == n, what=f"{loaded}")
                        await pilot.pause()
                        assert view.visible_text()[0] == top  # the older page went above the screen
                    assert not view.more_above
                    texts = [it.msg.text for it in view.timeline.items]
                    assert texts == [f"old message {i}" for i in range(1000)]
                    assert app.errors == []
            finally:
                await again.stop()

    run(scenario())


def test_a_line_that_arrives_while_the_window_reads_its_history_is_shown(tmp_path, run) -> None:
    """bob's line reaches alice's node after her window read its first page of history but before that page is on
    screen: the line is shown all the same (it was lost until the next start when the pane began listening only
    after the page was in)."""

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            await bob.send_text("before")
            await wait_until_node(lambda: has(alice, "before"), timeout=5, what="before")
            read_history = alice.history

            async def history(**kwargs):
                page = await read_history(**kwargs)  # the page as it is now, then a line arrives
                await bob.send_text("while the page loads")
                await wait_until_node(lambda: has(alice, "while the page loads"), timeout=5, what="the line")
                return page

            alice.history = history
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await wait_until(pilot, lambda: line_with(lines_of(app), "before"), what="the page")
                await wait_until(pilot, lambda: line_with(lines_of(app), "while the page loads"), what="the line")
                assert sum("while the page loads" in line for line in lines_of(app)) == 1
                assert app.errors == []

    def has(node, text: str) -> bool:
        return any(m.text == text for m in node.messages())

    run(scenario())
