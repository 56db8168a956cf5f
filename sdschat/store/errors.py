"""Exceptions of :mod:`sdschat.store`. Every message is one line and never contains key material."""

from __future__ import annotations

__all__ = [
    "StoreError",
    "SchemaTooNewError",
    "MigrationError",
    "WriterFailedError",
    "DamagedDatabaseError",
    "CorruptRowError",
]


class StoreError(Exception):
    """Base class: anything the store refuses or fails to do."""


class SchemaTooNewError(StoreError):
    """The database was written by a newer sdschat (its schema has migrations we do not know)."""

    def __init__(self, version: int, known: int) -> None:
        self.version = version
        self.known = known
        super().__init__(
            f"database schema version {version} is newer than this sdschat (knows up to {known}); upgrade sdschat"
        )


class DamagedDatabaseError(StoreError):
    """The file is not a sound sdschat database: empty, cut short, overwritten, its schema or a page damaged
    (:mod:`sdschat.store.integrity`). Never taken as a new database: the remedy is the person's (set the file
    aside, rejoin the channel: README, "If a database is damaged")."""


class CorruptRowError(DamagedDatabaseError):
    """A stored row does not hold what sdschat wrote there (damaged file or edited by hand)."""


class MigrationError(StoreError):
    """A migration file is malformed, missing, or failed to apply."""


class WriterFailedError(StoreError):
    """A background flush of :class:`~sdschat.store.writer.StoreWriter` failed.

    The original exception is ``__cause__`` (and ``.original``). The writer stays failed
    (every later ``submit``/``flush`` raises this) until :meth:`StoreWriter.reset`: the
    batch that failed was rolled back, so the store no longer mirrors the engine, and the
    owner must re-save the full state (``Store.save_state``) before writing on.
    """

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(f"background store flush failed: {type(original).__name__}: {original}")
