"""SVG snapshots of deterministic screens (fixed messages, injected clock, UTC, no cursor blink).

Update after an intended change with ``pytest tests/ui --snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

from ui_helpers import ALICE, BOB, CAROL, FIXED_NOW, UTC, FakeNode, fixed_events

from sdschat.ui.app import ChatApp, DemoApp


def chat_app(node=None) -> ChatApp:
    return ChatApp(node or FakeNode(), clock=lambda: FIXED_NOW, tz=UTC, blink=False)


async def with_events(pilot) -> None:
    pilot.app.pane.apply_events(fixed_events())
    await pilot.pause()


def test_chat_screen(snap_compare) -> None:
    assert snap_compare(chat_app(), terminal_size=(120, 32), run_before=with_events)


def test_help_screen(snap_compare) -> None:
    assert snap_compare(chat_app(), press=["f1"], terminal_size=(110, 42))


def test_link_controls_and_command_hint(snap_compare) -> None:
    async def before(pilot) -> None:
        await pilot.press("f2", *"/lo")
        await pilot.pause()

    assert snap_compare(chat_app(), terminal_size=(120, 32), run_before=before)


def test_demo_layout(snap_compare) -> None:
    nodes = [
        FakeNode(nick="alice", participant_id=ALICE),
        FakeNode(nick="bob", participant_id=BOB),
        FakeNode(nick="carol", participant_id=CAROL),
    ]
    app = DemoApp(nodes, clock=lambda: FIXED_NOW, tz=UTC, blink=False, subtitle="3 participants (fixed data)")

    async def before(pilot) -> None:
        pilot.app.panes[0].apply_events(fixed_events())
        await pilot.pause()

    assert snap_compare(app, terminal_size=(150, 36), run_before=before)


def test_channel_window(snap_compare) -> None:
    from ui_helpers import FakeClient, FakeKey

    from sdschat.ui.widgets.channel_list import ChannelList
    from sdschat.ui.window import ChannelWindow

    nodes = [FakeNode(key=FakeKey(channel_name=name)) for name in ("team", "ops", "release-planning", "random")]
    app = ChannelWindow(FakeClient(nodes), clock=lambda: FIXED_NOW, tz=UTC, blink=False)

    async def before(pilot) -> None:
        pilot.app.panes[0].apply_events(fixed_events())
        await pilot.pause()  # the panes report their connection first
        channels = pilot.app.query_one(ChannelList)
        channels.activity(1, 3, "connected")
        channels.activity(3, 12, "disconnected")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(130, 32), run_before=before)


def test_search_results(snap_compare) -> None:
    async def before(pilot) -> None:
        await pilot.press(*"/search repair* OR missing", "enter")
        await pilot.pause(0.3)

    assert snap_compare(chat_app(), terminal_size=(110, 24), run_before=before)


def test_message_cursor_and_reply(snap_compare) -> None:
    """The cursor on carol's reply (its quote above it), then ``r``: the bar says what the next line answers."""

    async def before(pilot) -> None:
        await pilot.press("up", "up")
        await pilot.pause()
        assert pilot.app.pane.view.cursor.msg.text == "and this one waited on a message nobody had"
        await pilot.press("down", "r", *"agreed")
        await pilot.pause()

    assert snap_compare(chat_app(), terminal_size=(110, 32), run_before=before)


def test_channel_window_at_80x24(snap_compare) -> None:
    """A terminal's default size: the side panel gives way, the channel list narrows, the messages get 61 columns."""
    from ui_helpers import FakeClient, FakeKey

    from sdschat.ui.window import ChannelWindow

    nodes = [FakeNode(key=FakeKey(channel_name=name)) for name in ("team", "ops", "release-planning", "random")]
    app = ChannelWindow(FakeClient(nodes), clock=lambda: FIXED_NOW, tz=UTC, blink=False)

    async def before(pilot) -> None:
        pilot.app.panes[0].apply_events(fixed_events())
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_window_too_small(snap_compare) -> None:
    assert snap_compare(chat_app(), terminal_size=(36, 12))
