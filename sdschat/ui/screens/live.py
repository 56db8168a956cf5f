"""``LivePanel``: a modal panel that reads its content again every ``REFRESH_S`` seconds while it is open.

The inspector's panels (the message inspector, /gaps, /members, the wire view)
are all this: a bordered, scrollable body filled by :meth:`refresh_lines`
(which reads the node and calls :meth:`show`), Esc or q to close.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["LivePanel"]


class LivePanel(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "close")]

    # opaque: the panels cover the chat, and a see-through modal screen has Textual composite the chat under it on
    # every repaint (and repaint on every message under it); a panel that leaves the chat visible (the message
    # inspector, a side panel) sets its own background
    DEFAULT_CSS = """
    LivePanel { align: center middle; background: $background; }
    LivePanel > VerticalScroll {
        width: 100%;
        height: 100%;
        border: round $accent;
        border-title-color: $accent;
        background: $panel;
        padding: 0 1;
    }
    """

    #: seconds between readings; the border's title
    REFRESH_S = 0.5
    TITLE = ""

    def __init__(self, node) -> None:
        super().__init__()
        self.node = node
        #: the lines on screen as text (tests read them)
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = self.TITLE
            yield from self.parts()

    def parts(self) -> ComposeResult:
        """What the bordered box holds: one body that :meth:`show` fills (a panel may lay out more)."""
        yield Static(id="live-body")

    async def on_mount(self) -> None:
        await self.refresh_lines()
        self.set_interval(self.REFRESH_S, self.refresh_lines)

    async def refresh_lines(self) -> None:  # pragma: no cover - every panel has its own
        raise NotImplementedError

    def show(self, renderable) -> None:
        self.query_one("#live-body", Static).update(renderable)

    async def action_dismiss(self, result=None) -> None:
        self.dismiss(None)
