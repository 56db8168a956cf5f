"""Textual messages of the UI (posted, never called across layers)."""

from __future__ import annotations

from textual.message import Message

__all__ = ["NodeEventsReady", "UiError", "UiNotice"]


class NodeEventsReady(Message):
    """Node events are buffered in the bridge: the pane should drain them.

    At most one is pending per bridge (``can_replace``), so a burst of 500
    acknowledgement updates costs one handler call and one repaint.
    """

    def __init__(self, bridge) -> None:
        super().__init__()
        self.bridge = bridge

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, NodeEventsReady) and message.bridge is self.bridge


class UiError(Message):
    """Something failed (a send, a command, the node's storage, a handler): one line for the user."""

    def __init__(self, text: str, where: str = "") -> None:
        super().__init__()
        self.text = text
        self.where = where


class UiNotice(Message):
    """A transient notice (toast) for the user."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
