"""Schema migrations: numbered SQL files, applied in order, each recorded in ``schema_version``.

Where the files come from
-------------------------
The source of truth is ``migrations/NNNN_name.sql`` at the repository root.
A checkout or an editable install finds that folder next to the package
(``Path(__file__).parents[2] / "migrations"``). A non-editable install (a
wheel) has no repository around it, and setuptools would only ship ``.sql``
files as package data if ``pyproject.toml`` declared them; so the package also
carries an exact copy of the files as Python strings in
:mod:`sdschat.store._migrations`, which always ships. The folder is preferred
when it exists and holds our ``0001_initial.sql``; otherwise the embedded copy
is used. ``python -m sdschat.store sync-migrations`` regenerates the copy after a
migration is added, and ``tests/store/test_store_migrations.py`` fails while
the two disagree.

How they are applied
--------------------
At open, inside one ``BEGIN IMMEDIATE`` transaction (so two processes opening
the same new file cannot both migrate): read the highest applied version;
refuse a database newer than the newest known migration
(:class:`~sdschat.store.errors.SchemaTooNewError`); run each pending file
statement by statement and insert ``(version, applied_at)`` into
``schema_version``; commit. A failure rolls every pending migration back.
Migration files must not contain transaction statements or PRAGMAs that
cannot run inside a transaction (``journal_mode``, ``foreign_keys``).
"""

from __future__ import annotations

import re
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import MigrationError, SchemaTooNewError

__all__ = ["Migration", "load_migrations", "migrations_dir", "current_version", "migrate", "latest_version"]

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_MARKER = "sdschat migration"

SCHEMA_VERSION_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations_dir() -> Path | None:
    """The repository's ``migrations/`` folder, if this package sits in a checkout."""
    candidate = Path(__file__).resolve().parents[2] / "migrations"
    first = candidate / "0001_initial.sql"
    try:
        if first.is_file() and _MARKER in first.read_text(encoding="utf-8")[:200]:
            return candidate
    except OSError:
        pass
    return None


def _parse(files: dict[str, str], origin: str) -> list[Migration]:
    out = []
    for filename, sql in files.items():
        m = _NAME.match(filename)
        if m is None:
            raise MigrationError(f"{origin}: {filename!r} is not named NNNN_name.sql")
        out.append(Migration(int(m.group(1)), m.group(2), sql))
    out.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in out]
    if versions != list(range(1, len(out) + 1)):
        raise MigrationError(f"{origin}: migration versions must be 1..N without gaps, found {versions}")
    return out


def read_dir(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.sql"))}


def load_migrations(folder: Path | None = None) -> list[Migration]:
    """All known migrations, oldest first: from ``folder``, the repository folder, or the embedded copy."""
    folder = folder if folder is not None else migrations_dir()
    if folder is not None:
        return _parse(read_dir(folder), str(folder))
    from ._migrations import MIGRATIONS

    return _parse(dict(MIGRATIONS), "sdschat.store._migrations")


def latest_version(migrations: list[Migration] | None = None) -> int:
    migrations = load_migrations() if migrations is None else migrations
    return migrations[-1].version if migrations else 0


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (semicolons inside strings or triggers are kept)."""
    statements = []
    buf = ""
    for piece in sql.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            stmt = buf.strip()
            if _strip_comments(stmt).strip(" \n\t;"):
                statements.append(stmt)
            buf = ""
    if _strip_comments(buf[:-1]).strip():
        raise MigrationError(f"incomplete SQL statement at the end of a migration: {buf.strip()[:80]!r}")
    return statements


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def current_version(conn: sqlite3.Connection) -> int:
    """Highest applied migration version (0 for a new database)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
    if row is None:
        return 0
    (v,) = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
    return int(v)


def check_not_too_new(conn: sqlite3.Connection, migrations: list[Migration]) -> int:
    v = current_version(conn)
    known = latest_version(migrations)
    if v > known:
        raise SchemaTooNewError(v, known)
    return v


def migrate(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[int]:
    """Apply pending migrations on ``conn`` (autocommit mode); returns the versions applied."""
    migrations = load_migrations() if migrations is None else migrations
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(SCHEMA_VERSION_DDL)
        have = check_not_too_new(conn, migrations)
        applied = []
        for mig in migrations:
            if mig.version <= have:
                continue
            for stmt in split_statements(mig.sql):
                try:
                    conn.execute(stmt)
                except sqlite3.Error as exc:
                    raise MigrationError(
                        f"migration {mig.version:04d}_{mig.name} failed: {exc} in {' '.join(stmt.split())[:80]!r}"
                    ) from exc
            conn.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (mig.version, int(time.time() * 1000))
            )
            applied.append(mig.version)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return applied


def render_embedded(folder: Path) -> str:
    """Source of :mod:`sdschat.store._migrations` for the files in ``folder``."""
    lines = [
        '"""Generated by ``python -m sdschat.store sync-migrations`` from migrations/*.sql: do not edit.',
        "",
        "The installed package's copy of the repository's migrations (see sdschat/store/migrate.py).",
        '"""',
        "",
        "MIGRATIONS: dict[str, str] = {",
    ]
    for name, sql in read_dir(folder).items():
        lines.append(f"    {name!r}: {sql!r},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    folder = migrations_dir()
    if folder is None:
        print("no migrations/ folder next to this package (not a checkout?)", file=sys.stderr)
        return 1
    _parse(read_dir(folder), str(folder))
    target = Path(__file__).with_name("_migrations.py")
    target.write_text(render_embedded(folder), encoding="utf-8")
    print(f"wrote {target} from {folder}")
    return 0
