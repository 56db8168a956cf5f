"""From node callbacks to Textual messages, without touching widgets.

``Node.add_listener`` calls us on the event-loop thread from inside the
node's receive/tick code. We only append the event to a buffer and, if no
drain is pending, post one :class:`~sdschat.ui.messages.NodeEventsReady` to
the owning widget. The widget's handler drains the buffer in order and
applies the whole batch at once (one relayout, one repaint).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from textual.message_pump import MessagePump

from sdschat.node import events as ev

from .messages import NodeEventsReady

__all__ = ["NodeBridge"]


class NodeBridge:
    def __init__(self, node, target: MessagePump) -> None:
        self.node = node
        self.target = target
        self._buffer: list[ev.NodeEvent] = []
        self._lock = threading.Lock()  # the node promises the loop thread; be safe if that ever changes
        self._posted = False
        self._remove: Callable[[], None] | None = None
        self.received = 0
        #: a busy channel's pane drains on its own timer: events only gather (your own line is still posted)
        self.hold = False

    def attach(self) -> None:
        if self._remove is None:
            self._remove = self.node.add_listener(self._on_event)

    def detach(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None

    def _on_event(self, event: ev.NodeEvent) -> None:
        with self._lock:
            self._buffer.append(event)
            self.received += 1
            if self._posted or (self.hold and not (type(event) is ev.MessageShown and event.message.own)):
                return
            self._posted = True
        if not self.target.post_message(NodeEventsReady(self)):
            with self._lock:
                self._posted = False

    def drain(self) -> list[ev.NodeEvent]:
        with self._lock:
            events, self._buffer = self._buffer, []
            self._posted = False
        return events
