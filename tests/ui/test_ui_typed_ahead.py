"""Keys typed ahead reach the window together (one read from the terminal: over SSH, through tmux, while the
window was busy) and act in the order they were typed. Textual types a letter at once but runs a bound key once
it has gone up to the app, so the letters after an arrow overtook it; the chat input, the message cursor it hands
over to, and the one-line fields take them in order. The keys are posted as the terminal driver posts them: all
at once, before any is handled (``pilot.press`` waits after each key, which hides the difference)."""

from __future__ import annotations

from textual import events
from textual.widgets import Input
from ui_helpers import cluster, wait_until, widget_text

from sdschat.ui.app import ChatApp
from sdschat.ui.screens.search import SearchScreen

SIZE = (120, 30)


def together(app, *keys: str) -> None:
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))


async def sent(pilot, app, node, *texts: str) -> None:
    for text in texts:
        app.pane.input.load_text(text)
        await pilot.press("enter")
    await wait_until(pilot, lambda: {m.text for m in node.messages()} >= set(texts), what=f"{texts} in the history")


def test_arrows_home_and_end_are_not_overtaken_in_the_chat_input(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, _bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                together(app, "a", "b", "left", "c", "home", "d", "end", "e", "left", "backspace")
                await wait_until(pilot, lambda: app.pane.input.text == "dace", what="dace")
                await pilot.pause(0.1)
                assert app.pane.input.text == "dace" and app.pane.input.cursor_location == (0, 3)
                # the keys the input handles itself still say the person is here (back from an idle away)
                alice.presences.last_active_ms = 0
                together(app, "left")
                await wait_until(pilot, lambda: alice.presences.last_active_ms > 0, what="Left counted as activity")

    run(scenario())


def test_keys_typed_with_up_go_to_the_message_cursor(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, _bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                pane = app.pane
                await sent(pilot, app, alice, "one", "two")

                together(app, "up", "e")  # the cursor on the newest line, and edit it
                await wait_until(pilot, lambda: pane.input.has_focus and pane.input.text == "two", what="editing")
                # (the bar's text comes with its next refresh, a moment later on a loaded machine)
                bar = pane.query_one("#reply-bar")
                await wait_until(pilot, lambda: "✎ editing: two" in widget_text(bar), what="the editing bar")
                await pilot.press("escape")
                await wait_until(pilot, lambda: pane.input.text == "", what="the edit cancelled")

                together(app, "up", "up", "down")  # up to "one" and back down to "two": Down is not lost
                await wait_until(pilot, lambda: pane.view.has_focus, what="the message cursor")
                await pilot.pause(0.1)
                assert pane.view.cursor is not None and pane.view.cursor.msg.text == "two"
                await pilot.press("escape")
                await wait_until(pilot, lambda: pane.input.has_focus, what="back in the input")

                together(app, "up", "x", "y")  # a letter on the cursor goes back to typing: nothing recalled
                await wait_until(pilot, lambda: pane.input.has_focus and pane.input.text == "xy", what="xy typed")

    run(scenario())


def test_a_one_line_field_takes_its_keys_in_order(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, _bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:

                async def nothing(query: str) -> list:
                    return []

                app.push_screen(SearchScreen("", nothing, now_ms=0))
                await wait_until(pilot, lambda: isinstance(app.focused, Input), what="the search field")
                field = app.focused
                together(app, "a", "b", "left", "c", "home", "d")
                await wait_until(pilot, lambda: field.value == "dacb", what="dacb in the search field")

    run(scenario())


def test_when_the_cursor_cannot_take_the_focus_the_keys_stay_in_the_input(tmp_path, run) -> None:
    """The hand-over to the message cursor never swallows keys: had the focus stayed in the input, what was
    typed with the Up is typed there, and typing goes on."""

    async def scenario():
        async with cluster(tmp_path) as (alice, _bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                pane = app.pane
                await sent(pilot, app, alice, "one")
                pane.view.can_focus = False
                together(app, "up", "x", "y")
                await wait_until(pilot, lambda: pane.input.text == "xy", what="xy typed in the input")
                await pilot.press("z")
                assert pane.input.has_focus and pane.input.text == "xyz"

    run(scenario())
