"""The SQLite connection underneath :class:`~.store.Store`: the file, its settings, transactions.

* The file is created with mode ``0600`` before SQLite sees it, and the
  database with its ``-wal``/``-shm``/``-journal`` files is tightened to 0600
  after opening (it holds the identity key).
* :func:`create_database` makes a new database whole or not at all: migrated in
  a file of its own beside the path, then linked into place. So a file at the
  path is always one sdschat finished making, and an empty, cut or overwritten
  one is damage, never a new channel (:mod:`.integrity`).
* :func:`setup` applies the settings at open (``busy_timeout``, WAL,
  ``synchronous``, ``foreign_keys``) and the schema migrations, refusing a newer
  schema, or a damaged one, before changing anything.
* :func:`in_transaction` runs one function inside ``BEGIN IMMEDIATE ... COMMIT``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, TypeVarTuple

from . import integrity, migrate
from .errors import StoreError

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

__all__ = ["SYNC_MODES", "create_database", "create_private_file", "in_transaction", "setup", "sync_mode", "tighten"]

log = logging.getLogger("sdschat.store")

SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def sync_mode(synchronous: str) -> str:
    """The ``PRAGMA synchronous`` value for ``synchronous`` (any case); ValueError for another word."""
    sync = synchronous.upper()
    if sync not in SYNC_MODES:
        raise ValueError(f"synchronous must be one of {', '.join(SYNC_MODES)}, not {synchronous!r}")
    return sync


def create_private_file(path: Path) -> None:
    """Create ``path`` with mode 0600 if it does not exist (never loosen or touch an existing file)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # exactly 0600 whatever the umask
    finally:
        os.close(fd)


def tighten(path: Path) -> None:
    """Make the database and its -wal/-shm/-journal files 0600 if group/other may access them."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        f = Path(f"{path}{suffix}")
        try:
            if f.stat().st_mode & 0o077:
                os.chmod(f, 0o600)
                log.warning("tightened permissions of %s to 0600", f)
        except FileNotFoundError:
            pass


def create_database(path: Path, busy_ms: int, sync: str, migrations: list[migrate.Migration]) -> bool:
    """A new database at ``path`` (which does not exist), whole or not at all: made and migrated in a file of
    its own beside it (mode 0600), closed (its write-ahead log folded in), then linked into place, never over
    a file that is there. False if another process made one there meanwhile (it is then opened as it is)."""
    tmp = path.with_name(f".{path.name}.new-{os.urandom(6).hex()}")
    create_private_file(tmp)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            setup(conn, busy_ms, sync, migrations, memory=False, check=None)
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links
            if path.exists():
                return False
            os.rename(tmp, path)
        _sync_dir(path.parent)
        return True
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def setup(
    conn: sqlite3.Connection,
    busy_ms: int,
    sync: str,
    migrations: list[migrate.Migration],
    memory: bool,
    check: Path | None,
) -> None:
    """The settings at open, then the pending migrations (on the connection's thread). ``check``: the file
    of an existing database, checked (:mod:`.integrity`) before anything in it changes."""
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    # refuse a newer schema, then a damaged one, before changing anything in the file
    migrate.check_not_too_new(conn, migrations)
    if check is not None:
        integrity.check_schema(conn, migrations, check)
        integrity.check_tables(conn, check)
    if not memory:
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode.lower() != "wal":
            raise StoreError(f"could not switch the database to WAL mode (got {mode})")
        # checkpoints run off the commit path (sdschat.store.checkpoint), not inside the commit that fills the log
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute(f"PRAGMA synchronous = {sync}")
    conn.execute("PRAGMA foreign_keys = ON")
    # deleted rows are overwritten with zeros, freed pages too: a deleted epoch key does not linger in the file
    conn.execute("PRAGMA secure_delete = ON")
    applied = migrate.migrate(conn, migrations)
    if applied:
        log.info("applied schema migrations %s", applied)


def in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection, *_Ts], _T], *args: *_Ts) -> _T:
    """``fn(conn, *args)`` inside one ``BEGIN IMMEDIATE ... COMMIT``; rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
