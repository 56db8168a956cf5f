"""sdschat.storenode: a key-less store node (the RFC's high-availability cache).

- :class:`StoreNode` (:mod:`.service`): subscribes to ``sdschat/+``, keeps every envelope exactly as it
  crossed the broker (ciphertext) in its own SQLite database, answers requests by hash or by time.
- :class:`StoreDB` (:mod:`.db`): that database.
- :mod:`.protocol`: the request/response convention (topics, JSON request, binary answer).
- ``sdschat store`` is wired in :mod:`sdschat.cli.storenode`.

Imports transport and crypto (constants only); never a channel key.
"""

from . import protocol
from .db import StoreDB
from .service import StoreNode

__all__ = ["StoreDB", "StoreNode", "protocol"]
