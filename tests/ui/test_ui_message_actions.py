"""Edit, delete and react on the message cursor (issue 47), with real nodes over an embedded broker: ``e`` edits
your own line, ``d`` deletes after a yes-or-no question (yours, or any as an admin), ``+`` reacts and takes it back;
what the channel's rules refuse is one line; an applied edit, deletion or reaction is no line of its own."""

from __future__ import annotations

import asyncio
import dataclasses

from ui_helpers import cluster, line_with, lines_of, wait_until, widget_text

from sdschat.ui.app import ChatApp
from sdschat.ui.screens.confirm import ConfirmScreen
from sdschat.ui.screens.inspector import InspectorScreen
from sdschat.ui.screens.react import ReactScreen

SIZE = (120, 30)


async def say(pilot, app, text: str) -> None:
    app.pane.input.load_text(text)
    await pilot.press("enter")


def of(node, text: str):
    """``node``'s message whose text is ``text`` (None: not there)."""
    return next((m for m in node.messages() if m.text == text and m.target is None), None)


def no_action_lines(app) -> None:
    """Applied edits and reactions are shown on their message, never as a line of their own."""
    for line in lines_of(app):
        assert "edited a message" not in line and "reacted" not in line and "deleted a message" not in line, line


async def cursor_on(pilot, app, text: str) -> None:
    """The message cursor on the line reading ``text`` (from the newest, upwards)."""
    view = app.pane.view
    if view.has_focus:  # a cursor left where it was: back to the input, to start again from the newest
        await pilot.press("escape")
    await pilot.press("up")
    for _ in range(30):
        if view.cursor is not None and view.cursor.msg.text == text:
            return
        await pilot.press("up")
    raise AssertionError(f"no line {text!r} under the cursor")


def test_edit_your_own_line_and_see_an_edit_of_someone_else(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await say(pilot, app, "helo everyone")
                await wait_until(pilot, lambda: of(bob, "helo everyone"), what="bob has alice's line")
                await cursor_on(pilot, app, "helo everyone")
                await pilot.press("e")
                pane = app.pane
                assert pane.input.has_focus and pane.input.text == "helo everyone"
                assert "✎ editing: helo everyone   (Esc: cancel)" in widget_text(pane.query_one("#reply-bar"))
                await pilot.press("escape")  # cancelled: nothing sent, the input is empty again
                assert pane.editing is None and pane.input.text == "" and not pane.query_one("#reply-bar").display

                await cursor_on(pilot, app, "helo everyone")
                await pilot.press("e")
                pane.input.load_text("hello everyone")
                await pilot.press("enter")
                await wait_until(pilot, lambda: of(bob, "hello everyone"), what="bob shows the edit")
                assert of(bob, "hello everyone").edited and of(bob, "helo everyone") is None
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "hello everyone (edited)"), what="the edit, here"
                )
                assert not line_with(lines_of(app), "helo everyone")

                # someone else's edit, live: the line repaints with "(edited)"
                mid = await bob.send_text("lunch at 1")
                await wait_until(pilot, lambda: line_with(lines_of(app), "lunch at 1"), what="bob's line")
                await bob.edit(mid, "lunch at 2")
                await wait_until(pilot, lambda: line_with(lines_of(app), "lunch at 2 (edited)"), what="bob's edit")
                assert not line_with(lines_of(app), "lunch at 1")
                no_action_lines(app)

                # not yours: one line, nothing sent, nothing in the input
                await cursor_on(pilot, app, "lunch at 2")
                await pilot.press("e")
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "only your own messages can be edited"), what="refusal"
                )
                assert pane.editing is None and pane.input.text == ""

                # the inspector lists the versions of an edited message
                await cursor_on(pilot, app, "lunch at 2")
                await pilot.press("i")
                screen = app.screen
                assert isinstance(screen, InspectorScreen)
                await wait_until(pilot, lambda: any("versions" in line for line in screen.lines), what="versions")
                assert any("original: lunch at 1" in line for line in screen.lines)
                assert any("edit 1: lunch at 2" in line for line in screen.lines)
                await pilot.press("escape")
                assert app.errors == []

    run(scenario())


def test_delete_asks_first_and_only_your_own(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await say(pilot, app, "oops, wrong channel")
                await bob.send_text("bob's own words")
                await wait_until(pilot, lambda: line_with(lines_of(app), "bob's own words"), what="bob's line")
                await wait_until(pilot, lambda: of(bob, "oops, wrong channel"), what="bob has alice's line")

                await cursor_on(pilot, app, "oops, wrong channel")
                await pilot.press("d")
                screen = app.screen
                assert isinstance(screen, ConfirmScreen)
                assert screen.question == "Delete your message?"
                await pilot.press("n")  # keep it
                assert not isinstance(app.screen, ConfirmScreen)
                await pilot.pause(0.3)
                assert of(alice, "oops, wrong channel") is not None and not of(bob, "oops, wrong channel").deleted

                await cursor_on(pilot, app, "oops, wrong channel")
                await pilot.press("d", "y")
                await wait_until(
                    pilot,
                    lambda: any(m.deleted and m.sender_id == alice.participant_id for m in bob.messages()),
                    what="bob shows it deleted",
                )
                await wait_until(pilot, lambda: line_with(lines_of(app), "message deleted"), what="deleted, here")
                assert not line_with(lines_of(app), "oops")  # nothing of its text is left

                await cursor_on(pilot, app, "bob's own words")
                await pilot.press("d")
                assert not isinstance(app.screen, ConfirmScreen)
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "only your own messages can be deleted"), what="refusal"
                )
                assert not of(bob, "bob's own words").deleted
                no_action_lines(app)
                assert app.errors == []

    run(scenario())


def test_an_admin_deletes_a_members_line(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, admin="alice") as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("buy cheap watches")
                await wait_until(pilot, lambda: line_with(lines_of(app), "cheap watches"), what="bob's line")
                await cursor_on(pilot, app, "buy cheap watches")
                await pilot.press("d")
                screen = app.screen
                assert isinstance(screen, ConfirmScreen)
                assert screen.question == "Delete bob's message, as an admin of the channel?"
                await pilot.press("enter")
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "message deleted by alice (admin)"), what="deleted here"
                )
                await wait_until(
                    pilot,
                    lambda: any(m.deleted_by == alice.participant_id for m in bob.messages()),
                    what="deleted at bob's",
                )
                assert not line_with(lines_of(app), "watches")
                no_action_lines(app)
                assert app.errors == []

    run(scenario())


def test_react_take_it_back_and_the_line_at_80_columns(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice", "bob", "carol")) as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(80, 24)) as pilot:
                mid = await bob.send_text("shipping the release tonight")
                await wait_until(pilot, lambda: line_with(lines_of(app), "release tonight"), what="bob's line")
                await cursor_on(pilot, app, "shipping the release tonight")
                await pilot.press("plus")
                assert isinstance(app.screen, ReactScreen)
                await pilot.press("1")  # 👍
                assert not isinstance(app.screen, ReactScreen)
                await carol.react(mid, "👍")
                await carol.react(mid, "🎉")

                def under() -> str:
                    lines = lines_of(app)
                    at = lines.index(line_with(lines, "release tonight"))
                    return lines[at + 1] if at + 1 < len(lines) else ""

                await wait_until(
                    pilot, lambda: "👍 2 alice, carol  🎉 1 carol" in under(), what="reactions", describe=under
                )
                assert under().startswith(" " * 20)  # under the text column
                await wait_until(pilot, lambda: of(bob, "shipping the release tonight").reactions, what="bob's")

                # the same again takes it back; an emoji typed in works as well
                await cursor_on(pilot, app, "shipping the release tonight")
                await pilot.press("plus", "1")
                await wait_until(pilot, lambda: "👍 1 carol  🎉 1 carol" in under(), what="taken back", describe=under)
                await cursor_on(pilot, app, "shipping the release tonight")
                await pilot.press("plus")
                screen = app.screen
                assert isinstance(screen, ReactScreen)
                from textual.widgets import Input

                screen.query_one(Input).value = "🚀"
                await pilot.press("enter")
                await wait_until(pilot, lambda: "🚀 1 alice" in under(), what="typed emoji", describe=under)
                await wait_until(
                    pilot,
                    lambda: (
                        dict(of(bob, "shipping the release tonight").reactions).get("🚀") == (alice.participant_id,)
                    ),
                    what="bob shows the rocket",
                )
                no_action_lines(app)
                # a cancelled picker sends nothing
                await cursor_on(pilot, app, "shipping the release tonight")
                await pilot.press("plus", "escape")
                assert not isinstance(app.screen, ReactScreen)
                assert app.errors == []

    run(scenario())


async def wait_until_held(node, text: str) -> None:
    for _ in range(200):
        if of(node, text) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{node.nick} never showed {text!r}")


def test_a_window_opened_later_shows_what_the_actions_made(tmp_path, run) -> None:
    """The history read back (a restart): edits, deletions and reactions on their messages, none as a line."""
    from sdschat.node import Node

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            mid = await bob.send_text("first draft")
            gone = await bob.send_text("never mind")
            await bob.edit(mid, "final draft")
            await bob.react(mid, "👀")
            await bob.delete(gone)
            for _ in range(100):
                await asyncio.sleep(0.05)
                held = {m.message_id: m for m in alice.messages()}
                if mid in held and held[mid].reactions and gone in held and held[gone].deleted:
                    break
            for n in range(6):  # later lines: with memory for 3, the ones acted on are read from the database
                await bob.send_text(f"later {n}")
            await wait_until_held(alice, "later 5")
            config = dataclasses.replace(alice.config, memory_messages=3)
            await alice.stop()
            again = await Node.start(config)
            try:
                app = ChatApp(again, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    await wait_until(pilot, lambda: line_with(lines_of(app), "final draft (edited)"), what="history")
                    lines = lines_of(app)
                    at = lines.index(line_with(lines, "final draft (edited)"))
                    assert "👀 1 bob" in lines[at + 1]
                    assert line_with(lines, "bob message deleted") and not line_with(lines, "never mind")
                    no_action_lines(app)
                    assert app.errors == []
            finally:
                await again.stop()

    run(scenario())
