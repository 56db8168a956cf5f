"""Text fields that take the keys in the order they were typed.

Textual types a printable key in the focused field at once, but runs a bound key (arrows, Home, End, Backspace,
Tab...) only once the key has bubbled up to the app. Keys that arrive together (typed ahead over SSH or through
tmux, or while the window was busy) are meanwhile typed in the field: ``a b ← c`` became ``abc`` where the
person typed ``acb``. :class:`KeysInOrder` runs the field's own bindings where its typed keys are handled, in
order; keys bound only above the field (the window's and the pane's) still go up as before.

:class:`OrderedInput` is Textual's one-line ``Input`` with it (the search, reaction and impairment fields);
the chat input (``widgets.input_bar.ChatInput``) has it too. A module of the UI, not of its widgets: the
screens use it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.widget import Widget
from textual.widgets import Input

if TYPE_CHECKING:
    _Field = Widget
else:  # a plain mixin: a Widget base of its own would reset the field's focusability (Textual sets it per class)
    _Field = object

__all__ = ["KeysInOrder", "OrderedInput", "run_own_binding"]


async def run_own_binding(widget: Widget, event: events.Key) -> bool:
    """Run ``widget``'s own (non-priority) binding for ``event``'s key, as the app would once the key reached
    it; True (and the key stopped) when one ran. Priority bindings never get here: the app runs them first."""
    for binding in widget._bindings.key_to_bindings.get(event.key, ()):
        if binding.priority:
            continue
        if await widget.app.run_action(binding.action, widget):
            event.stop()
            event.prevent_default()
            return True
    return False


class KeysInOrder(_Field):
    """A text field whose bound keys run in the order they were typed (see the module's docstring)."""

    async def _on_key(self, event: events.Key) -> None:
        if await run_own_binding(self, event):
            return
        await super()._on_key(event)


class OrderedInput(KeysInOrder, Input):
    """Textual's ``Input`` taking its keys in order."""
