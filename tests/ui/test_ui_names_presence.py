"""Presence in the window (Pilot, real nodes over an embedded broker): ``/names``, ``/away``, ``/back``, ``/whois``,
the participants' marks in the side panel (F3, at 80x24 too), a key press back from an idle away, and F1's legend."""

from __future__ import annotations

from ui_helpers import cluster, line_with, lines_of, wait_until, widget_text

from sdschat.ui.app import ChatApp
from sdschat.ui.screens import HelpScreen
from sdschat.ui.widgets.side_panel import SidePanel

SIZE = (140, 40)


async def command(pilot, app, text: str) -> None:
    app.pane.input.load_text(text)
    await pilot.press("enter")
    await pilot.pause(0.05)


def notice_with(app, needle: str) -> str:
    """The notice whose first line holds ``needle``, its wrapped lines joined."""
    lines = lines_of(app)
    at = max(i for i, line in enumerate(lines) if needle in line)
    out = [lines[at]]
    for line in lines[at + 1 :]:
        if "—" in line[:12]:  # the next notice
            break
        out.append(line.strip())
    return " ".join(out)


def panel_row(app, nick: str) -> str | None:
    return line_with(widget_text(app.query_one(SidePanel)).splitlines(), nick)


def test_names_away_back_and_whois(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice", "bob", "carol"), admin="alice") as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                for other in (bob, carol):
                    await wait_until(
                        pilot, lambda o=other: alice.presence(o.participant_id).state == "online", what="online"
                    )
                bob.set_away("at lunch")
                await wait_until(pilot, lambda: alice.presence(bob.participant_id).state == "away", what="bob away")
                await command(pilot, app, "/names")
                await wait_until(pilot, lambda: line_with(lines_of(app), "3 members"), what="/names")
                lines = lines_of(app)
                assert "2 online, 1 away, 0 offline" in line_with(lines, "3 members")
                assert "● @alice (you): online" in line_with(lines, "@alice (you)")
                assert "◐ bob: away (at lunch), last heard" in line_with(lines, "◐ bob")
                assert "● carol: online" in line_with(lines, "● carol")
                await wait_until(pilot, lambda: "◐" in (panel_row(app, "bob") or ""), what="bob's mark")
                assert "(at lunch)" in panel_row(app, "bob")
                assert "●" in panel_row(app, "carol") and "●" in panel_row(app, "alice")

                await command(pilot, app, "/away back at 3")
                assert line_with(lines_of(app), "you are marked away: back at 3")
                await wait_until(pilot, lambda: bob.presence(alice.participant_id).state == "away", what="alice away")
                assert bob.presence(alice.participant_id).message == "back at 3"
                await command(pilot, app, "/back")
                assert line_with(lines_of(app), "you are back")
                await wait_until(pilot, lambda: bob.presence(alice.participant_id).state == "online", what="back")
                await command(pilot, app, "/back")
                assert line_with(lines_of(app), "you are not marked away")
                await command(pilot, app, "/away brb")
                await command(pilot, app, "/away")  # alone: back
                assert len([x for x in lines_of(app) if "you are back" in x]) == 2

                await command(pilot, app, "/whois bob")
                await wait_until(pilot, lambda: line_with(lines_of(app), "bob: fingerprint"), what="/whois")
                line = notice_with(app, "bob: fingerprint")
                assert "last heard" in line and "away (at lunch)" in line and "key epoch 0" in line, line

                carol_id = carol.participant_id
                await carol.stop()  # a clean quit: offline at once
                await wait_until(pilot, lambda: "○" in (panel_row(app, "carol") or ""), what="carol's mark")
                await command(pilot, app, "/names")
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "○ carol: offline, last heard"), what="carol offline"
                )
                assert alice.presence(carol_id).state == "offline"
                await command(pilot, app, "/names extra")
                assert line_with(lines_of(app), "usage: /names")
                assert app.errors == []

    run(scenario())


def test_a_key_press_ends_an_idle_away_and_typing_ends_an_away(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice", "bob")) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                alice.presences.away_after_ms = 300  # idle this long: away
                await wait_until(pilot, lambda: line_with(lines_of(app), "you are marked away"), what="idle away")
                await wait_until(pilot, lambda: bob.presence(alice.participant_id).state == "away", what="bob sees")
                alice.presences.away_after_ms = 0
                await pilot.press("/")  # any key in the window
                await wait_until(pilot, lambda: line_with(lines_of(app), "you are back"), what="back on a key")
                await pilot.press("ctrl+u")  # (clear the "/")
                await command(pilot, app, "/away in a meeting")
                await pilot.press("f3")  # (a key that is no typing leaves an /away alone)
                assert alice.presence(alice.participant_id).state == "away"
                await pilot.press(*"hi")  # typing: back
                await wait_until(
                    pilot, lambda: alice.presence(alice.participant_id).state == "online", what="typing ends /away"
                )
                await wait_until(pilot, lambda: bob.presence(alice.participant_id).state == "online", what="bob sees")
                assert app.errors == []

    run(scenario())


def test_the_participants_marks_fit_at_80x24_and_help_explains_them(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("alice", "bob", "carol")) as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(80, 24)) as pilot:
                bob.set_away("a very long away message that cannot fit in the side panel at all")
                await wait_until(pilot, lambda: alice.presence(bob.participant_id).state == "away", what="away")
                if not app.pane.side_panel_shown:
                    await pilot.press("f3")
                panel = app.query_one(SidePanel)
                await wait_until(pilot, lambda: "◐" in (panel_row(app, "bob") or ""), what="bob's mark")
                rows = widget_text(panel).splitlines()
                assert all(len(row) <= panel.size.width for row in rows)
                assert panel_row(app, "bob").rstrip().endswith("ago") or "now" in panel_row(app, "bob")
                assert "…" in panel_row(app, "bob")  # the message is cut, the time stays
                assert "●" in panel_row(app, "carol")
                await pilot.press("f1")
                assert isinstance(app.screen, HelpScreen)
                text = "\n".join(widget_text(s) for s in app.screen.query("Static"))
                for mark in ("● ", "◐ ", "○ "):
                    assert mark in text
                assert "/away MESSAGE" in text
                assert app.errors == []

    run(scenario())


def test_in_the_window_a_key_in_one_channel_brings_back_every_channel(tmp_path, run) -> None:
    async def scenario():
        from ui_helpers import profiles

        from sdschat.ui.window import ChannelWindow

        async with profiles(tmp_path, alice=("team", "ops")) as group:
            client = await group.client(group["alice"])
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                nodes = [pane.node for pane in app.panes]
                assert len(nodes) == 2
                await wait_until(pilot, lambda: all(n.ready for n in nodes), what="both channels up")
                for node in nodes:
                    node.presences.away_after_ms = 300
                me = nodes[0].participant_id
                await wait_until(pilot, lambda: all(n.presence(me).state == "away" for n in nodes), what="idle in both")
                for node in nodes:
                    node.presences.away_after_ms = 0
                await pilot.press("/")  # typed in the channel shown: a key for the person, not the channel
                await wait_until(
                    pilot, lambda: all(n.presence(me).state == "online" for n in nodes), what="back in both"
                )
                assert app.errors == []

    run(scenario())


def test_the_names_legend_is_never_cut_in_two() -> None:
    """At 80 columns ``/names``' first line wraps just before its legend: "(@ admin)" moves whole."""
    from types import SimpleNamespace

    from sdschat.ui.layout import wrap_spans
    from sdschat.ui.screens.members import names_head

    row = SimpleNamespace(presence=SimpleNamespace(state="online"))
    text = names_head("team", [row])
    lines = [text[s:e].rstrip() for s, e in wrap_spans(text, 48, 48)]
    assert lines == ["#team: 1 member · 1 online, 0 away, 0 offline", "(@\u00a0admin)"]
