"""A busy channel (more than BUSY_LINES lines of others a second) is redrawn once every PACE_S, its events
gathered meanwhile; your own line still shows at once; once the traffic calms down, each line shows as it comes."""

from __future__ import annotations

import asyncio
import time

from ui_helpers import cluster, line_with, lines_of, wait_until

from sdschat.ui.app import ChatApp
from sdschat.ui.widgets.chat_pane import BUSY_LINES, PACE_S


def test_a_busy_channel_is_redrawn_in_paced_batches_and_your_line_never_waits(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, ("alice", "bob")) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(120, 30)) as pilot:
                pane = app.pane
                await bob.send_text("calm")
                await wait_until(pilot, lambda: line_with(lines_of(app), "calm"), what="a calm line")
                assert not pane._busy and pane.bridge.hold is False

                async def flood() -> None:  # 20 lines a second for 3 s
                    for i in range(60):
                        await bob.send_text(f"flood {i}")
                        await asyncio.sleep(0.05)

                flooding = asyncio.ensure_future(flood())
                await wait_until(pilot, lambda: pane._busy, timeout=5, what="the channel counted busy")
                assert pane.bridge.hold and pane.input.cursor_blink is False
                commits = []
                real_commit = pane.view.commit

                def counted(**kw) -> None:
                    commits.append(time.monotonic())
                    real_commit(**kw)

                pane.view.commit = counted
                await pilot.pause(2.0)
                # paced: about one batch a second, not twenty lines' worth of frames
                assert 1 <= len(commits) <= 2 / PACE_S + 2, commits
                # your own line is shown at once, busy or not
                pane.input.focus()
                await pilot.press(*"mine while busy", "enter")
                t0 = time.monotonic()
                await wait_until(
                    pilot,
                    lambda: line_with(lines_of(app), "mine while busy"),
                    timeout=PACE_S,
                    step=0.02,
                    what="my own line, before the paced frame",
                )
                assert time.monotonic() - t0 < PACE_S
                await flooding
                await wait_until(pilot, lambda: line_with(lines_of(app), "flood 59"), timeout=5, what="the last")
                await wait_until(pilot, lambda: not pane._busy, timeout=PACE_S * 3, what="calm again")
                assert pane.bridge.hold is False
                # calm again: a line shows as it arrives (well within the pace)
                pane.view.commit = real_commit
                await bob.send_text("calm again")
                t0 = time.monotonic()
                await wait_until(
                    pilot,
                    lambda: line_with(lines_of(app), "calm again"),
                    timeout=PACE_S,
                    step=0.02,
                    what="the next calm line",
                )
                assert time.monotonic() - t0 < PACE_S / 2
                assert sum("flood" in line for line in lines_of(app)) >= BUSY_LINES  # nothing dropped on screen
                assert app.errors == []

    run(scenario(), timeout=60)
