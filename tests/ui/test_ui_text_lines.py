"""The channel list and the side panel repaint only the lines that changed (sdschat.ui.widgets.text_lines)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from ui_helpers import widget_text

from sdschat.ui.widgets.channel_list import REPAINT_EVERY_S, ChannelList
from sdschat.ui.widgets.side_panel import PanelState, SidePanel

NOW = 1_763_805_600_000


@dataclass
class Row:
    participant_id: str
    nick: str
    last_seen_ms: int


class Both(App):
    def __init__(self, channels: list[str]) -> None:
        super().__init__()
        self.channels = channels

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield ChannelList(self.channels, id="channels")
            yield SidePanel(id="panel")


def state(**health) -> PanelState:
    return PanelState(
        nick="alice",
        participant_id="aa" * 32,
        channel="team",
        broker_url="mqtt://127.0.0.1:1883",
        connection="connected",
        health={"lamport_timestamp": 12, "log": 9, **health},
        participants=[Row("bb" * 32, "bob", NOW - 65_000)],
        now_ms=NOW,
    )


def test_a_new_unread_count_repaints_its_row_only(run) -> None:
    async def scenario():
        app = Both(["team", "ops", "release-planning-and-a-very-long-name"])
        async with app.run_test(size=(100, 30)) as pilot:
            channels = app.query_one(ChannelList)
            for i in range(3):
                channels.activity(i, 0, "connected")
            await pilot.pause(REPAINT_EVERY_S + 0.1)
            text = widget_text(channels)
            assert "1 ● #team" in text and "3 ● #release-plannin…" in text  # cut to the width, with an ellipsis
            before = channels.painted_lines
            channels.activity(1, 3, "connected")  # a background channel: its count
            await pilot.pause(REPAINT_EVERY_S + 0.1)
            assert channels.painted_lines - before == 1
            row = next(line for line in widget_text(channels).splitlines() if "#ops" in line)
            assert row.rstrip().endswith(" 3")
            before = channels.painted_lines
            channels.set_active(1)  # the row it leaves and the row it marks
            await pilot.pause()
            assert channels.painted_lines - before == 2

    run(scenario())


def test_a_counter_repaints_its_line_and_a_new_participant_the_table(run) -> None:
    async def scenario():
        app = Both(["team"])
        async with app.run_test(size=(100, 40)) as pilot:
            panel = app.query_one(SidePanel)
            panel.show(state(resends=3))
            await pilot.pause()
            lines = widget_text(panel).splitlines()
            resends = next(line for line in lines if line.startswith("resends"))
            assert resends.rstrip().endswith(" 3")
            assert any(line.startswith("bob") and line.rstrip().endswith("1m ago") for line in lines)
            assert any("alice  · you" in line for line in lines)

            before = panel.painted_lines
            panel.show(state(resends=4))
            await pilot.pause()
            assert panel.painted_lines - before == 1
            assert any(
                line.startswith("resends") and line.rstrip().endswith(" 4") for line in widget_text(panel).splitlines()
            )

            count = panel.line_count
            more = state(resends=4)
            more.participants = [*more.participants, Row("cc" * 32, "carol", NOW)]
            panel.show(more)
            await pilot.pause()
            assert panel.line_count == count + 1
            text = widget_text(panel)
            assert "Participants (3)" in text and "carol" in text

    run(scenario())


def test_a_panel_taller_than_the_screen_scrolls(run) -> None:
    async def scenario():
        app = Both(["team"])
        async with app.run_test(size=(100, 20)) as pilot:
            panel = app.query_one(SidePanel)
            st = state()
            st.participants = [Row(f"{i:02x}" * 32, f"member{i}", NOW) for i in range(12)]
            panel.show(st)
            await pilot.pause()
            assert panel.line_count > panel.size.height
            assert "rejected" not in widget_text(panel)
            panel.scroll_end(animate=False)
            await pilot.pause()
            assert "Link (F2)" in widget_text(panel)

    run(scenario())
