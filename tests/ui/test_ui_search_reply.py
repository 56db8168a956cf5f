"""Search and jump, the message cursor, replies and copying, with real nodes over an embedded broker."""

from __future__ import annotations

import base64

import pytest
from ui_helpers import capture_writes, cluster, line_with, lines_of, profiles, wait_until, wait_until_node, widget_text

from sdschat.node import AppPayload
from sdschat.node import events as ev
from sdschat.profile import Profile
from sdschat.ui.app import ChatApp
from sdschat.ui.screens import SearchScreen
from sdschat.ui.timeline import QUOTE_LOST, QUOTE_MISSING, QUOTE_TEXT, Timeline
from sdschat.ui.widgets import chat_pane
from sdschat.ui.widgets.channel_list import ChannelList
from sdschat.ui.window import ChannelWindow

SIZE = (120, 30)


def test_search_every_channel_and_jump_to_a_message_far_back(tmp_path, run, monkeypatch) -> None:
    monkeypatch.setattr(chat_pane, "HISTORY_PAGE", 20)  # a page of 20: message 5 of 80 is far back

    async def scenario():
        async with profiles(tmp_path, alice=("ops", "team"), bob=("team",)) as group:
            bobs = await group.client(group["bob"])
            client = await group.client(Profile.load(group["alice"].paths))
            team = bobs.nodes[0]
            for i in range(80):
                await team.send_text("the Café needle is here" if i == 5 else f"chatter {i}")
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                rows = app.query_one(ChannelList).rows
                await wait_until(pilot, lambda: all(r.connection == "connected" for r in rows), what="up")
                await wait_until(pilot, lambda: len(client.nodes[1].messages()) >= 80, timeout=15, what="all 80")
                assert app.active_pane().channel_name == "ops"
                await pilot.press(*'/search "unclosed', "enter")  # a bad query: one line, the screen stays
                await wait_until(pilot, lambda: isinstance(app.screen, SearchScreen), what="search screen")
                status = app.screen.query_one("#search-status")
                await wait_until(pilot, lambda: "unclosed quote" in widget_text(status), what="hint")
                app.screen.query_one("Input").value = "cafe needle"
                await pilot.press("enter")
                await wait_until(pilot, lambda: app.screen.hits, what="results")
                hits = app.screen.hits
                assert [(h.channel, h.message.text) for h in hits] == [("team", "the Café needle is here")]
                option = app.screen.query_one("OptionList").get_option_at_index(0).prompt
                assert "#team" in option.plain and "bob" in option.plain
                marked = [option.plain[s.start : s.end] for s in option.spans if "yellow" in str(s.style)]
                assert marked == ["Café", "needle"]
                await pilot.press("enter")  # jump
                pane = app.active_pane()
                await wait_until(pilot, lambda: pane.view.cursor is not None, what="cursor on the result")
                view = pane.view
                assert pane.channel_name == "team" and view.cursor.msg.text == "the Café needle is here"
                assert view.more_below and view.more_above is False  # loaded around it, not to the end
                assert any("the Café needle is here" in line for line in view.visible_text())
                texts = [m.msg.text for m in view.timeline.by_mid.values()]
                assert {"chatter 4", "chatter 6"} <= set(texts) and "chatter 79" not in texts
                # a message arriving now is beyond the window: counted, not inserted out of order
                await team.send_text("live one")
                await wait_until(pilot, lambda: view.new_below >= 1, what="counted below")
                assert "live one" not in [m.msg.text for m in view.timeline.by_mid.values()]
                await pilot.press("ctrl+end")  # back to the end: the last page, live again
                await wait_until(pilot, lambda: not view.more_below and view.at_bottom, what="at the end")
                assert any("live one" in line for line in view.visible_text())
                assert app.errors == []

    run(scenario())


def test_cursor_reply_and_copy(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                writes = capture_writes(app)
                await bob.send_text("what time is lunch?")
                await bob.send_text("and where?")
                await wait_until(pilot, lambda: line_with(lines_of(app), "and where?"), what="bob's lines")
                await pilot.press("up")  # empty input: the message cursor, on the newest message
                view = app.pane.view
                assert view.has_focus and view.cursor.msg.text == "and where?"
                await pilot.press("up")
                assert view.cursor.msg.text == "what time is lunch?"
                await pilot.press("c")
                osc = base64.b64encode(b"what time is lunch?").decode()
                await wait_until(pilot, lambda: f"\x1b]52;c;{osc}" in "".join(writes), what="OSC 52")
                await pilot.press("r")
                assert app.pane.input.has_focus and view.cursor is None
                assert "replying to bob: what time is lunch?" in widget_text(app.pane.query_one("#reply-bar"))
                await pilot.press(*"noon", "enter")
                await wait_until(pilot, lambda: any(m.text == "noon" for m in bob.messages()), what="bob has it")
                reply = next(m for m in bob.messages() if m.text == "noon")
                parent = next(m for m in bob.messages() if m.text == "what time is lunch?")
                assert reply.reply_to == parent.message_id
                lines = lines_of(app)
                i = lines.index(line_with(lines, "noon"))
                assert "↳ bob: what time is lunch?" in lines[i - 1]
                assert not app.pane.query_one("#reply-bar").display
                # Escape cancels a reply; typing on the cursor goes back to the input with the key
                await pilot.press("up", "r", "escape")
                assert app.pane.replying is None
                await pilot.press("up", "x")
                assert app.pane.input.has_focus and app.pane.input.text == "x"
                assert app.errors == []

    run(scenario())


def test_a_reply_whose_parent_arrives_by_repair_fills_in_its_quote(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("everyone gets this")
                await wait_until(pilot, lambda: line_with(lines_of(app), "everyone gets this"), what="first")
                alice.set_impairment(loss_in=1.0)
                parent = await bob.send_text("the plan: ship on friday")
                await pilot.pause(0.3)
                alice.set_impairment(loss_in=0.0)
                await bob.send_text("agreed?", reply_to=parent)

                def quote() -> str | None:
                    lines = lines_of(app)
                    line = line_with(lines, "agreed?")
                    return lines[lines.index(line) - 1] if line else None

                await wait_until(pilot, lambda: quote() is not None, what="the reply")
                assert "↳ reply to a message possibly missing" in quote()
                await wait_until(
                    pilot,
                    lambda: "↳ bob: the plan: ship on friday" in (quote() or ""),
                    timeout=10,
                    what="quote filled in after the repair",
                )
                assert line_with(lines_of(app), "the plan: ship on friday")
                assert app.errors == []

    run(scenario())


def msg(mid: str, lamport: int, text: str = "", reply_to: str | None = None) -> ev.ChatMessage:
    return ev.ChatMessage(mid, "b0", "bob", text or mid, "msg", 1_000, lamport, False, ev.RECEIVED, reply_to=reply_to)


def test_reply_quotes_follow_the_parent() -> None:
    tl = Timeline()
    tl.load([msg("p", 1, "parent text"), msg("r1", 2, "answer", reply_to="p")])
    assert tl.by_mid["r1"].quote == (QUOTE_TEXT, "bob", "b0", "parent text")
    # a parent nobody has: possibly missing, looked up in the database by the pane, then lost
    tl.add_message(msg("r2", 3, reply_to="gone"))
    assert tl.by_mid["r2"].quote == (QUOTE_MISSING,) and tl.unresolved == {"gone"}
    tl.message_lost("gone", None)
    assert tl.by_mid["r2"].quote == (QUOTE_LOST,)
    # a parent older than what is loaded: found in the database
    tl.add_message(msg("r3", 4, reply_to="old"))
    tl.parent_found(msg("old", 0, "from long ago"))
    assert tl.by_mid["r3"].quote == (QUOTE_TEXT, "bob", "b0", "from long ago")
    # a parent counted as missing by a gap marker, delivered later
    tl.gap_opened("r4", ["late"])
    tl.add_message(msg("r4", 6, reply_to="late"))
    assert tl.by_mid["r4"].quote == (QUOTE_MISSING,) and "late" not in tl.unresolved
    tl.add_message(msg("late", 5, "here now"))
    assert tl.by_mid["r4"].quote[3] == "here now"


def test_a_reply_is_plain_text_to_a_peer_without_replies() -> None:
    parent = "ab" * 32
    reply = AppPayload.new("msg", "alice", "noon", 1, reply_to=parent)
    raw = reply.encode()
    assert AppPayload.decode(raw).reply_to == parent
    import json

    obj = json.loads(raw)
    assert obj["v"] == 1 and obj["text"] == "noon" and obj["re"] == parent  # same version: old peers read it
    assert AppPayload.decode(json.dumps({**obj, "re": "not an id"}).encode()).reply_to == ""  # ignored
    with pytest.raises(ValueError):
        AppPayload.new("msg", "alice", "x", 1, reply_to="nope")


def test_the_inspector_follows_a_message_whose_first_copy_is_lost_live(tmp_path, run) -> None:
    """``i`` on the cursor: the message's life as the node recorded it, read again while it happens."""
    from sdschat.ui.screens.inspector import InspectorScreen

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("hello alice")
                await wait_until(pilot, lambda: line_with(lines_of(app), "hello alice"), what="bob's line")
                bob.set_impairment(loss_in=1.0)  # bob misses alice's first copy: she resends
                await pilot.press(*"did you get this?", "enter")
                await wait_until(pilot, lambda: line_with(lines_of(app), "did you get this?"), what="own line")
                await pilot.press("up")
                assert app.pane.view.cursor.msg.text == "did you get this?"
                await pilot.press("i")
                screen = app.screen
                assert isinstance(screen, InspectorScreen)
                await wait_until(pilot, lambda: any("resent (#1)" in line for line in screen.lines), what="a resend")
                assert any(line.startswith("now: not yet acknowledged: resend #") for line in screen.lines)
                bob.set_impairment(loss_in=0.0)
                await wait_until(
                    pilot,
                    lambda: any("acknowledged: in the" in line and "bob's" in line for line in screen.lines),
                    timeout=10,
                    what="bob's ack",
                )
                body = [line for line in screen.lines if "+" in line and " s  " in line]
                assert "sent, naming 1 earlier message(s)" in body[0] and "acknowledged" in body[-1]
                assert not any(line.startswith("now:") for line in screen.lines)  # nothing pending any more
                assert any("first acknowledgement" in line for line in screen.lines)
                assert "acknowledged by bob" in screen.lines  # per member: everyone seen has it
                await pilot.press("escape")
                assert not isinstance(app.screen, InspectorScreen)
                assert app.errors == []

    run(scenario())


def test_a_line_that_arrives_while_ctrl_end_reads_the_last_page_is_shown(tmp_path, run, monkeypatch) -> None:
    """From a search result far back, Ctrl+End reads the last page again; bob's line reaches alice's node after
    that read and before its page replaces the view: it is shown, once, at the end (it was dropped as beyond the
    old view, then missing from the page read before it came)."""

    monkeypatch.setattr(chat_pane, "HISTORY_PAGE", 10)

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            for i in range(30):
                await bob.send_text(f"chatter {i}")
            await wait_until_node(lambda: sum(m.text.startswith("chatter") for m in alice.messages()) == 30)
            far = next(m for m in alice.messages() if m.text == "chatter 3")
            read_history = alice.history
            arriving = []

            async def history(**kwargs):
                page = await read_history(**kwargs)
                if arriving and not kwargs.keys() & {"before", "after"}:  # Ctrl+End's read of the last page: a line
                    # comes in before that page is on screen
                    text = arriving.pop()
                    await bob.send_text(text)
                    await wait_until_node(lambda: any(m.text == text for m in alice.messages()), timeout=5, what=text)
                return page

            alice.history = history
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                pane = app.pane
                view = pane.view
                await wait_until(pilot, lambda: line_with(lines_of(app), "chatter 29"), what="the last page")
                assert await pane.jump_to(far.message_id, far.log_key)
                await wait_until(pilot, lambda: view.cursor is not None, what="the cursor on chatter 3")
                assert view.more_below and "chatter 29" not in [it.msg.text for it in view.timeline.by_mid.values()]
                arriving.append("while the last page loads")
                await pilot.press("ctrl+end")
                await wait_until(pilot, lambda: not view.more_below and view.at_bottom, what="at the end")
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "while the last page loads"), what="the line that came"
                )
                assert not arriving  # (the read the line came during was Ctrl+End's)
                texts = [it.msg.text for it in view.timeline.by_mid.values()]
                assert texts.count("while the last page loads") == 1 and texts[-1] == "while the last page loads"
                assert app.errors == []

    run(scenario())


def test_a_long_result_keeps_every_match_on_a_narrow_line() -> None:
    """A later match in a long line is not lost past the right edge: the stretch between two matches keeps its
    ends around an "…" (at 80 columns the search screen has about 70 for a result); a short one stays whole."""
    from rich.console import Console

    from sdschat.node import SearchHit
    from sdschat.ui.screens.search import hit_texts

    text = "release notes: " + "the build passed on every platform we ship, " * 6 + "and the deadline is friday"
    spans = tuple((text.index(w), text.index(w) + len(w)) for w in ("release", "deadline"))
    (line,) = hit_texts([SearchHit("team", msg("m1", 1, text), 1, spans)], now_ms=1_000)
    console = Console(width=70, record=True, color_system=None)
    console.print(line)
    shown = console.export_text().rstrip("\n")
    assert "\n" not in shown and "bob  release notes: the …ip, and the deadline" in shown
    assert "deadline is friday" in shown  # the later match and what follows it, within 70 columns
    assert [line.plain[s.start : s.end] for s in line.spans if "yellow" in str(s.style)] == ["release", "deadline"]
    near = "the deadline moved: friday deadline"
    spans = tuple((i, i + 8) for i in (near.index("deadline"), near.rindex("deadline")))
    (line,) = hit_texts([SearchHit("team", msg("m2", 2, near), 2, spans)], now_ms=1_000)
    assert line.plain.endswith(near)  # nothing cut between two matches close together
