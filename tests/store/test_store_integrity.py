"""The checks at open and on every row read back: a damaged file or row is one line, never a new database.

sdschat/store/integrity.py (the file, its schema, its small tables), sdschat/store/rows.py (each row typed and
in range), and sdschat/store/connection.py (a new database is made whole or not at all).
"""

import asyncio
import re
import sqlite3

import pytest
from run_until import run

from sdschat.sds import MessageChannel
from sdschat.store import (
    CorruptRowError,
    DamagedDatabaseError,
    EventRow,
    MessageRow,
    MigrationError,
    ParticipantRow,
    Store,
    StoreError,
)

CID = "room"


def mid(i: int) -> str:
    return f"{i:064x}"


async def _filled(path):
    store = await Store.open(path)
    try:
        await store.save_state(MessageChannel(CID, "ab" * 16, None, 1).snapshot(), "{}")
        await store.apply(
            CID,
            messages=[MessageRow(mid(i), "cd" * 16, i + 1, b'{"v":1}', "received") for i in range(300)],
            events=[EventRow("received", 5, mid(1), "cd" * 16)],
            participants=[ParticipantRow("cd" * 16, "carol", 1, 2)],
        )
        await store.kv_set("nick", "bob")
        await store.set_identity(bytes(32))
    finally:
        await store.close()
    return path


@pytest.fixture
def db(tmp_path):
    path = run(_filled(tmp_path / "n.db"))
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


async def _open_close(path, **kw):
    store = await Store.open(path, **kw)
    await store.close()


def _roots(path) -> tuple[int, dict[str, int]]:
    con = sqlite3.connect(path)
    try:
        return (
            con.execute("PRAGMA page_size").fetchone()[0],
            dict(con.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0")),
        )
    finally:
        con.close()


def _refused(path, match: str) -> None:
    """Opening ``path`` (creating allowed) fails with one line naming it, and leaves the file as it was."""
    before = path.read_bytes()
    for create in (True, False):
        with pytest.raises(DamagedDatabaseError) as info:
            run(_open_close(path, create=create))
        text = str(info.value)
        assert "\n" not in text and str(path) in text and re.search(match, text), text
    assert path.read_bytes() == before


# ------------------------------------------------------------------------------------------ the file itself


@pytest.mark.parametrize(
    ("cut", "match"),
    [
        (lambda size, page: 0, r"is damaged: the file is empty \(0 bytes\)"),
        (lambda size, page: 1, r"cut short \(1 byte, less than a database header\)"),
        (lambda size, page: 99, r"cut short \(99 bytes"),
        (lambda size, page: size - 1, r"cut short mid-page"),
        (lambda size, page: 2 * page + 17, r"cut short mid-page"),
        (lambda size, page: 2 * page, r"cut short \(2 of the [\d,]+ pages its header counts\)"),
    ],
    ids=["empty", "one_byte", "header_cut", "last_byte", "mid_page", "at_a_page"],
)
def test_a_cut_file_is_refused_never_started_over(db, cut, match):
    page, _ = _roots(db)
    with open(db, "r+b") as f:
        f.truncate(cut(db.stat().st_size, page))
    _refused(db, match)


def test_a_zeroed_or_overwritten_file_is_refused(db):
    db.write_bytes(bytes(db.stat().st_size))
    _refused(db, "its header is not an SQLite database's")


def test_a_page_size_sqlite_never_writes_is_refused(db):
    data = bytearray(db.read_bytes())
    data[16:18] = (1000).to_bytes(2, "big")
    db.write_bytes(bytes(data))
    _refused(db, "page size of 1000 bytes")


def test_a_foreign_sqlite_database_is_not_taken_over(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    _refused(path, "no sdschat schema")


# ------------------------------------------------------------------------------------------------ the schema


def _flip(path, needle: bytes, offset: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at > 0
    data[at + offset] ^= mask
    path.write_bytes(bytes(data))


def test_a_schema_byte_that_is_not_utf8_is_one_line_not_a_unicode_error(db):
    """The tester's case: `export` and `bot` printed a 45-line UnicodeDecodeError."""
    _flip(db, b"CREATE TABLE kv", 3, 0x80)
    _refused(db, r"malformed database schema \(kv\)")


def test_a_schema_flip_that_still_parses_is_found(db):
    _flip(db, b"value TEXT NOT NULL", 4, 0x03)  # a column "valuf": SQLite parses it; sdschat would misread kv
    _refused(db, "the definition of the table kv in its schema is not sdschat's")


def _edit_schema(path, sql: str) -> None:
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("DROP INDEX messages_order", "lacks the index messages_order"),
        ("CREATE TABLE extra (x)", "has a table extra sdschat does not make"),
        ("DROP TRIGGER events_no_update", "lacks the trigger events_no_update"),
    ],
)
def test_a_schema_that_is_not_sdschats_is_refused(db, sql, match):
    _edit_schema(db, sql)
    _refused(db, match)


def test_sqlites_own_statistics_tables_are_not_damage(db):
    _edit_schema(db, "ANALYZE")
    run(_open_close(db))


def test_two_tables_on_one_page_are_found(db):
    _, roots = _roots(db)
    con = sqlite3.connect(db)
    con.execute("PRAGMA writable_schema = ON")
    con.execute("UPDATE sqlite_master SET rootpage = ? WHERE name = 'participants'", (roots["kv"],))
    con.commit()
    con.close()
    _refused(db, "points two tables at one page")


# -------------------------------------------------------------------------------------------- the small tables


@pytest.mark.parametrize("table", ["kv", "channels", "identity"])
def test_a_damaged_page_of_a_small_table_is_found_at_open(db, table):
    """Without this the channel row (or the identity) would read as missing: a new channel, a new member."""
    page, roots = _roots(db)
    data = bytearray(db.read_bytes())
    data[(roots[table] - 1) * page] ^= 0xFF  # its b-tree page type
    db.write_bytes(bytes(data))
    _refused(db, rf"damaged: .*{table}")


# -------------------------------------------------------------------------------------------- a new database


def test_a_new_database_is_made_whole_in_place(tmp_path):
    path = tmp_path / "new.db"
    run(_open_close(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db"]
    assert path.stat().st_mode & 0o777 == 0o600
    run(_open_close(path, create=False))  # and it passes its own checks


def test_two_opens_of_one_new_path_make_one_database(tmp_path):
    path = tmp_path / "new.db"

    async def both():
        stores = await asyncio.gather(Store.open(path), Store.open(path))
        await stores[0].set_identity(b"\x01" * 32)
        seen = await stores[1].get_identity()
        for s in stores:
            await s.close()
        return seen

    assert run(both()) == b"\x01" * 32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db"]


def test_a_failed_creation_leaves_no_file(tmp_path):
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_initial.sql").write_text("-- sdschat migration\nCREATE TABLE a (x INTEGER);\nNOT SQL;\n")
    with pytest.raises(MigrationError):
        run(_open_close(tmp_path / "new.db", migrations_folder=folder))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["migrations"]


# ---------------------------------------------------------------------------------------------- rows read back


def _sql(path, *statements: str, loosen: str | None = None) -> None:
    """Change rows; ``loosen``: the NOT NULLs of that table lifted meanwhile (a damaged record holds what
    SQLite would refuse to write)."""
    con = sqlite3.connect(path)
    original = None
    if loosen:
        original = con.execute("SELECT sql FROM sqlite_master WHERE name = ?", (loosen,)).fetchone()[0]
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (original.replace(" NOT NULL", ""), loosen))
        con.commit()
        con.close()
        con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    if original is not None:
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (original, loosen))
        con.commit()
    con.close()


async def _read_all(path):
    store = await Store.open(path)
    try:
        return (
            [m async for m in store.iter_messages()],
            [e async for e in store.iter_events()],
            await store.participants(),
            await store.kv_get("nick"),
            await store.load_state(CID),
        )
    finally:
        await store.close()


NEWEST = "(SELECT max(rowid) FROM messages)"


@pytest.mark.parametrize(
    ("statements", "loosen", "match"),
    [
        (
            [f"UPDATE messages SET message_id = 'zz' || substr(message_id, 3) WHERE rowid = {NEWEST}"],
            None,
            "damaged row in messages: a message id is not 64 hex digits",
        ),
        ([f"UPDATE messages SET message_id = 'abc' WHERE rowid = {NEWEST}"], None, "a message id is not 64 hex"),
        (
            [f"UPDATE messages SET content = NULL, state = NULL WHERE rowid = {NEWEST}"],
            "messages",
            "damaged row in messages: a message has no content",
        ),
        ([f"UPDATE messages SET content = x'' WHERE rowid = {NEWEST}"], None, "a message has no content"),
        ([f"UPDATE messages SET state = 'Received!' WHERE rowid = {NEWEST}"], None, "message state is not a lowercase"),
        ([f"UPDATE messages SET resends = -1 WHERE rowid = {NEWEST}"], None, "out of range"),
        ("UPDATE participants SET first_seen_ms = 'yesterday'", None, "damaged row in participants"),
        ("UPDATE kv SET value = x'00' WHERE key = 'nick'", None, "damaged row in kv"),
        (
            [f"UPDATE messages SET state = CAST(x'ff' AS TEXT) WHERE rowid = {NEWEST}"],
            None,
            "is damaged: .*(UTF-8|decode)",
        ),
    ],
    ids=[
        "id_not_hex",
        "id_short",
        "null_row",
        "empty_content",
        "state_not_a_word",
        "negative_count",
        "participant_time_not_int",
        "kv_not_text",
        "text_not_utf8",
    ],
)
def test_every_row_read_back_is_checked(db, statements, loosen, match):
    _sql(db, *([statements] if isinstance(statements, str) else statements), loosen=loosen)
    with pytest.raises(CorruptRowError if "UTF-8" not in match else DamagedDatabaseError) as info:
        run(_read_all(db))
    text = str(info.value)
    assert "\n" not in text and str(db) in text and re.search(match, text), text


def test_an_event_of_a_kind_sdschat_never_records_is_damage(db):
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER events_no_update")
    con.execute("UPDATE events SET kind = 'exploded'")
    con.execute(
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events\nBEGIN\n"
        "    SELECT RAISE(ABORT, 'events is append-only');\nEND"
    )
    con.commit()
    con.close()

    async def events():
        async with await Store.open(db) as store:
            return [e async for e in store.iter_events()]

    with pytest.raises(CorruptRowError, match="damaged row in events: an event's kind is not one sdschat records"):
        run(events())


def test_a_channel_whose_row_is_lost_is_not_a_new_channel(db):
    """Its messages are there: the engine must not start over (a fresh Lamport clock, a fresh log)."""
    _sql(db, "PRAGMA foreign_keys = OFF", f"DELETE FROM channels WHERE channel_id = '{CID}'")

    async def load():
        async with await Store.open(db) as store:
            return await store.load_state(CID), await store.load_state("another-channel")

    with pytest.raises(CorruptRowError, match="the channel's row is missing, yet messages holds rows of it"):
        run(load())


def test_a_sound_database_reads_back_whole(db):
    messages, events, participants, nick, state = run(_read_all(db))
    assert len(messages) == 300 and len(events) == 1 and participants[0].nick == "carol" and nick == "bob"
    assert state is not None and state.participant_id == "ab" * 16


def test_every_failure_is_a_store_error(db):
    assert issubclass(CorruptRowError, DamagedDatabaseError) and issubclass(DamagedDatabaseError, StoreError)


def test_a_file_to_be_copied_in_is_checked_without_being_written(db, tmp_path):
    """``integrity.check_database``: what ``sdschat join --db`` can ask before it copies a file in."""
    from sdschat.store import integrity

    assert integrity.check_database(db) >= 4
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(DamagedDatabaseError, match="empty.db is damaged: the file is empty"):
        integrity.check_database(empty)
    _flip(db, b"CREATE TABLE kv", 3, 0x80)
    before = db.read_bytes()
    with pytest.raises(DamagedDatabaseError, match="malformed database schema"):
        integrity.check_database(db)
    assert db.read_bytes() == before
