"""Dogfooding controls: make your own link lossy, slow, duplicating or offline.

Values apply on Enter or when the field loses focus; the panel only posts
:class:`ImpairmentPanel.Changed` — the pane calls ``node.set_impairment``.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid
from textual.message import Message
from textual.widgets import Checkbox, Input, Label

from ..ordered_keys import OrderedInput
from ..usage import UsageError, parse_ms, parse_probability

__all__ = ["ImpairmentPanel", "parse_field"]

_FIELDS = (
    ("loss_in", "loss in", parse_probability),
    ("loss_out", "loss out", parse_probability),
    ("delay_ms", "delay ms", parse_ms),
    ("jitter_ms", "jitter ms", parse_ms),
    ("duplicate", "duplicate", parse_probability),
)
_PARSERS = {name: parser for name, _, parser in _FIELDS}


def _fmt(name: str, value) -> str:
    return f"{value:g}"


def parse_field(name: str, text: str) -> float:
    """The value typed in the field ``name`` (empty: 0); :class:`UsageError` (one line) if it is not one."""
    return _PARSERS[name](text or "0")


class ImpairmentPanel(Grid):
    DEFAULT_CSS = """
    ImpairmentPanel {
        display: none;
        grid-size: 4;
        grid-columns: auto 10 auto 12;
        grid-gutter: 0 1;
        height: auto;
        padding: 0 1;
        border-top: hkey $warning;
        background: $boost;
    }
    ImpairmentPanel.-shown { display: block; }
    ImpairmentPanel Label { padding: 0 0; color: $text-muted; }
    ImpairmentPanel Input.-textual-compact { border: none; height: 1; padding: 0 1; background: $surface; }
    ImpairmentPanel Input.-textual-compact:focus { background: $primary 30%; }
    ImpairmentPanel Input.-invalid { background: $error 30%; }
    ImpairmentPanel Checkbox { border: none; height: 1; padding: 0; background: transparent; }
    """

    class Changed(Message):
        def __init__(self, panel: ImpairmentPanel, settings: dict) -> None:
            super().__init__()
            self.panel = panel
            self.settings = settings

    class Invalid(Message):
        def __init__(self, panel: ImpairmentPanel, text: str) -> None:
            super().__init__()
            self.panel = panel
            self.text = text

    _current: dict | None = None  # what the node has, as last shown

    def on_mount(self) -> None:
        self.border_title = "link impairment (this participant) · Enter applies"

    def compose(self) -> ComposeResult:
        for name, label, _ in _FIELDS:
            yield Label(label)
            yield OrderedInput("0", id=f"imp-{name}", compact=True, select_on_focus=True)
        yield Label("link")
        yield Checkbox("offline", id="imp-offline", compact=True)

    def show_settings(self, imp) -> None:
        """Fill the fields from ``node.impairment``."""
        if imp is None:
            return
        self._current = {name: getattr(imp, name) for name, _, _ in _FIELDS}
        for name, _, _ in _FIELDS:
            field = self.query_one(f"#imp-{name}", Input)
            if not field.has_focus:
                field.value = _fmt(name, getattr(imp, name))
                field.remove_class("-invalid")
        box = self.query_one("#imp-offline", Checkbox)
        if box.value != imp.offline:
            with box.prevent(Checkbox.Changed):
                box.value = imp.offline

    def _apply(self, field: Input) -> None:
        name = (field.id or "").removeprefix("imp-")
        try:
            value = parse_field(name, field.value)
        except UsageError as exc:  # the person's input: the field turns red, the error says why
            field.add_class("-invalid")
            self.post_message(self.Invalid(self, str(exc)))
            return
        field.remove_class("-invalid")
        if self._current is None or self._current.get(name) == value:
            return  # not filled from the node yet, or focus moved on without a change
        self.post_message(self.Changed(self, {name: value}))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply(event.input)

    def on_input_blurred(self, event: Input.Blurred) -> None:
        event.stop()
        if self.has_class("-shown"):  # leaving a field applies it too, but only while the panel is in use
            self._apply(event.input)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self.post_message(self.Changed(self, {"offline": event.value}))
