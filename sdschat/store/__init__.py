"""The durable store of one sdschat participant: one SQLite file (aiosqlite).

* :class:`Store` -- open/migrate the file, load/save a channel's SDS state,
  apply journal batches plus application rows in one transaction, read back
  messages and events.
* :class:`StoreWriter` -- coalesces everything submitted in one event-loop
  turn into one commit; ``await flush()`` before publishing.
* :mod:`sdschat.store.rows` -- the row types and their (de)serialization.
* Inside :class:`Store`: :mod:`.connection` (file, settings, transactions),
  :mod:`.snapshot` (full channel state), :mod:`.journal` (batches),
  :mod:`.queries` (history, events) and :mod:`.sql` (the statements).
* :mod:`sdschat.store.search` -- what a typed search means to the FTS5 index.
* :mod:`sdschat.store.migrate` -- the migration runner for ``migrations/*.sql``.
* :mod:`sdschat.store.integrity` -- the checks at open: an existing file is a
  whole sdschat database, or :class:`DamagedDatabaseError` (never a new one).

Layering (DESIGN.md): imports only the state types of :mod:`sdschat.sds`.
"""

from .errors import (
    CorruptRowError,
    DamagedDatabaseError,
    MigrationError,
    SchemaTooNewError,
    StoreError,
    WriterFailedError,
)
from .rows import EVENT_KINDS, ActionRow, EventRow, MessageRow, MessageUpdate, ParticipantRow
from .search import SEARCH_HINT, SearchQueryError, fts_query, query_terms
from .store import Store
from .writer import StoreWriter

__all__ = [
    "ActionRow",
    "CorruptRowError",
    "DamagedDatabaseError",
    "EVENT_KINDS",
    "EventRow",
    "MessageRow",
    "MessageUpdate",
    "MigrationError",
    "ParticipantRow",
    "SchemaTooNewError",
    "SEARCH_HINT",
    "SearchQueryError",
    "Store",
    "StoreError",
    "StoreWriter",
    "WriterFailedError",
    "fts_query",
    "query_terms",
]
