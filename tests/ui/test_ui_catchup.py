"""Catch-up as catch-up: what arrives because you were away, or before you joined, loads as history under one
summary line; a message missed while you followed the channel keeps its marker and its repair mark."""

from __future__ import annotations

import dataclasses
import time

from ui_helpers import cluster, fast_config, line_with, lines_of, profiles, wait_until, wait_until_node

from sdschat.node import events as ev
from sdschat.ui.app import ChatApp
from sdschat.ui.timeline import CatchUpItem, Timeline

SIZE = (120, 40)
B = "b" * 32
ONLINE = 10_000  # wall-clock ms at which the view came online (unit tests)


def msg(
    mid: str, lamport: int, state: str = ev.RECEIVED, kind: str = "msg", own: bool = False, received: int = 0
) -> ev.ChatMessage:
    return ev.ChatMessage(mid, B, "bob", mid, kind, lamport, lamport, own, state, received_at_ms=received)


def catch_up_lines(lines: list[str]) -> list[str]:
    return [line.strip(" ┄") for line in lines if "↑ " in line]


def glyph(line: str) -> str:
    return line[6]


# ------------------------------------------------------------------ the rule, on the timeline


def test_written_before_coming_online_is_catch_up_and_after_is_live() -> None:
    tl = Timeline()
    tl.add_message(msg("seen", 5_000))
    tl.came_online(ONLINE)
    away = tl.add_message(msg("away", 9_000, ev.WAITING))
    tl.gap_opened("away", ("older",))  # history being fetched: the catch-up counts it, no marker
    assert away.catch_up and tl.markers() == []
    batch = tl.catch_up
    assert (batch.count, batch.pending, batch.loading) == (1, {"older"}, True)
    older = tl.add_message(msg("older", 8_000))
    tl.repaired("older", "sds-r", "a" * 32, 99)
    assert older.catch_up and older.repaired_via is None and older.highlight_until_ms == 0
    assert not batch.loading and batch.via == {"older": ("sds-r", "a" * 32)}
    live = tl.add_message(msg("live", 10_500, ev.WAITING))
    tl.gap_opened("live", ("gone",))  # missed while online: a real gap
    assert not live.catch_up and [m.pending for m in tl.markers()] == [{"gone"}]
    tl.add_message(msg("gone", 10_200))
    assert tl.repaired("gone", "sds-r", "a" * 32, 99).repaired_via == "sds-r"
    # one line, just below the newest message the catch-up brought
    assert [type(it).__name__ for it in tl.items] == [
        "MsgItem",
        "MsgItem",
        "MsgItem",
        "CatchUpItem",
        "MsgItem",
        "MsgItem",
    ]


def test_a_marker_whose_message_arrives_as_catch_up_folds_into_the_catch_up() -> None:
    tl = Timeline()
    tl.came_online(ONLINE)
    tl.add_message(msg("live", 10_100, ev.WAITING))
    tl.gap_opened("live", ("a", "b", "c"))  # the first live message names what was written while away
    assert len(tl.markers()) == 1
    tl.add_message(msg("a", 9_000))
    assert tl.markers() == [] and tl.catch_up.pending == {"b", "c"}
    tl.message_lost("c", B)
    tl.add_message(msg("b", 9_100))
    assert (tl.catch_up.count, tl.catch_up.pending, tl.catch_up.lost) == (2, set(), {"c"})


def test_sync_gaps_of_the_burst_are_catch_up_unless_a_live_message_names_them_first() -> None:
    tl = Timeline()
    tl.came_online(ONLINE)
    tl.gap_opened("", ("x",))  # named by a sync frame before anything live arrived: history being fetched
    assert tl.markers() == [] and tl.catch_up.pending == {"x"}
    tl.add_message(msg("live", ONLINE + 100, ev.WAITING))
    tl.gap_opened("live", ("x",))  # ... unless a live message names it before anything was caught up
    assert [m.pending for m in tl.markers()] == [{"x"}] and tl.catch_up is None
    assert not any(isinstance(it, CatchUpItem) for it in tl.items)
    tl.gap_opened("", ("y",))  # after a live message: a sync frame's gap is a gap
    assert [m.pending for m in tl.markers()] == [{"x"}, {"y"}]


def test_a_reload_keeps_catch_up_lines_and_marks() -> None:
    tl = Timeline()
    tl.came_online(ONLINE)
    tl.add_message(msg("a", 9_000, ev.WAITING))
    tl.gap_opened("a", ("z",))
    history = [msg("h", 1_000), dataclasses.replace(msg("a", 9_000), repaired=True)]
    tl.load(history)
    line = next(it for it in tl.items if isinstance(it, CatchUpItem))
    assert tl.by_mid["a"].catch_up and tl.by_mid["a"].repaired_via is None and not tl.by_mid["h"].catch_up
    assert line.pending == {"z"} and tl.markers() == []
    tl.add_message(msg("z", 8_000))
    assert not line.loading and line.count == 2


def test_new_since_you_left_counts_what_the_unread_count_counts() -> None:
    tl = Timeline()
    tl.add_message(msg("old", 1, received=100))
    tl.add_message(msg("mine", 2, own=True, received=300))
    tl.add_message(msg("dave joined", 3, kind="join", received=300))
    for i in range(5):
        tl.add_message(msg(f"new{i}", 4 + i, received=300))
    tl.add_message(msg("bob is now bobby", 9, kind="nick", received=300))
    line = tl.mark_unread(200)
    assert line.count == 5  # not the join, not the nick change (ev.MEMBERSHIP_KINDS), not our own
    assert tl.items[tl.index_of(line) + 1].msg.message_id == "new0"


# ------------------------------------------------------------------ real nodes


def test_new_since_you_left_in_the_window_says_what_the_channel_list_says(tmp_path, run) -> None:
    """alice is in #ops while bob writes 5 lines in #team and dave joins it: the channel list counts 5, and back
    in #team the line above them says 5 too (dave's join is shown, but is not news)."""
    from sdschat.ui.widgets.channel_list import ChannelList
    from sdschat.ui.window import ChannelWindow

    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops"), bob=("team",), dave=("team",)) as group:
            bobs = await group.client(group["bob"])
            client = await group.client(group["alice"])
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(100, 30)) as pilot:
                team = app.active_pane()
                unread = lambda: app.query_one(ChannelList).rows[0].unread  # noqa: E731
                await bobs.nodes[0].send_text("old")
                await wait_until(pilot, lambda: line_with(lines_of(app, team), "old"), what="old")
                await pilot.pause(0.2)  # (its activity reaches the channel list while #team is on screen: read)
                await pilot.press("alt+2")
                for i in range(5):
                    await bobs.nodes[0].send_text(f"new {i}")
                await wait_until(
                    pilot, lambda: unread() == 5 and line_with(lines_of(app, team), "new 4"), what="5 unread"
                )
                await group.client(group["dave"])
                await wait_until(
                    pilot, lambda: line_with(lines_of(app, team), "dave joined"), timeout=15, what="dave's join"
                )
                assert unread() == 5
                await pilot.press("alt+1")
                await wait_until(pilot, lambda: team.view.timeline.unread_line is not None, what="the line")
                lines = lines_of(app, team)
                assert line_with(lines, "since you left").strip(" ━") == "5 new messages since you left"
                await pilot.press("ctrl+q")
            assert app.errors == []

    run(scenario(), timeout=90)


async def go_away(pilot, app, alice, before, writer, count: int) -> None:
    """``before`` says "before" (on alice's screen); alice goes offline while ``writer`` writes ``count`` lines
    ("while away N"); then she is back online."""
    await before.send_text("before")
    await wait_until(pilot, lambda: line_with(lines_of(app), "before"), what="before")
    alice.set_impairment(offline=True)
    await wait_until(pilot, lambda: app.pane.connection == "disconnected", what="offline")
    for i in range(count):
        await writer.send_text(f"while away {i}")
    await pilot.pause(0.3)
    alice.set_impairment(offline=False)


def test_back_after_being_away_one_summary_line_and_no_repair_marks(tmp_path, run) -> None:
    """alice's link goes down while carol writes 30 lines; back online, they load as history under one line
    ("caught up 30 messages · from ..."), without a repair mark, a waiting glyph or a gap marker on any of them."""

    async def scenario():
        async with cluster(tmp_path, ("alice", "bob", "carol")) as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await go_away(pilot, app, alice, bob, carol, 30)
                markers = 0

                def done() -> bool:
                    nonlocal markers
                    lines = lines_of(app)
                    markers = max(markers, sum("possibly missing" in line for line in lines))
                    return sum("while away" in line for line in lines) == 30 and any(
                        "caught up" in line for line in catch_up_lines(lines)
                    )

                await wait_until(pilot, done, timeout=20, what="the catch-up")
                lines = lines_of(app)
                away = [line for line in lines if "while away" in line]
                assert not any("↺" in line for line in away) and {glyph(line) for line in away} == {" "}
                summary = catch_up_lines(lines)
                assert len(summary) == 1 and summary[0].startswith("↑ caught up 30 messages"), summary
                assert lines.index(line_with(lines, "while away 29")) + 1 == lines.index(line_with(lines, "caught up"))
                assert markers == 0 and not line_with(lines, "possibly missing")
                assert app.errors == []

    run(scenario())


def test_a_live_gap_after_a_catch_up_keeps_its_marker_and_repair_mark(tmp_path, run) -> None:
    """After a short time offline (caught up, one line), alice misses one of bob's messages while online: that
    one shows a marker, then "↺ repaired ..." on its line, and the catch-up's line does not count it."""

    async def scenario():
        async with cluster(tmp_path, ("alice", "bob")) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await go_away(pilot, app, alice, bob, bob, 3)
                await wait_until(
                    pilot,
                    lambda: any("caught up 3 messages" in line for line in catch_up_lines(lines_of(app))),
                    timeout=15,
                    what="the catch-up",
                )
                alice.set_impairment(loss_in=1.0)
                await bob.send_text("missed while online")
                await pilot.pause(0.3)
                alice.set_impairment(loss_in=0.0)
                await bob.send_text("names it")
                await wait_until(pilot, lambda: line_with(lines_of(app), "possibly missing"), what="the marker")
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "missed while online"), timeout=10, what="the repair"
                )
                lines = lines_of(app)
                assert "↺ repaired" in line_with(lines, "missed while online")
                assert catch_up_lines(lines) and all("caught up 3 messages" in s for s in catch_up_lines(lines))
                assert not any("↺" in line for line in lines if "while away" in line)
                assert app.errors == []

    run(scenario())


def test_a_newcomer_sees_its_join_with_history_loading_above_it(tmp_path, run) -> None:
    """carol joins a channel with 100 lines of history: her view starts at her join, a line above it shows the
    history loading ("loading earlier history… N of ~M") and then sums it up; no flood of gap markers, no
    repair marks, no waiting glyphs on the history. Prints how long the view took to be whole."""
    from sdschat.crypto import ChannelKey
    from sdschat.node import Node, NodeConfig

    key = ChannelKey.generate("general")

    async def scenario():
        async with cluster(tmp_path, ("alice", "bob"), key=key) as (alice, bob):
            for i in range(100):
                await bob.send_text(f"history {i}")
            await wait_until_node(lambda: sum(m.text.startswith("history") for m in alice.messages()) == 100)
            carol = await Node.start(
                NodeConfig(
                    "carol", key, tmp_path / "carol.db", alice.broker_url, channel_config=fast_config(), membership=True
                )
            )
            started = time.monotonic()
            try:
                app = ChatApp(carol, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    seen: list[str] = []
                    markers = 0

                    def whole() -> bool:
                        nonlocal markers
                        lines = lines_of(app)
                        markers = max(markers, sum("possibly missing" in line for line in lines))
                        line = catch_up_lines(lines)
                        if line and (not seen or seen[-1] != line[0]):
                            seen.append(line[0])
                            join = line_with(lines, "carol joined")
                            if join is not None:  # the line sits above the join, always
                                assert lines.index(line_with(lines, line[0])) < lines.index(join), lines
                        return (
                            sum("history " in x for x in lines) == 100
                            and bool(line)
                            and "caught up" in line[0]
                            and line_with(lines, "carol joined") is not None
                        )

                    def state() -> str:
                        lines = lines_of(app)
                        count = sum("history " in x for x in lines)
                        joined = line_with(lines, "carol joined")
                        return (
                            f"{count} history lines shown, catch-up lines {seen}, join line {joined!r}, "
                            f"joined {carol.roster.membership.joined}, last lines {lines[-3:]}, "
                            f"node: {carol.counters}"
                        )

                    await wait_until(pilot, whole, timeout=60, step=0.1, what="the history", describe=state)
                    took = time.monotonic() - started
                    lines = lines_of(app)
                    history = [line for line in lines if "history " in line]
                    at = lines.index(line_with(lines, "carol joined"))
                    assert "↑ caught up" in lines[at - 1] and "(SDS-R)" in lines[at - 1], lines[at - 1]
                    assert not any("↺" in line for line in history) and {glyph(line) for line in history} == {" "}
                    assert any(s.startswith("↑ loading earlier history… ") and " of ~" in s for s in seen), seen
                    assert markers <= 1 and not line_with(lines, "possibly missing")  # (one, briefly, at most)
                    print(f"\nnewcomer: 100 lines of history whole in {took:.1f} s; {seen[0]!r} .. {seen[-1]!r}")
                    assert app.errors == []
            finally:
                await carol.stop()

    run(scenario(), timeout=90)


def test_the_channel_list_counts_what_arrives_between_the_count_and_the_window(tmp_path, run) -> None:
    """alice's client counts #team's unread, then bob writes 3 lines before her window is up: the channel list
    says 3, one more line makes it 4 (not 5: nothing counted twice), and #team's line says 4 new too."""
    from sdschat.ui.widgets.channel_list import ChannelList
    from sdschat.ui.window import ChannelWindow

    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops"), bob=("team",)) as group:
            group["alice"].set_active("ops")  # the window opens on #ops: #team's count shows in the list
            group["alice"].save_channels()
            bobs = await group.client(group["bob"])
            client = await group.client(group["alice"])
            team = next(n for n in client.nodes if n.key.channel_name == "team")
            assert client.unread(team) == 0
            for i in range(3):
                await bobs.nodes[0].send_text(f"late {i}")
            await wait_until_node(
                lambda: sum(m.text.startswith("late") for m in team.messages()) == 3, timeout=6, what="the 3 lines"
            )
            assert client.unread(team) == 3  # (counted as they arrive, before any window)
            late = [m.message_id for m in team.messages() if m.text.startswith("late")]
            assert await team.unread_since(0) == 3 and await team.unread_since(0, but=late[:2]) == 1
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(100, 30)) as pilot:
                rows = app.query_one(ChannelList).rows
                assert app.active_pane().channel_name == "ops"
                await pilot.pause(0.2)
                assert [(r.name, r.unread) for r in rows] == [("team", 3), ("ops", 0)]
                assert not client._since_count  # (each pane took its count over as it began listening)
                await bobs.nodes[0].send_text("one more")
                await wait_until(pilot, lambda: rows[0].unread == 4, what="4 unread")
                await pilot.pause(0.3)
                assert rows[0].unread == 4
                await pilot.press("alt+1")
                pane = app.active_pane()
                await wait_until(pilot, lambda: pane.view.timeline.unread_line is not None, what="the line")
                assert line_with(lines_of(app, pane), "since you left").strip(" ━") == "4 new messages since you left"
                await pilot.press("ctrl+q")
            assert app.errors == []

    run(scenario(), timeout=90)
