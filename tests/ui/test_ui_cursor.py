"""The input's cursor is steady unless asked to blink: a blinking cursor repaints the input twice a second, most of
an idle window's CPU (bench/window_soak.py's idle line). Real nodes, the real app through Pilot."""

from __future__ import annotations

from textual.timer import Timer
from ui_helpers import cluster

from sdschat.ui.app import ChatApp


def _blink_timers(app: ChatApp) -> list[Timer]:
    """The input's blink timer, if Textual started it (a TextArea names it after what it toggles)."""
    timer = getattr(app.pane.input, "blink_timer", None)
    return [timer] if isinstance(timer, Timer) and timer._active.is_set() else []


def test_the_cursor_is_steady_by_default_and_blinks_when_asked(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, ("alice",)) as (alice,):
            steady = ChatApp(alice)
            async with steady.run_test(size=(80, 24)) as pilot:
                await pilot.pause()
                assert steady.pane.input.has_focus and steady.pane.input.cursor_blink is False
                assert not _blink_timers(steady)
            blinking = ChatApp(alice, blink=True)
            async with blinking.run_test(size=(80, 24)) as pilot:
                await pilot.pause()
                assert blinking.pane.input.has_focus and blinking.pane.input.cursor_blink is True
                assert _blink_timers(blinking)

    run(scenario())
