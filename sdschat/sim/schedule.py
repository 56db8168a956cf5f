"""What a shard's heap holds: entries ``(t, kind, a, b, obj)``, the kinds in their order at equal times.

1. :data:`ARRIVALS` -- deliveries of a broadcast frame (``a, b`` = publisher,
   its frame counter; ``obj`` the :class:`~sdschat.sim.state.Cursor`).
2. :data:`SEND` -- an application message (``a`` = its number in the plan).
3. :data:`SETTLE` -- sending is over.
4. :data:`CHURN` -- a member goes offline or comes back (``a`` = member, ``b`` = generation).
5. :data:`STORE` -- a member's store-node request goes out, is answered or times out (``a`` = member,
   ``b`` = the member's own count of them; ``obj`` what it is, a :data:`~sdschat.sim.state.StoreOp`:
   :mod:`sdschat.sim.stores`).
6. :data:`TICK` -- a member's periodic duties (``a`` = member), at its engine's next deadline.
"""

from __future__ import annotations

__all__ = ["ARRIVALS", "CHURN", "INF", "SEND", "SETTLE", "STORE", "TICK"]

INF = 1 << 62
ARRIVALS, SEND, SETTLE, CHURN, STORE, TICK = 1, 2, 3, 4, 5, 6
