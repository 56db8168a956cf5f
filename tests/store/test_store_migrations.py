"""Migrations: applied in order at open, recorded, not reapplied; a newer schema is refused."""

import ast
import sqlite3
import sys
from pathlib import Path

import pytest
from run_until import run

import sdschat.store
from sdschat.store import MigrationError, SchemaTooNewError, Store, StoreError
from sdschat.store import migrate as M

ROOT = Path(__file__).resolve().parents[2]


def test_migrations_applied_and_recorded(tmp_path):
    db = tmp_path / "node.db"

    async def go():
        store = await Store.open(db)
        try:
            assert await store.schema_version() == M.latest_version() >= 1
        finally:
            await store.close()

    run(go())
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT version, applied_at FROM schema_version ORDER BY version").fetchall()
    assert [v for v, _ in rows] == list(range(1, M.latest_version() + 1))
    assert all(isinstance(t, int) and t > 1_600_000_000_000 for _, t in rows)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {
        "kv",
        "identity",
        "channels",
        "sds_log",
        "sds_outgoing",
        "sds_incoming",
        "sds_missing",
        "sds_lost",
        "sds_repair_requests",
        "sds_repair_responses",
        "sds_cache",
        "sds_bloom_ids",
        "participants",
        "messages",
        "events",
        "schema_version",
    } <= tables
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "events_kind_ts" in indexes
    conn.close()


def test_every_integer_column_is_INTEGER(tmp_path):
    run(_open_close(tmp_path / "n.db"))
    conn = sqlite3.connect(tmp_path / "n.db")
    # ordinary tables only: the FTS5 index (virtual) and its shadow tables declare their own columns
    tables = [r[1] for r in conn.execute("PRAGMA table_list") if r[2] == "table" and not r[1].startswith("sqlite_")]
    for table in tables:
        for _, col, decl, *_ in conn.execute(f"PRAGMA table_info({table})"):
            assert decl in ("INTEGER", "TEXT", "BLOB"), (table, col, decl)
    conn.close()


async def _open_close(path, **kw):
    store = await Store.open(path, **kw)
    await store.close()


def test_reopening_does_not_reapply(tmp_path):
    db = tmp_path / "node.db"

    async def first():
        store = await Store.open(db)
        await store.kv_set("nick", "bob")
        await store.close()

    run(first())
    before = sqlite3.connect(db).execute("SELECT version, applied_at FROM schema_version").fetchall()

    async def again():
        store = await Store.open(db)
        try:
            assert await store.kv_get("nick") == "bob"  # a reapplied 0001 would have failed or wiped it
            assert await store.schema_version() == M.latest_version()
        finally:
            await store.close()

    run(again())
    run(again())
    after = sqlite3.connect(db).execute("SELECT version, applied_at FROM schema_version").fetchall()
    assert after == before


def test_newer_schema_is_refused_with_one_line(tmp_path):
    db = tmp_path / "node.db"
    run(_open_close(db))
    known = M.latest_version()
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO schema_version VALUES (?, 0)", (known + 5,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNewError) as info:
        run(_open_close(db))
    msg = str(info.value)
    assert msg == (
        f"database schema version {known + 5} is newer than this sdschat (knows up to {known}); upgrade sdschat"
    )
    assert "\n" not in msg
    assert isinstance(info.value, StoreError)
    assert (info.value.version, info.value.known) == (known + 5, known)


def test_pending_migrations_apply_in_order_and_a_failure_rolls_back(tmp_path):
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_initial.sql").write_text("-- sdschat migration\nCREATE TABLE a (x INTEGER);\n")
    db = tmp_path / "n.db"
    run(_open_close(db, migrations_folder=folder))
    (folder / "0002_more.sql").write_text(
        "CREATE TABLE b (s TEXT DEFAULT 'x;y');\n"
        "CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES ('z'); END;\n"
    )
    (folder / "0003_broken.sql").write_text("CREATE TABLE c (x INTEGER);\nTHIS IS NOT SQL;\n")
    with pytest.raises(MigrationError, match="0003_broken"):
        run(_open_close(db, migrations_folder=folder))
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone() == (1,)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "b" not in names and "c" not in names  # 0002 and 0003 rolled back together
    conn.close()
    (folder / "0003_broken.sql").write_text("CREATE TABLE c (x INTEGER);\n")
    run(_open_close(db, migrations_folder=folder))
    conn = sqlite3.connect(db)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")] == [1, 2, 3]
    conn.execute("INSERT INTO a VALUES (1)")
    assert conn.execute("SELECT s FROM b").fetchall() == [("z",)]
    conn.close()


def test_bad_migration_names_and_gaps_are_refused(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_initial.sql").write_text("SELECT 1;")
    (folder / "0003_skip.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="without gaps"):
        M.load_migrations(folder)
    (folder / "0003_skip.sql").unlink()
    (folder / "2_bad.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="NNNN_name"):
        M.load_migrations(folder)


def test_split_statements():
    sql = (
        "-- c\nCREATE TABLE t (s TEXT DEFAULT ';');\n\n"
        "CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;\n-- end\n"
    )
    stmts = M.split_statements(sql)
    assert len(stmts) == 2 and stmts[1].endswith("END;")
    assert M.split_statements("CREATE TABLE t (x INTEGER)") == ["CREATE TABLE t (x INTEGER);"]
    with pytest.raises(MigrationError, match="incomplete"):
        M.split_statements("CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1;")


def test_repo_folder_is_found_and_the_embedded_copy_matches_it():
    folder = M.migrations_dir()
    assert folder == ROOT / "migrations"
    from sdschat.store._migrations import MIGRATIONS

    files = M.read_dir(folder)
    assert MIGRATIONS == files, "embedded copy is stale: run `python -m sdschat.store sync-migrations`"
    assert M.render_embedded(folder) == (Path(M.__file__).with_name("_migrations.py")).read_text()


def test_installed_package_uses_the_embedded_copy(tmp_path, monkeypatch):
    """Without a repository around the package (a wheel install), the embedded copy is used."""
    monkeypatch.setattr(M, "migrations_dir", lambda: None)
    migs = M.load_migrations()
    assert [m.version for m in migs] == list(range(1, M.latest_version(M.load_migrations(ROOT / "migrations")) + 1))
    run(_open_close(tmp_path / "n.db"))
    conn = sqlite3.connect(tmp_path / "n.db")
    assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone() == (len(migs),)
    conn.close()


def test_not_a_database_is_a_store_error(tmp_path):
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="junk.db is damaged: its header is not an SQLite database's"):
        run(_open_close(bad))
    assert bad.read_bytes() == b"this is not sqlite at all" * 100  # refused before anything was written


def test_store_imports_only_sds_state_types():
    """DESIGN.md layering: sdschat.store imports only sdschat.sds state types (+ stdlib, aiosqlite)."""
    allowed_ours = {"sdschat.sds.state", "sdschat.sds.wire"}
    package_dir = Path(sdschat.store.__file__).parent
    for source in package_dir.glob("*.py"):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.level == 1, (source.name, node.module)
                    continue
                mods = [node.module]
            else:
                continue
            for mod in mods:
                root = mod.split(".")[0]
                if root == "sdschat":
                    assert mod in allowed_ours, (source.name, mod)
                    if mod == "sdschat.sds.wire":
                        names = {a.name for a in node.names}
                        assert names == {"HistoryEntry"}, (source.name, names)
                else:
                    assert root == "aiosqlite" or root in sys.stdlib_module_names, (source.name, mod)


def _hits(conn, q):
    return [
        r[0]
        for r in conn.execute(
            "SELECT m.message_id FROM message_search s JOIN messages m ON m.rowid = s.rowid "
            "WHERE message_search MATCH ? ORDER BY s.rowid",
            (q,),
        )
    ]


def test_search_migration_indexes_a_database_made_before_it(tmp_path):
    """0002_search builds the FTS index for the messages already stored, and its triggers keep it current (until
    0006, which indexes in batches)."""
    import json

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    M.migrate(conn, M.load_migrations()[:1])  # the schema before full-text search
    conn.execute("INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES ('c', 'p', 0)")

    def add(mid, content):
        conn.execute(
            "INSERT INTO messages (channel_id, message_id, sender_id, lamport_timestamp, content, state) "
            "VALUES ('c', ?, 's', 1, ?, 'delivered')",
            (mid, content),
        )

    add("m1", json.dumps({"v": 1, "k": "msg", "text": "the Café is open"}).encode())
    add("m2", b"\xff\x00 not json")  # not a payload: stored, not indexed, no error
    add("m3", json.dumps({"v": 1, "k": "msg", "nick": "x"}).encode())  # no text
    conn.close()

    conn = sqlite3.connect(db, isolation_level=None)
    M.migrate(conn, M.load_migrations()[:2])  # 0002 (0006 below indexes in batches instead)

    def hits(q):
        return _hits(conn, q)

    assert hits("cafe") == ["m1"]  # diacritics folded, case folded
    assert hits("open") == ["m1"]
    conn.execute(
        "INSERT INTO messages (channel_id, message_id, sender_id, lamport_timestamp, content, state) "
        "VALUES ('c', 'm4', 's', 2, ?, 'received')",
        (json.dumps({"text": "café again"}).encode(),),
    )
    assert hits("cafe") == ["m1", "m4"]
    conn.execute("DELETE FROM messages WHERE message_id = 'm1'")
    assert hits("cafe") == ["m4"]
    conn.execute("INSERT INTO message_search (message_search) VALUES ('integrity-check')")
    conn.close()


def test_typed_events_migration_gives_a_database_made_before_it_the_typed_columns(tmp_path):
    """0004: the facts the report reads become columns generated from detail; no row is rewritten, the
    append-only rule stays, a detail that is not JSON gives NULLs, and the node writes as before."""
    import json

    db = tmp_path / "v3.db"
    conn = sqlite3.connect(db, isolation_level=None)
    M.migrate(conn, [m for m in M.load_migrations() if m.version <= 3])
    rows = [
        ("delivered", {"repaired": True, "via": "repair", "publisher": "p"}),
        ("acked", {"by_bloom": True, "by": "b"}),
        ("sent", {"bytes": 321}),
        ("missing", {"missing": ["x", "y"], "waiting_on": []}),
        ("repair_requested", {"carrier": "s1"}),
        ("acked", {"by_bloom": False, "by": "c", "frame_ts": 77}),
        ("missing", {"missing": "not a list"}),
    ]
    conn.executemany("INSERT INTO events (ts_ms, kind, detail) VALUES (1, ?, ?)", [(k, json.dumps(d)) for k, d in rows])
    conn.execute("INSERT INTO events (ts_ms, kind, detail) VALUES (2, 'rejected', 'not json')")
    conn.execute(
        "INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES (?, ?, 0)", ("c" * 32, "a" * 32)
    )
    size_before = db.stat().st_size
    assert M.migrate(conn, [m for m in M.load_migrations() if m.version <= 4]) == [4]
    cols = "repaired, by_bloom, bytes, by_id, frame_ts, missing_ids, carrier"
    got = conn.execute(f"SELECT kind, {cols} FROM event_history ORDER BY seq").fetchall()
    assert got == [
        ("delivered", 1, None, None, None, None, None, None),
        ("acked", None, 1, None, "b", None, None, None),
        ("sent", None, None, 321, None, None, None, None),
        ("missing", None, None, None, None, None, '["x","y"]', None),
        ("repair_requested", None, None, None, None, None, None, "s1"),
        ("acked", None, 0, None, "c", 77, None, None),
        ("missing", None, None, None, None, None, None, None),  # not a list: no ids
        ("rejected", None, None, None, None, None, None, None),  # not JSON: NULLs, not an error
    ]
    assert db.stat().st_size == size_before  # virtual columns: nothing was rewritten
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'x' WHERE seq = 1")
    conn.close()

    async def write():  # the node's writes are unchanged
        from sdschat.store import EventRow

        store = await Store.open(db)
        try:
            await store.apply("c" * 32, events=[EventRow("sent", 5, "m", "a", detail={"bytes": 9})])
        finally:
            await store.close()

    run(write())
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT bytes FROM events WHERE message_id = 'm'").fetchone() == (9,)
    conn.close()


def test_search_in_batches_keeps_what_was_indexed_and_takes_new_rows_only_when_asked(tmp_path):
    """0006: the messages indexed before it stay found and are unindexed when deleted or rewritten; a new row
    is in the index only after index_pending (the store runs it before a search and every INDEX_BATCH rows),
    with the content it has then; a row deleted before that never enters it; the index stays consistent."""
    import json

    from sdschat.store.search import index_pending

    db = tmp_path / "v5.db"
    conn = sqlite3.connect(db, isolation_level=None)
    M.migrate(conn, [m for m in M.load_migrations() if m.version <= 5])
    conn.execute("INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES ('c', 'p', 0)")

    def add(mid, text):
        conn.execute(
            "INSERT INTO messages (channel_id, message_id, sender_id, lamport_timestamp, content, state) "
            "VALUES ('c', ?, 's', 1, ?, 'delivered')",
            (mid, json.dumps({"text": text}).encode()),
        )

    def rewrite(mid, text):
        conn.execute("UPDATE messages SET content = ? WHERE message_id = ?", (json.dumps({"text": text}).encode(), mid))

    add("m1", "apple one")
    add("m2", "apple two")
    assert M.migrate(conn) == [6]
    assert _hits(conn, "apple") == ["m1", "m2"]  # indexed by 0002's trigger, kept
    add("m3", "apple three")
    add("m4", "banana four")
    assert _hits(conn, "apple") == ["m1", "m2"]  # not yet
    rewrite("m3", "cherry three")  # changed before it was indexed: indexed as it is then
    conn.execute("DELETE FROM messages WHERE message_id = 'm4'")  # gone before it was indexed: never
    rewrite("m2", "cherry two")  # indexed: its old words leave the index
    assert index_pending(conn) == 1  # m3 (m4, the newest, is gone)
    assert _hits(conn, "apple") == ["m1"] and _hits(conn, "cherry") == ["m2", "m3"] and _hits(conn, "banana") == []
    assert index_pending(conn) == 0  # nothing new
    # the newest rows deleted: SQLite gives the next row m3's rowid again, so the mark comes down with them
    conn.execute("DELETE FROM messages WHERE message_id = 'm3'")
    add("m5", "date five")
    assert _hits(conn, "cherry") == ["m2"] and index_pending(conn) == 1 and _hits(conn, "date") == ["m5"]
    # a whole channel's messages go with it (a cascade): every later row is indexed when asked
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("DELETE FROM channels WHERE channel_id = 'c'")
    assert _hits(conn, "apple") == _hits(conn, "cherry") == _hits(conn, "date") == []
    conn.execute("INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES ('c', 'p', 0)")
    add("m6", "elder six")
    assert index_pending(conn) == 1 and _hits(conn, "elder") == ["m6"]
    # a damaged file without the mark: the triggers lose track, so the index is rebuilt from the messages
    conn.execute("DELETE FROM kv WHERE key = 'search_indexed_through'")
    rewrite("m6", "fig six")
    add("m7", "grape seven")
    assert index_pending(conn) == 2 and _hits(conn, "elder") == [] and _hits(conn, "fig OR grape") == ["m6", "m7"]
    conn.execute("INSERT INTO message_search (message_search) VALUES ('integrity-check')")
    conn.close()
