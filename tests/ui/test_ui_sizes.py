"""The layout at the sizes people's terminals have (Pilot, fixed data): 80x24 leaves the messages room, F3, the
"window too small" notice, help that scrolls, and characters whose width terminals disagree on."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.containers import VerticalScroll
from ui_helpers import FIXED_NOW, T0_MS, UTC, FakeClient, FakeKey, FakeNode, FakeParticipant, fixed_events

from sdschat.node import events as ev
from sdschat.ui.app import ChatApp, DemoApp
from sdschat.ui.layout import Layout, clean_text
from sdschat.ui.screens.help import HelpScreen
from sdschat.ui.sizes import MIN_HEIGHT, MIN_WIDTH, SIDE_PANEL_WIDTH
from sdschat.ui.timeline import MsgItem
from sdschat.ui.widgets import ChatPane, SidePanel
from sdschat.ui.widgets.channel_list import ChannelList
from sdschat.ui.widgets.too_small import TooSmall
from sdschat.ui.window import ChannelWindow

#: what terminals measure their own way (tmux 3.3: a skin-tone modifier is 2 more cells, a presentation
#: selector none; Rich: the other way round), and what they agree on
UNSTABLE = ("\u200d", "\ufe0f", "\ufe0e", "\U0001f3fd", "\U000e0067")


def window(names=("team", "ops", "release-planning", "random")) -> ChannelWindow:
    nodes = [FakeNode(key=FakeKey(channel_name=name)) for name in names]
    return ChannelWindow(FakeClient(nodes), clock=lambda: FIXED_NOW, tz=UTC, blink=False)


def side(app) -> SidePanel:
    return app.active_pane().query_one(SidePanel)


def test_80x24_gives_the_messages_most_of_the_width(run) -> None:
    async def scenario():
        app = window()
        async with app.run_test(size=(80, 24)) as pilot:
            app.panes[0].apply_events(fixed_events())
            await pilot.pause()
            pane = app.active_pane()
            assert not side(app).display  # the side panel gave way
            assert pane.view.scrollable_content_region.width >= 54
            assert app.query_one(ChannelList).outer_size.width <= 18
            # a 40-character message on one row
            assert pane.view._layout.room >= 40
            # the placeholder on one line, whole
            assert pane.input.render_line(0).text.strip() == "Message #team as alice  (/help)"
            assert pane.input.render_line(1).text.strip() == ""

            # at 140x40 everything is there
            await pilot.resize_terminal(140, 40)
            await pilot.pause()
            assert side(app).display and side(app).outer_size.width == 34
            assert app.query_one(ChannelList).outer_size.width == 24
            assert pane.view.scrollable_content_region.width >= 60

    run(scenario())


def test_f3_shows_and_hides_the_side_panel_at_any_width(run) -> None:
    async def scenario():
        app = window()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("f3")
            await pilot.pause()
            assert side(app).display and side(app).size.width > 10
            assert app.active_pane().view.scrollable_content_region.width > 20
            # the channel's counters under labels that fit, in short words rather than cut with an ellipsis
            panel = side(app)
            shown = [t.plain for t in panel.lines(panel.scrollable_content_region.width)]
            labels = {line.split()[0] for line in shown if line.strip()}
            assert {"unacked", "poss", "rep.", "unreadable"} <= labels, shown
            assert not any("…" in line for line in shown), shown
            await pilot.press("alt+2")  # every channel's pane
            await pilot.pause()
            assert side(app).display
            await pilot.resize_terminal(SIDE_PANEL_WIDTH + 20, 40)  # kept across resizes
            await pilot.pause()
            assert side(app).display
            await pilot.press("f3")
            await pilot.pause()
            assert not side(app).display
            await pilot.resize_terminal(100, 30)
            await pilot.pause()
            assert not side(app).display
            await pilot.press("f3")
            await pilot.pause()
            assert side(app).display

    run(scenario())


def test_too_small_shows_a_notice_and_the_layout_comes_back_with_the_focus(run) -> None:
    async def scenario():
        for app in (
            window(),
            ChatApp(FakeNode(), clock=lambda: FIXED_NOW, tz=UTC, blink=False),
            DemoApp(
                [FakeNode(nick=n) for n in ("alice", "bob", "carol")], clock=lambda: FIXED_NOW, tz=UTC, blink=False
            ),
        ):
            async with app.run_test(size=(80, 24)) as pilot:
                await pilot.pause()
                await pilot.press(*"draft")
                notice = app.query_one(TooSmall)
                assert not notice.display
                for size in ((MIN_WIDTH - 1, 24), (80, MIN_HEIGHT - 1), (20, 8)):
                    await pilot.resize_terminal(*size)
                    await pilot.pause()
                    assert notice.display, size
                    assert not app.active_pane().region  # not laid out: nothing to draw at such a width
                    assert f"{size[0]}x{size[1]}" in str(notice.render()) and "too small" in str(notice.render())
                await pilot.resize_terminal(MIN_WIDTH, MIN_HEIGHT)
                await pilot.pause()
                assert not notice.display and app.active_pane().region.width >= 12
                await pilot.press(*" more")  # the input has the focus again
                assert app.active_pane().input.text == "draft more"
                assert not app.errors

    run(scenario())


def test_typing_reaches_the_input_when_it_is_shown_again_before_its_hide_is_handled(run) -> None:
    """Rapid resizes: the layout is hidden and back before the input handles its Hide. Textual's blur then hands
    the focus to the next widget in the chain (the message view), which passes what is typed to the input."""

    async def scenario():
        app = window()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            chat_input = app.active_pane().input
            assert app.screen.focused is chat_input
            chat_input.post_message(events.Hide())
            chat_input.post_message(events.Show())
            await pilot.pause()
            await pilot.pause()
            await pilot.press(*"Zq")
            assert chat_input.text == "Zq"
            assert app.screen.focused is chat_input
            assert not app.errors

    run(scenario())


def test_typing_reaches_the_input_whatever_a_resize_left_focused(run) -> None:
    """A resize that hides the layout hands the focus on (the channel list) or drops it: what is typed next still
    goes into the active input, which takes the focus back."""

    async def scenario():
        app = window()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            chat_input = app.active_pane().input
            for focus in (app.query_one(ChannelList), None):
                chat_input.text = ""
                app.screen.set_focus(focus)
                await pilot.pause()
                await pilot.press(*"Zq")
                await pilot.pause()
                assert chat_input.text == "Zq", focus
                assert app.screen.focused is chat_input
            assert not app.errors

    run(scenario())


def test_help_scrolls_with_the_keyboard(run) -> None:
    async def scenario():
        app = window()
        async with app.run_test(size=(80, 24)) as pilot:
            app.panes[0].apply_events(fixed_events())
            await pilot.pause()
            behind = app.active_pane().view.scroll_y
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            box = app.screen.query_one(VerticalScroll)
            assert box.max_scroll_y > 10 and box.scroll_y == 0
            await pilot.press("pagedown")
            await pilot.pause()
            paged = box.scroll_y
            assert paged > 0
            await pilot.press("down")
            await pilot.pause()
            assert box.scroll_y == paged + 1
            await pilot.press("space")
            await pilot.pause()
            assert box.scroll_y > paged + 1
            await pilot.press("end")
            await pilot.pause()
            assert box.scroll_y == box.max_scroll_y
            await pilot.press("pageup")
            await pilot.pause()
            assert box.scroll_y < box.max_scroll_y
            await pilot.press("home")
            await pilot.pause()
            assert box.scroll_y == 0
            assert app.active_pane().view.scroll_y == behind  # the keys were the help's, not the history's
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("pageup")  # and the history's again once it is closed
            await pilot.pause()
            assert app.active_pane().view.scroll_y != behind

    run(scenario())


# ------------------------------------------------------------ characters


def test_clean_text_leaves_characters_every_terminal_measures_alike() -> None:
    assert (
        clean_text("ok 👍🏽 👨‍👩‍👧 ❤️ 🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f")
        == "ok 👍 👨👩👧 ❤ 🏴"
    )
    assert clean_text("cafe\u0301 🇫🇷 漢字") == "café 🇫🇷 漢字"  # composed; flags and CJK stay
    assert clean_text("plain ascii") == "plain ascii"
    for text in ("👍🏽", "a\u200db", "❤️", "x\U0001f3fbx"):
        cleaned = clean_text(text)
        assert not any(ch in cleaned for ch in UNSTABLE)
        assert cell_len(cleaned) == sum(cell_len(ch) for ch in cleaned)  # one width, however it is cut


def test_wide_characters_never_leave_their_column(run) -> None:
    """Every painted line of the message view, the channel list and the side panel is exactly its widget's
    width, with nothing a terminal could measure otherwise."""
    nick = "bob👍🏽👨‍👩‍👧❤️漢字漢字漢字"

    class Node(FakeNode):
        def participants(self):
            return [FakeParticipant("b0" * 16, nick, T0_MS, T0_MS + 9 * 60_000)]

    async def scenario():
        nodes = [Node(key=FakeKey(channel_name=name)) for name in ("fête👍🏽❤️x", "漢字漢字漢字漢字漢字漢字")]
        app = ChannelWindow(FakeClient(nodes), clock=lambda: FIXED_NOW, tz=UTC, blink=False)
        async with app.run_test(size=(140, 30)) as pilot:
            pane = app.active_pane()
            text = "thumbs 👍🏽 family 👨‍👩‍👧 heart ❤️ " * 4
            pane.apply_events(
                [
                    ev.MessageShown(
                        ev.ChatMessage(
                            "77" * 32, "b0" * 16, nick, text, "msg", T0_MS + 9 * 60_000, 99, False, ev.RECEIVED
                        )
                    )
                ]
            )
            pane.refresh_panel()
            await pilot.pause()
            for widget in (pane.view, app.query_one(ChannelList), pane.query_one(SidePanel)):
                width = widget.scrollable_content_region.width
                lines = [widget.render_line(y) for y in range(widget.size.height)]
                assert any(line.text.strip() for line in lines)
                for line in lines:
                    assert line.cell_length == width, (widget, line.text)
                    assert not any(ch in line.text for ch in UNSTABLE), (widget, line.text)
            painted = "\n".join(pane.view.all_text())
            assert "thumbs 👍 family 👨👩👧 heart ❤" in painted and "bob👍👨👩👧❤" in painted
            assert "#fête👍❤x" in app.sub_title and not any(ch in app.sub_title for ch in UNSTABLE)

    run(scenario())


def test_message_layout_is_exactly_the_width_for_any_text() -> None:
    layout = Layout(61, UTC)
    for text in ("👍🏽" * 40, "a👨‍👩‍👧b" * 15, "漢" * 70, "x ❤️ " * 30, "e\u0301" * 90):
        m = ev.ChatMessage("88" * 32, "b0" * 16, "bob🏽", text, "msg", T0_MS, 1, False, ev.RECEIVED)
        item = MsgItem(m)
        strips = layout.paint(item, None, lambda pid: "bob")
        assert len(strips) == layout.height(item, None, lambda pid: "bob")
        assert all(s.cell_length == 61 for s in strips)
        assert not any(ch in s.text for s in strips for ch in UNSTABLE)


def test_panes_keep_their_size_rules_when_a_channel_joins(run) -> None:
    """A channel that starts after the window opened (its pane mounted later) follows the same rules."""

    async def scenario():
        app = window(("team",))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app._started(FakeNode(key=FakeKey(channel_name="late")))
            await pilot.pause()
            await pilot.press("alt+2")
            await pilot.pause()
            pane = app.active_pane()
            assert isinstance(pane, ChatPane) and pane.channel_name == "late"
            assert not side(app).display and pane.view.scrollable_content_region.width >= 54

    run(scenario())
