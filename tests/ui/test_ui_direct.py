"""Direct messages by name in the window, with real nodes and real profiles: ``/query NAME`` opens a two-member
channel with someone of a shared channel, who is asked in their window (Enter accepts, Esc ignores) with no
token exchanged; ``/invite NAME`` brings a member of another channel in the same way."""

from __future__ import annotations

import asyncio
import time

from ui_helpers import lines_of, profiles, wait_until

from sdschat.node.inbox import contacts
from sdschat.ui.screens.request import RequestScreen
from sdschat.ui.screens.stats import StatsScreen
from sdschat.ui.widgets.channel_list import ChannelList
from sdschat.ui.window import ChannelWindow


async def command(pilot, app, text: str) -> None:
    app.active_pane().input.load_text(text)
    await pilot.press("enter")
    await pilot.pause(0.2)


async def known(client, pid: str, timeout: float = 10.0) -> None:
    """Until ``client``'s rosters hold the member ``pid`` with its announced key (its join arrived)."""
    deadline = time.monotonic() + timeout
    while pid not in contacts(client.nodes):
        assert time.monotonic() < deadline, f"{pid[:8]} never became a contact"
        await asyncio.sleep(0.05)


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def chat(node) -> list[str]:
    return [m.text for m in node.messages() if m.kind == "msg"]


def rows(app) -> list[str]:
    return [r.name for r in app.query_one(ChannelList).rows]


def test_the_window_shows_a_request_to_talk_and_enter_joins_the_new_channel(tmp_path, run) -> None:
    async def scenario():
        async with profiles(tmp_path, alice=("team",), bob=("team",)) as group:
            alices = await group.client(group["alice"])
            bobs = await group.client(group["bob"])
            await known(alices, group["bob"].participant_id)
            await known(bobs, group["alice"].participant_id)
            app = ChannelWindow(bobs, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                node, contact, new = await alices.query("bob")  # what alice's /query bob runs
                assert new and contact.name == "bob" and node.key.channel_name == "@alice+bob"
                await wait_until(pilot, lambda: isinstance(app.screen, RequestScreen), what="the request")
                assert app.screen.line == "alice wants to talk"
                assert app.screen.note.endswith("accepting opens @alice")
                await pilot.press("enter")
                await wait_until(pilot, lambda: rows(app) == ["team", "@alice+bob"], what="the new channel")
                assert app.active_pane().channel_name == "@alice+bob"
                listed = [t.plain for t in app.query_one(ChannelList).lines(30)]
                assert any(line.endswith("@alice") for line in listed), listed  # bob sees the channel by alice
                assert app.sub_title.startswith("@alice · bob"), app.sub_title
                assert bobs.profile.channel("@alice+bob").peer == group["alice"].participant_id
                await command(pilot, app, "hello alice, just us")
                await until(lambda: "hello alice, just us" in chat(node), "bob's line at alice")
                await node.send_text("hi bob")
                await wait_until(
                    pilot, lambda: any("hi bob" in line for line in lines_of(app)), what="alice's line at bob"
                )
                # asked again (or replayed): shown once; nothing new on screen
                assert bobs.direct.counts == {}
                await alices.query("bob")
                await until(lambda: bobs.direct.counts.get("already") == 1, "the second request dropped")
                assert not isinstance(app.screen, RequestScreen)
                await command(pilot, app, "/stats")  # the drop is counted where the node's counters are
                assert isinstance(app.screen, StatsScreen) and app.screen.health["inbox_dropped_already"] == 1
                assert app.screen.health["received_frames"] > 0
                await pilot.press("escape")

    run(scenario(), timeout=60.0)


def test_query_in_the_window_and_escape_ignores_a_request(tmp_path, run) -> None:
    async def scenario():
        async with profiles(tmp_path, alice=("team",), bob=("team",)) as group:
            alices = await group.client(group["alice"])
            bobs = await group.client(group["bob"])
            await known(alices, group["bob"].participant_id)
            await known(bobs, group["alice"].participant_id)
            asked: list = []
            bobs.on_request(asked.append)
            app = ChannelWindow(alices, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                await command(pilot, app, "/query nobody")
                await wait_until(
                    pilot,
                    lambda: any("/query: nobody called 'nobody' in your channels" in line for line in lines_of(app)),
                    what="the refusal",
                    describe=lambda: (
                        f"lines {lines_of(app)[-4:]}, input {app.active_pane().input.text!r}, focus {app.focused!r}"
                    ),
                )
                pane = app.active_pane()
                pane._loaded = False  # the history loaded again (it was: the line went when that came late)
                await pane.ensure_loaded()
                await wait_until(
                    pilot,
                    lambda: any("/query: nobody called 'nobody' in your channels" in line for line in lines_of(app)),
                    what="the refusal after a reload",
                )
                await command(pilot, app, "/query bob")
                await wait_until(pilot, lambda: rows(app) == ["team", "@alice+bob"], what="alice's new channel")
                await until(lambda: len(asked) == 1, "bob's request")
                node, _ = await bobs.accept(asked[0])
                await node.send_text("bob here")
                await wait_until(
                    pilot, lambda: any("bob here" in line for line in lines_of(app)), what="bob's line at alice"
                )
            # bob's own window: a request he ignores joins nothing
            app = ChannelWindow(bobs, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                side, _ = await alices.join("side")
                assert (await alices.invite_by_name(side, "bob")).name == "bob"
                await wait_until(pilot, lambda: isinstance(app.screen, RequestScreen), what="a request")
                await pilot.press("escape")
                await pilot.pause(0.2)
                assert not isinstance(app.screen, RequestScreen) and rows(app) == ["team", "@alice+bob"]

    run(scenario(), timeout=60.0)


def test_invite_by_name_brings_a_member_of_another_channel_in(tmp_path, run) -> None:
    async def scenario():
        async with profiles(tmp_path, alice=("team", "ops"), bob=("team",), carol=("ops",)) as group:
            alices = await group.client(group["alice"])
            bobs = await group.client(group["bob"])
            carols = await group.client(group["carol"])
            await known(alices, group["carol"].participant_id)
            await known(alices, group["bob"].participant_id)
            await known(carols, group["alice"].participant_id)
            asked: list = []
            carols.on_request(asked.append)
            app = ChannelWindow(alices, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                assert app.active_pane().channel_name == "team"
                await command(pilot, app, "/invite bob")  # in #team already
                await wait_until(
                    pilot, lambda: any("/invite: bob is in #team already" in line for line in lines_of(app)), what="no"
                )
                await command(pilot, app, "/invite carol")
                await wait_until(
                    pilot,
                    lambda: any("invite to #team sent to carol" in line for line in lines_of(app)),
                    what="sent",
                )
                await until(lambda: len(asked) == 1, "carol's request")
                assert asked[0].request.kind == "invite" and asked[0].request.channel == "team"
                node, _ = await carols.accept(asked[0])
                assert node.key.channel_name == "team" and carols.profile.channel("team").peer == ""
                await node.send_text("carol joined by name")
                team = next(n for n in bobs.nodes if n.key.channel_name == "team")
                await until(lambda: "carol joined by name" in chat(team), "carol's line at bob")
                await wait_until(
                    pilot,
                    lambda: any("carol joined by name" in line for line in lines_of(app)),
                    what="carol's line at alice",
                )

    run(scenario(), timeout=60.0)
