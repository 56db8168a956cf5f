"""Tab in the input bar (Pilot, real nodes over an embedded broker; and the real ``sdschat`` in tmux): it
completes the word at the cursor -- a member's name with or without ``@``, a /command at the start -- cycles
through the choices, and never takes the focus away from the input."""

from __future__ import annotations

import contextlib
import time

from brokers import Mosquitto, mosquitto_binary
from terminal import Tmux, sdschat_command
from ui_helpers import channel_secret, cluster, twin_of, wait_until

from sdschat.profile import Profile, resolve_paths
from sdschat.ui.app import ChatApp

SIZE = (140, 40)


async def _seen(pilot, app, *nicks: str) -> None:
    await wait_until(
        pilot, lambda: set(nicks) <= set(app.pane.member_names()), timeout=10, what=f"{', '.join(nicks)} seen"
    )


def test_tab_completes_names_and_commands_and_keeps_the_focus(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, ("alice", "bob", "bobby", "carol")) as (alice, bob, bobby, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                for node in (bob, bobby, carol):
                    await node.send_text(f"hi from {node.nick}")
                await _seen(pilot, app, "bob", "bobby", "carol")
                box = app.pane.input
                assert app.focused is box

                # nothing to complete: the focus stays, and what is typed next goes on the line
                await pilot.press("tab")
                assert app.focused is box and box.text == ""
                await pilot.press(*"hello ", "tab", *"world", "tab", "tab")
                assert app.focused is box and box.text == "hello world"
                box.load_text("")

                # a bare word at the start addresses someone; Tab again: the next one, Shift+Tab: back
                await pilot.press("b", "tab")
                assert box.text == "bob: " and app.focused is box
                await pilot.press("tab")
                assert box.text == "bobby: "
                await pilot.press("tab")
                assert box.text == "bob: "  # round again
                await pilot.press("shift+tab")
                assert box.text == "bobby: " and app.focused is box
                await pilot.press(*"lunch?")
                assert box.text == "bobby: lunch?"
                box.load_text("")

                # elsewhere in the line: the name and a space; any case; @ kept
                await pilot.press(*"thanks C", "tab", *"and ", "@", "b", "o", "b", "b", "tab", "!")
                assert box.text == "thanks carol and @bobby !"
                box.load_text("")
                await pilot.press("@", "b", "tab")
                assert box.text == "@bob: "
                box.load_text("")

                # a word the cursor is inside of the line: completed where it is, the rest kept
                await pilot.press(*"hey  ok", "left", "left", "left", "c", "tab")
                assert box.text == "hey carol  ok" and box.cursor_location == (0, 10)
                box.load_text("")

                # a /command at the start, then a name as its argument
                await pilot.press(*"/wh", "tab")
                assert box.text == "/whois "
                await pilot.press("c", "a", "tab")
                assert box.text == "/whois carol "
                box.load_text("")
                await pilot.press(*"/zz", "tab", "x")  # no such command: nothing happens, typing goes on
                assert box.text == "/zzx" and app.focused is box
                assert app.errors == []

    run(scenario())


def test_two_members_with_one_nick_complete_with_their_fingerprints(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, ("alice", "bob")) as (alice, bob):
            async with twin_of(bob, tmp_path) as twin:
                app = ChatApp(alice, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    await bob.send_text("the real bob")
                    await twin.send_text("the other bob")
                    real, other = f"bob#{bob.participant_id[:4]}", f"bob#{twin.participant_id[:4]}"
                    await _seen(pilot, app, real, other)
                    box = app.pane.input
                    await pilot.press("b", "tab")
                    first = box.text
                    await pilot.press("tab")
                    assert sorted([first, box.text]) == sorted([f"{real}: ", f"{other}: "])
                    await pilot.press("tab")
                    assert box.text == first  # only those two
                    box.load_text("")
                    await pilot.press(*f"ask @{other}", "tab")  # the suffix is part of the name
                    assert box.text == f"ask @{other} "
                    assert app.errors == []

    run(scenario())


def test_a_tab_byte_in_a_real_terminal_keeps_the_line(tmp_path) -> None:
    """The real ``sdschat`` in a tmux pane: the byte a terminal sends for Tab (HT), with nothing to complete,
    leaves the focus in the input: the text typed after it lands on the same line."""
    broker = Mosquitto(mosquitto_binary(), tmp_path)
    broker.start()
    term = None
    try:
        home = tmp_path / "alice"
        Profile.create(resolve_paths(home), "alice", broker.url).add_channel("team", channel_secret("team"))
        term = Tmux(tmp_path)
        term.start([sdschat_command(), "--home", str(home)], (100, 24))
        term.wait_for(lambda rows: any("1 ● #team" in row for row in rows), 40, "#team started and connected")
        # (k, i, j, c and r are keys of the message cursor: typed anywhere but the input, they would be lost)
        term.type("hello")
        term.send_bytes(b"\t")
        time.sleep(0.3)  # a person's pause: the Tab is handled before the next key arrives
        term.type("kit")
        term.send_bytes(b"\t\t")
        time.sleep(0.3)
        term.type("j!")
        term.wait_for(lambda rows: any("hellokitj!" in row for row in rows), what="the line kept after Tab")
        term.send_bytes(b"\r")  # and it is still the input: Enter sends it
        term.wait_for(
            lambda rows: (
                any("alice" in row and "hellokitj!" in row for row in rows)
                and not any("(/help)" in row and "hello" in row for row in rows)
            ),
            what="the line sent",
        )
    finally:
        with contextlib.suppress(Exception):
            if term is not None:
                term.close()
        broker.close()
