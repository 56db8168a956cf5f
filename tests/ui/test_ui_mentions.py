"""Mentions: what counts as naming you, ``@`` + Tab, and in the window: highlight, a separate count, the bell
and a desktop notification (OSC 777 / OSC 9) when the terminal is not focused."""

from __future__ import annotations

from ui_helpers import capture_writes, profiles, wait_until, widget_text

from sdschat.profile import Profile
from sdschat.ui.mentions import mentions, name_choices, names_pattern
from sdschat.ui.widgets.channel_list import ChannelList
from sdschat.ui.window import ChannelWindow


def test_what_names_you() -> None:
    p = names_pattern(["alice"])
    for text in ("hi alice", "@alice look", "Alice: done?", "ALICE!", "(alice)", "thanks,alice"):
        assert mentions(text, p), text
    for text in ("malice", "alice2", "alice_b", "mail x@alice.example", "nobody"):
        assert not mentions(text, p), text
    assert not mentions("alice", names_pattern([""])) and names_pattern([]) is None
    assert mentions("the Deploy is done", names_pattern(["alice", "deploy"]))  # a highlight word


def test_name_completion_choices() -> None:
    names = ["bob", "bobby", "carol", "Béa", "bob#3f2a"]
    assert name_choices("@c", names) == (0, ["@carol: "])  # at the start: addressed
    assert name_choices("c", names) == (0, ["carol: "])  # with or without @
    assert name_choices("thanks @car", names) == (7, ["@carol "])
    assert name_choices("thanks car", names) == (7, ["carol "])
    assert name_choices("c", names, first_line=False) == (0, ["carol "])  # a later line addresses nobody
    assert name_choices("@bo", names) == (0, ["@bob: ", "@bob#3f2a: ", "@bobby: "])  # every choice, in order
    assert name_choices("@bé", names) == (0, ["@Béa: "])
    assert name_choices("@x", names)[1] == [] and name_choices("", names)[1] == []
    assert name_choices("mail x@c", names)[1] == []  # not a word of its own
    assert name_choices("no at ", names)[1] == []  # nothing typed at the cursor


def test_mentions_in_the_window(tmp_path, run) -> None:
    async def scenario():
        async with profiles(tmp_path, alice=("ops", "team"), bob=("team",)) as group:
            alice = group["alice"]
            alice.notifications.highlight = ("deploy",)
            alice.save()
            bobs = await group.client(group["bob"])
            client = await group.client(Profile.load(alice.paths))  # as saved, highlight words and all
            bells: list[int] = []
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                writes = capture_writes(app)
                app.bell = lambda: bells.append(1)
                rows = app.query_one(ChannelList).rows
                await wait_until(pilot, lambda: all(r.connection == "connected" for r in rows), what="up")
                team = bobs.nodes[0]
                await team.send_text("morning all")
                await wait_until(pilot, lambda: rows[1].unread == 1, what="unread")
                assert (rows[1].mentions, bells) == (0, [])

                app.app_focus = False  # the person is in another window
                await team.send_text("@alice can you look at the deploy?")
                await wait_until(pilot, lambda: rows[1].mentions == 1, what="the mention")
                assert rows[1].unread == 2 and bells == [1]
                osc = "".join(writes)
                assert "\x1b]777;notify;bob in #team;@alice can you look at the deploy?" in osc
                assert "\x1b]9;bob in #team: @alice can you look at the deploy?" in osc
                await wait_until(
                    pilot,
                    lambda: "@1 2" in widget_text(app.query_one(ChannelList)),
                    what="'@1' beside the unread count",
                )

                app.app_focus = True  # looking at the terminal: the bell only
                await team.send_text("ALICE: ping")
                await wait_until(pilot, lambda: rows[1].mentions == 2, what="second mention")
                assert bells == [1, 1] and osc.count("]777;") == "".join(writes).count("]777;")

                await pilot.press("alt+2")
                pane = app.active_pane()
                await wait_until(pilot, lambda: rows[1].unread == 0 and rows[1].mentions == 0, what="read")
                named = [it.msg.text for it in pane.view.timeline.items if getattr(it, "mention", False)]
                assert named == ["@alice can you look at the deploy?", "ALICE: ping"]

                await pilot.press("@", "b", "tab")  # completes the members seen here
                assert pane.input.text == "@bob: "
                pane.input.load_text("")

                # /mute: still highlighted and counted, but silent; remembered in the profile; /unmute
                pane.input.load_text("/mute")
                await pilot.press("enter")
                await pilot.press("alt+1")
                await team.send_text("alice, still there?")
                await wait_until(pilot, lambda: rows[1].mentions == 1, what="muted mention counted")
                assert bells == [1, 1] and Profile.load(alice.paths).channel("team").muted
                await pilot.press("alt+2")
                pane.input.load_text("/unmute")
                await pilot.press("enter")
                await pilot.pause(0.1)
                assert not Profile.load(alice.paths).channel("team").muted and not pane.muted

                # a highlight word counts like your name (words from the profile's [notifications])
                assert pane.view.timeline.highlight.search("the Deploy went out")
                await pilot.press("ctrl+q")
            assert app.errors == []

    run(scenario(), timeout=60)


def test_a_mention_that_arrives_by_repair_notifies_once(tmp_path, run) -> None:
    """alice's link drops bob's mention; it comes back later (a resend or SDS-R, whichever is first) and
    notifies then, once, however many copies arrive."""

    async def scenario():
        async with profiles(tmp_path, alice=("ops", "team"), bob=("team",)) as group:
            bobs = await group.client(group["bob"])
            client = await group.client(group["alice"])
            bells: list[int] = []
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                app.bell = lambda: bells.append(1)
                rows = app.query_one(ChannelList).rows
                await wait_until(pilot, lambda: all(r.connection == "connected" for r in rows), what="up")
                mine = {n.key.channel_name: n for n in client.nodes}["team"]
                mine.set_impairment(loss_in=1.0)
                await bobs.nodes[0].send_text("@alice this one gets lost on the way")
                await pilot.pause(0.5)
                assert bells == [] and rows[1].mentions == 0
                mine.set_impairment(loss_in=0.0)
                await bobs.nodes[0].send_text("and this one names it")
                await wait_until(pilot, lambda: rows[1].unread == 2, timeout=20, what="the repair")
                await wait_until(pilot, lambda: not bobs.nodes[0].pending(), timeout=20, what="acknowledged")
                await pilot.pause(0.5)
                assert rows[1].mentions == 1 and bells == [1]
                repaired = [m for m in mine.messages() if m.text.startswith("@alice")]
                assert len(repaired) == 1 and repaired[0].repaired
                await pilot.press("ctrl+q")

    run(scenario(), timeout=60)


def test_not_protected_a_mention_reaches_the_desktop_unless_switched_off(tmp_path, run) -> None:
    """SECURITY.md: a mention's sender, channel and text leave the terminal for the desktop's notifications
    (which may keep them) while the terminal is not focused; a peer's control characters cannot end the
    sequence early; ``desktop = false`` stops it."""

    async def scenario():
        async with profiles(tmp_path, alice=("team",), bob=("team",)) as group:
            bobs = await group.client(group["bob"])
            client = await group.client(group["alice"])
            app = ChannelWindow(client, blink=False)
            async with app.run_test(size=(100, 24)) as pilot:
                writes = capture_writes(app)
                pane = app.active_pane()
                await wait_until(pilot, lambda: pane.connection == "connected", what="up")
                app.app_focus = False
                await bobs.nodes[0].send_text("alice \x1b]0;owned\x07 secret plans; meet at 5")
                await wait_until(pilot, lambda: any("]777;" in w for w in writes), what="the notification")
                osc = next(w for w in writes if "]777;" in w)
                assert "alice  ]0,owned  secret plans, meet at 5" in osc  # readable, and the plaintext leaves
                assert osc.count("\x1b") == 4 and "\x07" not in osc  # only our own two sequences
                client.notifications.desktop = False  # desktop = false in profile.toml
                before = len(writes)
                await bobs.nodes[0].send_text("alice, again")
                await wait_until(
                    pilot,
                    lambda: any("alice, again" in it.msg.text for it in pane.view.timeline.items if hasattr(it, "msg")),
                    what="the second mention",
                )
                await pilot.pause(0.2)
                assert not any("]777;" in w or "]9;" in w for w in writes[before:])
                await pilot.press("ctrl+q")

    run(scenario(), timeout=60)
