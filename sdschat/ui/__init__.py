"""The Textual chat UI (``sdschat chat``, ``sdschat demo``).

Layering: everything here talks to :mod:`sdschat.node` only; brokers, stores
and nodes are built by the CLI (:mod:`sdschat.cli.chat`) and handed in.

Threading (after harlequin's rule): node callbacks run on the event-loop
thread but never touch widgets. :class:`~sdschat.ui.bridge.NodeBridge`
buffers node events and posts one coalescing Textual message; the pane that
owns the node applies the batch. Errors from workers, handlers and the node's
log reach one handler on the app (:class:`~sdschat.ui.messages.UiError`).
What the person can act on is a :class:`~sdschat.node.UserError` (the
node's refusals; a command used wrongly, :class:`~sdschat.ui.usage.UsageError`):
the pane shows its text as a notice. Anything else is a bug: it is logged
with its traceback and surfaces as an error, never as a polite notice.
"""

import os

# Textual draws a changed screen at the next tick of its frame timer (60 a second by default): a message that
# reaches the pane within a tick of the last frame waits for the next one, up to 17 ms. At 240 that wait is at
# most 4 ms: send-to-shown p99 at 50 msg/s 19.1 / 19.1 ms against 22.2 / 28.7 ms at 120, and 20.4-22.0 against
# 24.9-31.2 ms under a 1,000 frames/s flood (bench/window_channels.py, bench/wire_view.py); the same CPU time at
# 200 msg/s (a chat frame costs ~5 ms, more than a tick: a screen that changes all the time is drawn about as
# often as at 120). An unchanged screen is not redrawn, so idle costs nothing more. Must be set before Textual
# is imported; TEXTUAL_FPS set by the person wins.
os.environ.setdefault("TEXTUAL_FPS", "240")

from .keys import install as _install_alt_keys  # noqa: E402

# Alt+digit (the channel window), Alt+Enter (a newline): as tmux and most terminals send them (ESC, then the key)
_install_alt_keys()
