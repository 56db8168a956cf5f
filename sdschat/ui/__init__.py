"""The Textual chat UI (``sdschat chat``, ``sdschat demo``).

Layering: everything here talks to :mod:`sdschat.node` only; brokers, stores
and nodes are built by the CLI (:mod:`sdschat.cli.chat`) and handed in.

Threading (after harlequin's rule): node callbacks run on the event-loop
thread but never touch widgets. :class:`~sdschat.ui.bridge.NodeBridge`
buffers node events and posts one coalescing Textual message; the pane that
owns the node applies the batch. Errors from workers, handlers and the node's
log reach one handler on the app (:class:`~sdschat.ui.messages.UiError`).
"""
