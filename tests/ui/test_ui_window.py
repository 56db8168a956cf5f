"""Bare ``sdschat``: every channel of a profile in one window, driven through Pilot with real nodes."""

from __future__ import annotations

import asyncio
import base64
import time

from textual.geometry import Region
from ui_helpers import capture_writes, lines_of, profiles, received_while_away, wait_until, widget_text

from sdschat.profile import Profile, decode_invite
from sdschat.ui.screens.invite import InviteScreen
from sdschat.ui.widgets import ChatPane
from sdschat.ui.widgets.channel_list import ChannelList
from sdschat.ui.window import ChannelWindow


def rows(app) -> list[tuple[str, int]]:
    return [(r.name, r.unread) for r in app.query_one(ChannelList).rows]


def active(app) -> str:
    return app.active_pane().channel_name


def test_channels_keys_and_commands(tmp_path, run) -> None:
    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops"), bob=("team",)) as group:
            alice, broker = group["alice"], group.broker
            bobs = await group.client(group["bob"])
            client = await group.client(alice)
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(140, 36)) as pilot:
                osc = capture_writes(app)
                assert rows(app) == [("team", 0), ("ops", 0)] and active(app) == "team"
                assert app.sub_title == "#team · alice"
                await wait_until(
                    pilot,
                    lambda: all(r.connection == "connected" for r in app.query_one(ChannelList).rows),
                    what="connected",
                )

                # switching: Alt+digit, Alt+Up/Down, Ctrl+N (wraps); each channel keeps its unsent input
                await pilot.press(*"draft for team")
                await pilot.press("alt+2")
                assert active(app) == "ops" and app.sub_title == "#ops · alice"
                assert app.active_pane().input.text == ""
                await pilot.press("alt+left")
                assert active(app) == "team" and app.active_pane().input.text == "draft for team"
                await pilot.press("alt+right")
                assert active(app) == "ops"
                await pilot.press("ctrl+n")
                assert active(app) == "team"
                await pilot.press("alt+9")  # no ninth channel: nothing happens
                assert active(app) == "team"
                app.active_pane().input.load_text("")

                # a message in a background channel counts as unread there, and clears when opened
                await pilot.press("alt+2")
                await bobs.nodes[0].send_text("team news 1")
                await bobs.nodes[0].send_text("team news 2")
                await wait_until(pilot, lambda: rows(app)[0] == ("team", 2), what="unread 2")
                assert "#team" in widget_text(app.query_one(ChannelList))
                await pilot.press("alt+1")
                await wait_until(pilot, lambda: rows(app)[0] == ("team", 0), what="read to the end")
                assert any("team news 2" in line for line in lines_of(app, app.active_pane()))

                # /invite shows the token and copies it with OSC 52
                await command(pilot, app, "/invite")
                token = app.clipboard
                assert decode_invite(token).channel == "team" and decode_invite(token).broker == broker.url
                assert any(base64.b64encode(token.encode()).decode() in w and w.startswith("\x1b]52;c;") for w in osc)
                assert isinstance(app.screen, InviteScreen)  # in a box of its own: wrapped with no indent
                shown = [
                    str(line.text).strip()
                    for line in app.screen.query_one("#invite-token").render_lines(
                        Region(0, 0, app.screen.query_one("#invite-token").size.width, 20)
                    )
                    if line.text.strip()
                ]
                assert len(shown) > 1 and "".join(shown) == token
                assert decode_invite("\n".join(shown)) == decode_invite(token)  # a copy by hand, line breaks and all
                await pilot.press("escape")
                assert not isinstance(app.screen, InviteScreen)
                assert any("copied to the clipboard" in line for line in lines_of(app, app.active_pane()))
                assert token[:20] not in "".join(lines_of(app, app.active_pane()))  # a secret: not in the history
                assert not any("works in the channel window" in line for line in lines_of(app, app.active_pane()))

                # /join NAME starts a new channel; /join TOKEN joins bob's
                await command(pilot, app, "/join standup")
                await wait_until(pilot, lambda: len(rows(app)) == 3, what="standup")
                assert active(app) == "standup" and "standup" in Profile.load(alice.paths).channels
                lobby, _ = await bobs.join("lobby")
                await command(pilot, app, f"/join {bobs.invite(lobby)}")
                await wait_until(pilot, lambda: len(rows(app)) == 4, what="lobby")
                assert active(app) == "lobby"
                await pilot.pause(0.1)
                assert not any("works in the channel window" in line for p in app.panes for line in lines_of(app, p))
                assert [p.channel_name for p in app.panes if p.display] == ["lobby"]
                await pilot.press(*"hi lobby", "enter")
                await wait_until(pilot, lambda: any(m.text == "hi lobby" for m in lobby.messages()), what="bob")
                await command(pilot, app, "/join sdschat:AAAA")  # a damaged token: one line, nothing joined
                await wait_until(
                    pilot, lambda: any("/join:" in line for line in lines_of(app, app.active_pane())), what="refusal"
                )
                assert len(rows(app)) == 4

                # /part leaves the channel (history kept); the neighbour becomes active
                await pilot.press("alt+3")
                standup_db = alice.db_path(alice.channel("standup"))
                await command(pilot, app, "/part")
                await wait_until(pilot, lambda: len(rows(app)) == 3, what="parted")
                assert [r[0] for r in rows(app)] == ["team", "ops", "lobby"] and active(app) == "ops"
                assert "standup" not in Profile.load(alice.paths).channels and standup_db.exists()

                # /nick renames you in every channel and in the profile
                await command(pilot, app, "/nick alicia")
                assert {n.nick for n in client.nodes} == {"alicia"}
                assert Profile.load(alice.paths).name == "alicia"
                assert all("as alicia" in p.input.placeholder for p in app.query(ChatPane))

                await pilot.press("ctrl+q")
                await pilot.pause()
            assert app.return_code == 0
            assert app.errors == []

    run(scenario(), timeout=90)


async def command(pilot, app, text: str) -> None:
    app.active_pane().input.load_text(text)
    await pilot.press("enter")
    await pilot.pause(0.2)


def test_one_connection_one_identity_and_unread_across_restarts(tmp_path, run) -> None:
    """Every channel of the window rides one MQTT connection and signs with the profile's identity; what
    arrived while the window was closed (here: to a headless node of the same profile) shows as unread when it
    opens, and having had the channel on screen is remembered in the profile."""
    from sdschat.transport import TopicView

    async def scenario():
        async with profiles(tmp_path, alice=("ops", "team"), bob=("team",)) as group:
            alice = group["alice"]
            bobs = await group.client(group["bob"])
            client = await group.client(alice)
            views = [n.transport.inner for n in client.nodes]
            assert all(isinstance(v, TopicView) and v.shared is client.shared for v in views)
            assert {n.key.topic for n in client.nodes} <= set(client.shared.topics)
            assert {n.participant_id for n in client.nodes} == {alice.identity().participant_id}
            await client.stop()

            await received_while_away(
                alice, "team", bobs.nodes[0], [f"while the window was closed {i}" for i in range(3)]
            )

            client = await group.client(alice)
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                assert rows(app) == [("ops", 0), ("team", 3)] and active(app) == "ops"
                await pilot.press("alt+2")
                assert rows(app) == [("ops", 0), ("team", 0)]
                await pilot.press("ctrl+q")
            await client.stop()
            team = Profile.load(alice.paths).channel("team")
            client = await group.client(alice)
            assert [client.unread(n) for n in client.nodes] == [0, 0] and team.read_ms > 0

    run(scenario(), timeout=90)


def test_the_window_opens_on_the_first_channel_and_the_others_join_as_they_start(tmp_path, run) -> None:
    """Bare ``sdschat`` starts the first channel before the window opens and the rest after (a long history
    takes its engine a while to restore): rows and panes join in profile order with their unread counts; a
    channel whose database is damaged says so in one line and the others come up anyway."""

    async def scenario():
        async with profiles(tmp_path, alice=("first", "second", "broken", "fourth"), bob=("second",)) as group:
            alice = group["alice"]
            bobs = await group.client(group["bob"])
            await received_while_away(alice, "second", bobs.nodes[0], ["while the window was closed"])
            alice.db_path(alice.channel("broken")).write_bytes(b"not a database" * 100)

            client = await group.client(alice, all_channels=False)
            assert [n.key.channel_name for n in client.nodes] == ["first"]
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                await wait_until(pilot, lambda: len(rows(app)) == 3, what="the others")
                assert rows(app) == [("first", 0), ("second", 1), ("fourth", 0)] and active(app) == "first"
                await pilot.pause(0.1)
                # one channel on screen: the panes that joined later stay hidden until picked
                assert [p.channel_name for p in app.panes if p.display] == ["first"]
                await wait_until(
                    pilot,
                    lambda: any("#broken could not start" in line for line in lines_of(app, app.active_pane())),
                    what="the broken channel's line",
                )
                await pilot.press("alt+2")
                assert active(app) == "second"
                await pilot.pause(0.1)
                assert [p.channel_name for p in app.panes if p.display] == ["second"]
                await wait_until(
                    pilot,
                    lambda: any("while the window was closed" in line for line in lines_of(app, app.active_pane())),
                    what="its history",
                )
                await pilot.press("ctrl+q")
            assert app.return_code == 0 and app.errors == []

    run(scenario(), timeout=90)


def test_new_since_you_left_line_and_unread_cleared_at_the_bottom(tmp_path, run) -> None:
    """Back in a channel with more new messages than fit: a "N new messages since you left" line above the
    first of them, scrolled into view; the count stays until the end is reached (Ctrl+End), and leaving the
    channel takes the line away."""

    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops"), bob=("team",)) as group:
            bobs = await group.client(group["bob"])
            client = await group.client(group["alice"])
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(100, 24)) as pilot:
                team = app.active_pane()
                for i in range(5):
                    await bobs.nodes[0].send_text(f"old {i}")
                await wait_until(pilot, lambda: any("old 4" in line for line in lines_of(app, team)), what="old")
                await pilot.press("alt+2")
                for i in range(40):
                    await bobs.nodes[0].send_text(f"new {i}")
                await wait_until(pilot, lambda: rows(app)[0] == ("team", 40), timeout=15, what="40 unread")

                await pilot.press("alt+1")
                await wait_until(pilot, lambda: team.view.timeline.unread_line is not None, what="the line")
                await pilot.pause(0.2)
                shown = [line.replace("\u00a0", " ") for line in team.view.visible_text()]
                at = next(i for i, line in enumerate(shown) if "40 new messages since you left" in line)
                assert "old 4" in shown[at - 1] and "new 0" in shown[at + 1], shown
                assert rows(app)[0] == ("team", 40) and not team.view.at_bottom  # not read to the end yet

                await pilot.press("ctrl+end")
                await wait_until(pilot, lambda: rows(app)[0] == ("team", 0), what="read to the end")
                assert any("new 39" in line for line in team.view.visible_text())

                await pilot.press("alt+2", "alt+1")
                await wait_until(pilot, lambda: team.view.timeline.unread_line is None, what="line gone")
                await pilot.press("ctrl+q")
            assert app.errors == []

    run(scenario(), timeout=90)


def test_each_channel_keeps_its_scroll_position(tmp_path, run) -> None:
    """Scrolled up in #team, then elsewhere in #ops: switching away and back finds each channel where it was
    (the same lines on screen), also when a message arrived in #team meanwhile."""

    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops"), bob=("team", "ops")) as group:
            bobs = await group.client(group["bob"])
            client = await group.client(group["alice"])
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(100, 24)) as pilot:
                team, ops = app.panes
                for name, node in zip(("team", "ops"), bobs.nodes):
                    for i in range(60):
                        await node.send_text(f"{name} history {i}")
                await wait_until(
                    pilot,
                    lambda: all(len([m for m in n.messages() if m.kind == "msg"]) == 60 for n in client.nodes),
                    timeout=15,
                    what="the histories",
                )
                await wait_until(
                    pilot,
                    lambda: any("team history 59" in line for line in team.view.visible_text()),
                    what="team at its end",
                )

                async def scroll_up(pane, pages: int) -> tuple[float, list[str]]:
                    await pilot.press("ctrl+end")  # (#ops opens at its "60 new messages" line)
                    await wait_until(
                        pilot,
                        lambda: any(f"{pane.channel_name} history 59" in line for line in pane.view.visible_text()),
                        what="at the end",
                    )
                    for _ in range(pages):
                        await pilot.press("pageup")
                    await pilot.pause(0.2)
                    assert not pane.view.at_bottom and 0 < pane.view.scroll_y < pane.view.max_scroll_y
                    return pane.view.scroll_y, pane.view.visible_text()

                team_at = await scroll_up(team, 1)
                assert not any("team history 59" in line for line in team_at[1])
                await pilot.press("alt+2")
                assert active(app) == "ops"
                ops_at = await scroll_up(ops, 2)
                assert ops_at[0] != team_at[0] and not any("ops history 59" in line for line in ops_at[1])

                await bobs.nodes[0].send_text("team, while you were in ops")
                await wait_until(pilot, lambda: rows(app)[0] == ("team", 1), what="unread 1")
                for _ in range(2):
                    await pilot.press("alt+1")
                    await pilot.pause(0.3)
                    assert active(app) == "team" and (team.view.scroll_y, team.view.visible_text()) == team_at
                    assert not team.view.at_bottom and rows(app)[0] == ("team", 1)  # not read to the end
                    await pilot.press("alt+2")
                    await pilot.pause(0.3)
                    # the same lines on screen (the offset is one less: leaving took the "60 new" line away above)
                    assert active(app) == "ops" and ops.view.visible_text() == ops_at[1] and not ops.view.at_bottom
                await pilot.press("ctrl+q")
            assert app.errors == []

    run(scenario(), timeout=90)


def test_store_node_catch_up_per_channel_over_the_one_connection(tmp_path, run) -> None:
    """While alice's window is closed, bob talks in #team and #ops and leaves; only a store node has it. Bare
    ``sdschat`` (first channel, window, then the others) catches each channel up from the store through the
    window's one MQTT connection: each channel gets its own messages, from the store, and no other's."""
    from sdschat.storenode import StoreNode

    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops", "quiet"), bob=("team", "ops")) as group:
            alice = group["alice"]
            store = await StoreNode.start(group.broker.url, tmp_path / "store.db")
            try:
                client = await group.client(alice)  # once: each channel notes when it was last in sync
                await client.stop()
                bobs = await group.client(group["bob"])
                before = store.counters["stored"]
                for name, node, count in (("team", bobs.nodes[0], 3), ("ops", bobs.nodes[1], 2)):
                    for i in range(count):
                        await node.send_text(f"{name} missed {i}")
                deadline = time.monotonic() + 10
                while store.counters["stored"] < before + 5:
                    assert time.monotonic() < deadline, f"the store node stored {store.counters}"
                    await asyncio.sleep(0.05)
                await bobs.stop()  # from here on only the store node has them

                client = await group.client(alice, all_channels=False)  # as bare `sdschat` starts
                app = ChannelWindow(client, blink=False)
                async with app.run_test(size=(120, 30)) as pilot:
                    await wait_until(pilot, lambda: len(app.panes) == 3, what="every channel")
                    by_name = {n.key.channel_name: n for n in client.nodes}

                    def chat(name: str) -> list[str]:
                        return sorted(m.text for m in by_name[name].messages() if m.kind == "msg")

                    await wait_until(
                        pilot,
                        lambda: len(chat("team")) == 3 and len(chat("ops")) == 2,
                        timeout=15,
                        what=f"the catch-ups ({ {n: chat(n) for n in by_name} })",
                    )
                    assert chat("team") == [f"team missed {i}" for i in range(3)]
                    assert chat("ops") == [f"ops missed {i}" for i in range(2)] and chat("quiet") == []
                    for name, count in (("team", 3), ("ops", 2)):
                        counters = by_name[name].store_counters
                        assert counters["catch_ups"] >= 1 and counters["delivered"] >= count, (name, counters)
                    # one connection: every channel's topics and its own store reply topic ride the shared one
                    assert all(n.transport.inner.shared is client.shared for n in client.nodes)
                    replies = {n.store_client.reply_topic for n in client.nodes}
                    assert len(replies) == 3 and replies <= set(client.shared.topics)
                    assert store.counters["requests"] >= 3

                    await wait_until(
                        pilot, lambda: any("team missed 2" in line for line in lines_of(app)), what="#team on screen"
                    )
                    # #team on screen at its end: read; the others count what the store brought as unread
                    await wait_until(
                        pilot,
                        lambda: rows(app) == [("team", 0), ("ops", 2), ("quiet", 0)],
                        what=f"unread counts ({rows(app)})",
                    )
                    await pilot.press("alt+2")
                    await wait_until(
                        pilot, lambda: any("ops missed 1" in line for line in lines_of(app)), what="#ops on screen"
                    )
                    assert not any("team missed" in line for line in lines_of(app))
                    await pilot.press("ctrl+q")
                assert app.errors == []
            finally:
                await store.stop()

    run(scenario(), timeout=90)


def test_the_window_reopens_on_the_channel_it_was_left_on(tmp_path, run) -> None:
    """Quit on the third channel: the window reopens there, that channel starting first; the others join in
    the profile's order around it (Alt+1 is still the first), and the one on screen stays on screen."""

    async def scenario():
        async with profiles(tmp_path, alice=("first", "second", "third")) as group:
            alice = group["alice"]
            client = await group.client(alice, all_channels=False)
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                await wait_until(pilot, lambda: len(rows(app)) == 3, what="every channel")
                await pilot.press("alt+3")
                assert active(app) == "third"
                await pilot.press("ctrl+q")
            await client.stop()
            assert Profile.load(alice.paths).active == "third"

            client = await group.client(Profile.load(alice.paths), all_channels=False)
            assert [n.key.channel_name for n in client.nodes] == ["third"]  # started first
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                assert active(app) == "third"
                await wait_until(pilot, lambda: len(rows(app)) == 3, what="the others")
                assert [name for name, _ in rows(app)] == ["first", "second", "third"]
                assert [p.channel_name for p in app.panes] == ["first", "second", "third"]
                assert active(app) == "third" and app.channel_list.active == 2
                assert [p.channel_name for p in app.panes if p.display] == ["third"]
                await pilot.press("alt+1")
                assert active(app) == "first"
                await pilot.press("ctrl+q")
            assert app.return_code == 0 and app.errors == []
            await client.stop()
            assert Profile.load(alice.paths).active == "first"

    run(scenario(), timeout=90)
