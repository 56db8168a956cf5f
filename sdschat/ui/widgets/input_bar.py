"""The message input: multi-line, Enter sends, history, slash-command completion.

Enter sends. Alt+Enter inserts a newline (sent as ESC Enter by most terminals:
``ui/keys.py``), Shift+Enter where the terminal reports it (kitty keyboard
protocol: kitty, WezTerm, foot, ghostty, iTerm2...); Ctrl+J, and a trailing
backslash before Enter, work everywhere. The placeholder stays on one line.
Up/Down on the first/last line walk the input history. Tab completes the
word at the cursor: a command name at the start, else a member's name (with or
without ``@``); Tab again offers the next choice, Shift+Tab the one before. Tab
never takes the focus away: what is typed next goes on the line.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static, TextArea

from .. import slash
from ..layout import fit_cells
from ..mentions import name_choices
from ..ordered_keys import KeysInOrder

__all__ = ["ChatInput", "CommandHint", "NEWLINE_KEYS"]

#: keys that break the line (Enter sends)
NEWLINE_KEYS = ("alt+enter", "shift+enter", "ctrl+j")


class ChatInput(KeysInOrder, TextArea):
    DEFAULT_CSS = """
    ChatInput {
        height: auto;
        min-height: 3;
        max-height: 8;
    }
    """

    BINDINGS = [
        # run where the letters are typed, in order with them (KeysInOrder): Enter and the newline keys are never
        # overtaken by the text typed right after them
        Binding("enter", "enter", "send", show=False),
        Binding(",".join(NEWLINE_KEYS), "newline", "new line", show=False),
        Binding("tab", "complete(1)", "complete", show=False),
        Binding("shift+tab", "complete(-1)", "previous completion", show=False),
        Binding("ctrl+up", "recall(-1)", "earlier line you sent", show=False),
        Binding("ctrl+down", "recall(1)", "later line you sent", show=False),
    ]

    class CursorUp(Message):
        """Up in an empty input: the person wants the message cursor."""

        def __init__(self, input: ChatInput) -> None:
            super().__init__()
            self.input = input

    class Submitted(Message):
        def __init__(self, input: ChatInput, text: str) -> None:
            super().__init__()
            self.input = input
            self.text = text

        @property
        def control(self) -> ChatInput:
            return self.input

    class Typed(Message):
        """The user changed the text (drives the rate-limited "typing…" notice and the hint)."""

        def __init__(self, input: ChatInput, text: str) -> None:
            super().__init__()
            self.input = input
            self.text = text

    def __init__(
        self, *, placeholder: str = "", blink: bool = True, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(
            "",
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            placeholder=placeholder,
            id=id,
            classes=classes,
            compact=True,
        )
        self._hint = placeholder
        self._hint_width = -1  # the width the placeholder was cut for
        self.cursor_blink = blink
        #: the names Tab completes (set by the pane: the channel's members as it shows them)
        self.names: Callable[[], list[str]] = list
        #: told of every key pressed here (set by the pane: the person is here, back from an idle away); the keys
        #: this input handles itself never reach the pane
        self.pressed: Callable[[], None] = lambda: None
        #: the last completion: (the text it left, where the cursor was left, row, start, choices, which one)
        self._completed: tuple[str, tuple[int, int], int, int, list[str], int] | None = None
        self.sent_history: list[str] = []
        self._history_pos: int | None = None
        self._draft = ""
        #: after Up left for the message cursor: the keys typed with it, kept until the cursor has the focus
        self._handoff: list[events.Key] | None = None

    # ----------------------------------------------------------- drawing

    @property
    def hint(self) -> str:
        """The placeholder in full (shown on one line: cut with an ellipsis to the input's width)."""
        return self._hint

    @hint.setter
    def hint(self, text: str) -> None:
        self._hint = text
        self._hint_width = -1  # cut again for the width at the next paint
        self.placeholder = text

    def render_lines(self, crop: Region) -> list[Strip]:
        try:
            return super().render_lines(crop)
        except KeyError as exc:
            # Textual 8.2 can be asked to draw a text area whose component styles are not there: once its pane
            # was parted (pruned, but still in the screen's map for a frame) or before the stylesheet reached it
            # (Textual issue 6528); its theme then raises. There is nothing to draw yet, or any more
            if "COMPONENT_CLASSES" not in str(exc):
                raise
            if self.is_attached:
                self.call_after_refresh(self.refresh)
            return [Strip.blank(crop.width) for _ in range(crop.height)]

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        if width <= 0:  # narrower than nothing (Textual's wrap raises at width 0): nothing to draw
            return Strip.blank(max(0, self.size.width), self.rich_style)
        if width != self._hint_width:  # Textual wraps the placeholder over the lines: one line, cut to fit
            self._hint_width = width
            self.set_reactive(TextArea.placeholder, fit_cells(self._hint, width))
        return super().render_line(y)

    def on_show(self) -> None:
        """Back on screen with nothing focused (the window was too small, so its layout was hidden and the
        input lost the focus): typing goes here again."""
        if self.screen.focused is None:
            self.focus()

    # ------------------------------------------------------------- keys

    async def _on_key(self, event: events.Key) -> None:
        self.pressed()
        if self._handoff is not None:  # typed together with the Up that left: the message cursor's keys
            event.stop()
            event.prevent_default()
            key, focused = events.Key(event.key, event.character), self.screen.focused
            if focused is not None and focused is not self:
                focused.post_message(key)
            else:  # the pane has not moved the focus yet
                self._handoff.append(key)
            return
        await super()._on_key(event)

    def pass_on(self) -> None:
        """The pane has moved the focus for the Up: the keys kept since go where it is, in order (until this
        input is blurred, the keys still coming here follow them). Had the focus stayed here, the hand-over is
        off and they are this input's again."""
        keys, focused = self._handoff, self.screen.focused
        if keys is None:
            return
        if focused is None or focused is self:
            self._handoff = None
            target: Widget = self
        else:
            self._handoff = []
            target = focused
        for key in keys:
            target.post_message(key)

    def on_blur(self) -> None:
        self.pass_on()
        self._handoff = None

    def action_enter(self) -> None:
        """Enter sends; after a ``\\`` it breaks the line instead (a newline anywhere)."""
        row, col = self.cursor_location
        if col > 0 and self.document[row][:col].endswith("\\") and self.selection.is_empty:
            self.replace("\n", (row, col - 1), (row, col))
            return
        self.action_submit()

    def action_newline(self) -> None:
        start, end = self.selection
        self.replace("\n", start, end)

    def action_submit(self) -> None:
        text = self.text
        if not text.strip():
            return
        if not self.sent_history or self.sent_history[-1] != text:
            self.sent_history.append(text)
            del self.sent_history[:-200]
        self._history_pos = None
        self.clear()
        self.post_message(self.Submitted(self, text))

    def action_complete(self, step: int = 1) -> None:
        """Complete the word before the cursor, or (right after a completion) offer the next choice (``step``
        -1: the one before). With nothing to complete nothing happens: the focus stays here either way."""
        row, col = self.cursor_location
        last = self._completed
        if last is not None and last[:2] == (self.text, (row, col)):
            _, _, row, start, choices, index = last
            index = (index + step) % len(choices)
        else:
            start, choices = self._choices(row, self.document[row][:col])
            if not choices:
                return
            index = 0 if step > 0 else len(choices) - 1
        self.replace(choices[index], (row, start), (row, col), maintain_selection_offset=False)
        self._completed = (self.text, self.cursor_location, row, start, choices, index)

    def _choices(self, row: int, before: str) -> tuple[int, list[str]]:
        """Where the word before the cursor starts and its completions: a command name at the start of the
        message, else the members' names."""
        if row == 0 and before.startswith("/") and " " not in before:
            return 0, [f"/{c.name} " for c in slash.matching(before)]
        return name_choices(before, self.names(), first_line=row == 0)

    def action_cursor_up(self, select: bool = False) -> None:
        """Up: in an empty input, the message cursor; on the first line of a draft or while going through
        the lines you sent, the one sent before (Ctrl+Up does that anywhere)."""
        if not select and not self.text and self._history_pos is None:
            self._handoff = []
            self.post_message(self.CursorUp(self))
            return
        if not select and self.cursor_location[0] == 0 and self.sent_history:
            self.action_recall(-1)
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        last = self.document.line_count - 1
        if not select and self._history_pos is not None and self.cursor_location[0] == last:
            self.action_recall(1)
            return
        super().action_cursor_down(select)

    def action_recall(self, step: int) -> None:
        """The lines you sent, newest first (``step`` -1: older; 1: newer, then back to the draft)."""
        if step < 0:
            if not self.sent_history:
                return
            if self._history_pos is None:
                self._draft = self.text
                self._history_pos = len(self.sent_history)
            if self._history_pos > 0:
                self._history_pos -= 1
                self._show(self.sent_history[self._history_pos])
        elif self._history_pos is not None:
            self._history_pos += 1
            if self._history_pos >= len(self.sent_history):
                self._history_pos = None
                self._show(self._draft)
            else:
                self._show(self.sent_history[self._history_pos])

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self.post_message(self.Typed(self, self.text))


class CommandHint(Static):
    """One line above the input: the commands matching what is typed after "/"."""

    DEFAULT_CSS = """
    CommandHint {
        height: auto;
        max-height: 4;
        color: $text-muted;
        padding: 0 1;
        display: none;
    }
    CommandHint.-shown { display: block; }
    """

    def show_for(self, text: str) -> None:
        found = slash.matching(text)
        if not found and text.startswith("/") and not text.startswith("//"):
            name = slash.parse(text)
            cmd = slash.lookup(name[0]) if name else None
            found = [cmd] if cmd else []
        if not found:
            self.set_class(False, "-shown")
            return
        hint = Text()
        for c in found:
            if hint:
                hint.append("   ")
            hint.append(c.usage, "bold")
            if len(found) <= 2:
                hint.append(f"  {c.help}")
        self.update(hint)
        self.set_class(True, "-shown")
