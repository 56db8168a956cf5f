"""Events compaction (migrations/0003_compact_history.sql): a bounded window of full event rows.

The ``events`` table grows with every frame; a year of chat would be mostly
event rows. :func:`compact` keeps the newest ``keep`` rows in full and, for the
older ones, keeps what the report and the UI still need: the first sent,
received, delivered and acknowledged time of each message (one small
``message_events`` row, keyed by the message's rowid), and every row that
explains a repair or a loss in full, and every resend (the report counts
them). Possible acknowledgements (their total is in ``messages``), sync
frames and the inspector's detail (who named a message, duplicate copies) go
with the window. The view ``event_history`` gives the full rows and
the folded first times as one events table again.

Each call looks only at the rows between the last bound (kv
``events_compacted_through``) and the new one, so it costs the rows it folds.
"""

from __future__ import annotations

import sqlite3

from . import sql

__all__ = ["compact"]


def compact(conn: sqlite3.Connection, keep: int) -> int:
    """Fold and delete the events older than the newest ``keep`` rows (inside the caller's transaction);
    returns the number of event rows deleted."""
    (top,) = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
    row = conn.execute("SELECT value FROM kv WHERE key = ?", (sql.COMPACTED_THROUGH,)).fetchone()
    lo = int(row[0]) if row is not None else 0
    hi = top - keep
    if hi <= lo:
        return 0
    conn.execute(sql.FOLD_EVENTS, (lo, hi))
    deleted = conn.execute(sql.DROP_FOLDED, (lo, hi)).rowcount
    conn.execute(
        "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (sql.COMPACTED_THROUGH, str(hi)),
    )
    return deleted
