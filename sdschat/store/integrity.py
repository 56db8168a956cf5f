"""Is an existing file a sound sdschat database? The checks made at open, before anything is read or written.

A file that is there is never taken as a new database: it must be whole, or the open fails with
:class:`~.errors.DamagedDatabaseError` (one line naming the file and the problem). A new database is only
ever made where no file exists (:func:`sdschat.store.connection.create_database`).

1. :func:`check_file`, before SQLite sees the file (its size and 100-byte header): empty, shorter than a
   header, not an SQLite header, a page size SQLite never writes, cut mid-page, or shorter than its header
   says (while no write-ahead log is pending).
2. :func:`check_schema`: ``sqlite_master`` against what ``migrations/`` 1..v create in an empty database (v:
   the file's ``schema_version``); each table and index on a page of its own inside the file.
3. :func:`check_tables`: ``PRAGMA quick_check`` of the small tables whose loss would make a channel look new
   or belong to someone else (``channels``, ``identity``, ``kv``, ...).

These cost a few tenths of a millisecond whatever the history (bench/store_open_check.py); ``PRAGMA
quick_check`` of the whole file costs ~1 s at 1,000,000 messages, so damage in the big tables is found by the
checks on every row read back (:mod:`.rows`) and by SQLite when it reads a damaged page, both one line too.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from . import migrate
from .errors import DamagedDatabaseError

__all__ = [
    "SMALL_TABLES",
    "check_database",
    "check_file",
    "check_schema",
    "check_tables",
    "damaged_on_read",
    "expected_schema",
    "is_damage",
]

_MAGIC = b"SQLite format 3\x00"
#: the tables whose damage would make the channel look new or someone else's: checked page by page at open
SMALL_TABLES = ("schema_version", "kv", "identity", "channels", "participants")


def _damaged(path: Path | str, problem: str) -> DamagedDatabaseError:
    return DamagedDatabaseError(f"database {path} is damaged: {problem}")


def check_file(path: Path) -> None:
    """The file's size against its header; :class:`DamagedDatabaseError` if it cannot be a whole database."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise DamagedDatabaseError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise _damaged(path, "the file is empty (0 bytes)")
    if size < 100 or len(header) < 100:
        raise _damaged(
            path, f"the file is cut short ({size} byte{'s' if size != 1 else ''}, less than a database header)"
        )
    if header[:16] != _MAGIC:
        raise _damaged(path, "its header is not an SQLite database's (overwritten or not a database)")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise _damaged(path, f"its header names a page size of {page} bytes")
    if size % page:
        raise _damaged(path, f"the file is cut short mid-page ({size:,} bytes, pages of {page:,})")
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]  # the page count is only valid when these agree
    if header_valid and pages * page > size and not _wal_pending(path):
        raise _damaged(path, f"the file is cut short ({size // page:,} of the {pages:,} pages its header counts)")


def check_database(path: Path, migrations: list[migrate.Migration] | None = None) -> int:
    """Every check of an open, read-only and without opening a :class:`~.store.Store` (nothing migrated or
    written): for a file about to be copied in (``sdschat join --db``). Returns its schema version; raises
    :class:`DamagedDatabaseError` (or :class:`~.errors.SchemaTooNewError`)."""
    migrations = migrate.load_migrations() if migrations is None else migrations
    check_file(path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise _damaged(path, str(exc)) from None
    try:
        migrate.check_not_too_new(conn, migrations)
        version = check_schema(conn, migrations, path)
        check_tables(conn, path)
        return version
    except sqlite3.Error as exc:
        if not is_damage(exc):
            raise DamagedDatabaseError(f"cannot read {path}: {exc}") from None
        raise damaged_on_read(path, exc) from None
    except UnicodeDecodeError as exc:
        raise damaged_on_read(path, exc) from None
    finally:
        conn.close()


def _wal_pending(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def _norm(sql: str | None) -> str | None:
    """A statement as compared: identifiers' quotes and runs of white space do not count (``ALTER TABLE
    ... RENAME`` quotes the new name, and SQLite versions differ in how)."""
    return None if sql is None else " ".join(sql.replace('"', "").split())


def _schema_rows(conn: sqlite3.Connection, path: Path | str) -> dict[tuple[str, str], tuple[str, str | None, int]]:
    """``sqlite_master`` as ``{(type, name): (tbl_name, normalized sql, rootpage)}`` (SQLite's statistics
    tables aside: ``PRAGMA optimize`` makes them)."""
    out = {}
    rows = conn.execute(
        "SELECT CAST(type AS BLOB), CAST(name AS BLOB), CAST(tbl_name AS BLOB), CAST(sql AS BLOB), "
        "rootpage FROM sqlite_master"
    ).fetchall()
    for kind, name, table, sql, root in rows:
        try:
            kind, name, table = (v.decode("utf-8") if isinstance(v, bytes) else v for v in (kind, name, table))
            sql = sql.decode("utf-8") if isinstance(sql, bytes) else sql
        except UnicodeDecodeError:
            raise _damaged(path, "its schema holds text that is not UTF-8") from None
        if not (isinstance(kind, str) and isinstance(name, str) and isinstance(table, str)):
            raise _damaged(path, "its schema has a row without a type or name")
        if name.startswith("sqlite_stat"):
            continue
        out[(kind, name)] = (table, _norm(sql), root)
    return out


@functools.lru_cache(maxsize=8)
def expected_schema(migrations: tuple[migrate.Migration, ...]) -> dict[tuple[str, str], tuple[str, str | None]]:
    """What ``migrations`` create in an empty database: ``{(type, name): (tbl_name, normalized sql)}``."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate.migrate(conn, list(migrations))
        return {key: value[:2] for key, value in _schema_rows(conn, ":memory:").items()}
    finally:
        conn.close()


def check_schema(
    conn: sqlite3.Connection, migrations: list[migrate.Migration] | None = None, path: Path | str | None = None
) -> int:
    """The file's schema is what migrations 1..v create (v its ``schema_version``, at least 1); returns v.

    Raises :class:`DamagedDatabaseError`; a schema newer than ``migrations`` is the caller's to refuse first
    (:func:`sdschat.store.migrate.check_not_too_new`)."""
    migrations = migrate.load_migrations() if migrations is None else migrations
    where = path if path is not None else _file_of(conn)
    have = _schema_rows(conn, where)
    if ("table", "schema_version") not in have:
        raise _damaged(where, "it holds no sdschat schema (no schema_version table)")
    version = migrate.current_version(conn)
    if not 1 <= version <= migrate.latest_version(migrations):
        raise _damaged(where, f"its schema version reads {version}")
    expected = expected_schema(tuple(migrations[:version]))
    for key, (table, sql) in expected.items():
        got = have.get(key)
        if got is None:
            raise _damaged(where, f"its schema lacks the {key[0]} {key[1]}")
        if got[:2] != (table, sql):
            raise _damaged(where, f"the definition of the {key[0]} {key[1]} in its schema is not sdschat's")
    extra = sorted(set(have) - set(expected))
    if extra:
        raise _damaged(where, f"its schema has a {extra[0][0]} {extra[0][1]} sdschat does not make")
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    roots = [root for (kind, _), (_, _, root) in have.items() if kind in ("table", "index") and root]
    if len(set(roots)) != len(roots) or any(type(r) is not int or not 1 < r <= pages for r in roots):
        raise _damaged(where, "its schema points two tables at one page, or past the end of the file")
    return version


def check_tables(conn: sqlite3.Connection, path: Path | str | None = None) -> None:
    """``PRAGMA quick_check`` of :data:`SMALL_TABLES` (their pages, records and NOT NULL columns), those the
    schema has (a schema of other migrations, in tests, may have none)."""
    marks = ",".join("?" * len(SMALL_TABLES))
    present = [
        r[0]
        for r in conn.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({marks})", SMALL_TABLES
        )
    ]
    for table in present:
        try:
            rows = conn.execute(f"PRAGMA quick_check({table})").fetchall()
        except sqlite3.DatabaseError as exc:  # a page SQLite cannot even walk
            if not is_damage(exc):
                raise
            rows = [(str(exc),)]
        if rows != [("ok",)]:
            where = path if path is not None else _file_of(conn)
            first = str(rows[0][0]) if rows else "no answer"
            raise _damaged(where, f"table {table} fails SQLite's check ({' '.join(first.split())[:120]})")


def _file_of(conn: sqlite3.Connection) -> str:
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return file or ":memory:"
    return "?"


def damaged_on_read(path: Path | str, exc: BaseException) -> DamagedDatabaseError:
    """A read that SQLite or Python's UTF-8 decoder refused (a damaged page or a damaged text value)."""
    if isinstance(exc, UnicodeDecodeError):
        raw = exc.object if isinstance(exc.object, bytes) else b""
        if raw.startswith(b"malformed database schema"):  # SQLite's message, quoting the damaged schema text
            return _damaged(path, " ".join(raw.decode("utf-8", "backslashreplace").split())[:200])
        return _damaged(path, "a stored text is not UTF-8")
    return _damaged(path, " ".join(str(exc).split())[:200])


def is_damage(exc: sqlite3.Error) -> bool:
    """``exc`` is SQLite saying the file is not sound (rather than full, locked, read-only...)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "could not decode" in text
