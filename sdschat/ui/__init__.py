"""The Textual chat UI (``sdschat chat``, ``sdschat demo``).

Layering: everything here talks to :mod:`sdschat.node` only; brokers, stores
and nodes are built by the CLI (:mod:`sdschat.cli.chat`) and handed in.

Threading (after harlequin's rule): node callbacks run on the event-loop
thread but never touch widgets. :class:`~sdschat.ui.bridge.NodeBridge`
buffers node events and posts one coalescing Textual message; the pane that
owns the node applies the batch. Errors from workers, handlers and the node's
log reach one handler on the app (:class:`~sdschat.ui.messages.UiError`).
"""

import os

# Textual draws a changed screen at the next tick of its frame timer (60 a second by default): up to 17 ms
# between a message reaching the pane and the screen. At 120 that wait halves; an unchanged screen is not
# redrawn, so idle costs nothing more. Must be set before Textual is imported; TEXTUAL_FPS set by the
# person wins.
os.environ.setdefault("TEXTUAL_FPS", "120")
