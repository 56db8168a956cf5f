"""The input bar draws whatever moment Textual asks it to: a text area Textual 8.2 draws after it was removed
(its pane parted) or before the stylesheet reached it has no component styles, and Textual's own TextArea raises
``KeyError: No 'text-area--gutter' key in COMPONENT_CLASSES`` there, which ends the window. Real Textual app,
no mocks."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widgets import TextArea

from sdschat.ui.widgets.input_bar import ChatInput


class _Holder(App[None]):
    def compose(self) -> ComposeResult:
        yield ChatInput(placeholder="say something", blink=False, id="box")
        yield TextArea("", id="plain")


def test_a_removed_input_draws_blank_where_textuals_text_area_raises(run) -> None:
    async def scenario():
        app = _Holder()
        async with app.run_test(size=(60, 10)) as pilot:
            box, plain = app.query_one("#box", ChatInput), app.query_one("#plain", TextArea)
            box.load_text("a draft")
            await pilot.pause()
            crop = Region(0, 0, 40, 3)
            assert any(strip.text.strip() for strip in box.render_lines(crop))  # drawn while mounted
            await box.remove()
            await plain.remove()
            lines = box.render_lines(crop)
            assert len(lines) == 3 and all(strip.cell_length == 40 and not strip.text.strip() for strip in lines)
            # what the guard is for: Textual's own text area, removed the same way, raises
            raised = None
            try:
                plain.render_lines(crop)
            except KeyError as exc:
                raised = str(exc)
            assert raised is not None and "text-area--gutter" in raised

    run(scenario(), timeout=30)
