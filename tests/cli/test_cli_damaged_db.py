"""A damaged channel database, as a person meets it: every command that opens one, run as the real `sdschat`.

A profile's channel database is made by a real bot over mosquitto, then copied and damaged the ways a disk, a
crash or a hand can damage it: cut to 0 or 1 byte, cut mid-page or at a page, zeroed, a byte flipped in the
schema (so that SQLite cannot parse it, or so that it parses as another schema), a small table's page header
flipped or zeroed, and rows that are not what sdschat writes (an id that is not hex, a row of nulls). Each
command must refuse it: exit 2, exactly one line on stderr naming the file, no traceback; and never take it
as a new channel: the damaged file is not written to, no other database appears, nothing is published.

The default suite runs each command against one damage (round robin: every damage meets at least one
command) in seconds. ``SDSCHAT_DAMAGE_MATRIX=1`` runs every command against every damage, and seeded random
byte flips (the slow test below).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from brokers import Mosquitto, mosquitto_binary

pytestmark = pytest.mark.timeout(280)

SDSCHAT = [sys.executable, "-m", "sdschat"]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore", "TERM": "xterm-256color"}


# ------------------------------------------------------------------------------------------------ the template


class Template:
    """A profile (``home``) whose channel ``team`` has a database a bot wrote, and facts about its layout."""

    def __init__(self, home: Path, url: str) -> None:
        self.home = home
        self.url = url
        self.db = next((home / "db").glob("*.db"))
        self.key = next((home / "keys").glob("*.key"))
        con = sqlite3.connect(self.db)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.page = con.execute("PRAGMA page_size").fetchone()[0]
            self.roots = dict(con.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0"))
            self.participant = con.execute("SELECT participant_id FROM channels").fetchone()[0]
            self.messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
        finally:
            con.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{self.db}{suffix}").unlink(missing_ok=True)


class Listener:
    """Counts every MQTT message on the broker (``#``): a refused command publishes nothing."""

    def __init__(self, host: str, port: int) -> None:
        import paho.mqtt.client as mqtt

        self.count = 0
        self._client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"listener-{os.urandom(4).hex()}")
        self._client.on_message = self._on_message
        ready = threading.Event()
        self._client.on_subscribe = lambda *a, **k: ready.set()
        self._client.on_connect = lambda c, *a, **k: c.subscribe("#", qos=1)
        self._client.connect(host, port)
        self._client.loop_start()
        assert ready.wait(10), "the listener did not subscribe"

    def _on_message(self, client, userdata, msg) -> None:
        self.count += 1

    def close(self) -> None:
        self._client.loop_stop()
        self._client.disconnect()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("damaged-db-mosquitto"))
    b.start()
    yield b
    b.close()


@pytest.fixture(scope="module")
def template(broker, tmp_path_factory) -> Template:
    home = tmp_path_factory.mktemp("damaged-db-template") / "alice"
    for argv in (["init", "--name", "alice", "--broker", broker.url, "--home", home], ["new", "team", "--home", home]):
        subprocess.run([*SDSCHAT, *map(str, argv)], check=True, capture_output=True, env=ENV, timeout=60)
    p = subprocess.run(
        [
            *SDSCHAT,
            "bot",
            "--channel",
            "team",
            "--home",
            str(home),
            "--count",
            "3",
            "--interval",
            "0",
            "--linger",
            "0",
            "--max-runtime",
            "1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert p.returncode in (0, 3), p.stderr  # alone, nobody acknowledges: it gives up after 1 s (3)
    t = Template(home, broker.url)
    assert t.messages >= 4  # its join and three lines
    return t


@pytest.fixture(scope="module")
def listener(broker, template):
    lis = Listener(broker.host, broker.port)
    yield lis
    lis.close()


# ----------------------------------------------------------------------------------------------------- damages


def _truncate(size):
    def damage(db: Path, t: Template) -> None:
        with open(db, "r+b") as f:
            f.truncate(size(db.stat().st_size, t.page))

    return damage


def _flip_at(find):
    def damage(db: Path, t: Template) -> None:
        data = bytearray(db.read_bytes())
        at, mask = find(data, t)
        data[at] ^= mask
        db.write_bytes(bytes(data))

    return damage


def _zero_page(table: str):
    def damage(db: Path, t: Template) -> None:
        data = bytearray(db.read_bytes())
        start = (t.roots[table] - 1) * t.page
        data[start : start + t.page] = bytes(t.page)
        db.write_bytes(bytes(data))

    return damage


def _zeroed(db: Path, t: Template) -> None:
    db.write_bytes(bytes(db.stat().st_size))


def _in_schema(text: bytes, offset: int, mask: int):
    def find(data: bytearray, t: Template) -> tuple[int, int]:
        at = data.find(text)
        assert at > 0, text
        return at + offset, mask

    return find


def _page_header(table: str):
    def find(data: bytearray, t: Template) -> tuple[int, int]:
        return (t.roots[table] - 1) * t.page, 0xFF  # the b-tree page's type byte: no type SQLite knows

    return find


#: damages found when the file is opened (every command must refuse them)
OPEN_DAMAGES = {
    "empty": _truncate(lambda size, page: 0),
    "one_byte": _truncate(lambda size, page: 1),
    "cut_mid_page": _truncate(lambda size, page: size // 2 + 1234),
    "cut_at_page": _truncate(lambda size, page: 3 * page),
    "zeroed": _zeroed,
    "schema_unparsable": _flip_at(_in_schema(b"CREATE TABLE kv", 3, 0x80)),  # 'A' -> 0xc1: not UTF-8 either
    "schema_other": _flip_at(_in_schema(b"value TEXT NOT NULL", 4, 0x03)),  # parses: column "valuf"
    "page_header_flip": _flip_at(_page_header("channels")),
    "page_zeroed": _zero_page("kv"),
}


def _sql_damage(*statements: str, loosen: bool = False):
    """Rows changed through SQLite; ``loosen``: with the NOT NULL of ``messages`` lifted meanwhile (what a
    damaged record holds: SQLite checks constraints on writes, not on reads)."""

    def damage(db: Path, t: Template) -> None:
        con = sqlite3.connect(db)
        try:
            original = con.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
            if loosen:
                con.execute("PRAGMA writable_schema = ON")
                con.execute(
                    "UPDATE sqlite_master SET sql = ? WHERE name = 'messages'",
                    (re.sub(r"(content\s+BLOB|state\s+TEXT) NOT NULL", r"\1", original),),
                )
                con.commit()
                con.close()
                con = sqlite3.connect(db)
            for s in statements:
                con.execute(s)
            con.commit()
            if loosen:
                con.execute("PRAGMA writable_schema = ON")
                con.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'messages'", (original,))
                con.commit()
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)

    return damage


NEWEST = "(SELECT rowid FROM messages ORDER BY lamport_timestamp DESC LIMIT 1)"
#: rows that are not what sdschat writes: found when they are read (the commands below all read them)
ROW_DAMAGES = {
    "id_not_hex": _sql_damage(f"UPDATE messages SET message_id = 'zz' || substr(message_id, 3) WHERE rowid = {NEWEST}"),
    "null_row": _sql_damage(f"UPDATE messages SET content = NULL, state = NULL WHERE rowid = {NEWEST}", loosen=True),
    # the tester's row: a payload whose nick, text and kind are all null (export printed them as nulls)
    "null_payload": _sql_damage(
        'UPDATE messages SET content = CAST(\'{"v":1,"k":null,"nick":null,'
        f'"text":null}}\' AS BLOB) WHERE rowid = {NEWEST}'
    ),
}


# ---------------------------------------------------------------------------------------------------- commands


COMMANDS = {
    "export": lambda h, db, t: ["export", "--channel", "team", "--home", h],
    "export_db": lambda h, db, t: ["export", "--db", db],
    "export_db_events": lambda h, db, t: ["export", "--db", db, "--events"],
    "bot": lambda h, db, t: [
        "bot",
        "--channel",
        "team",
        "--home",
        h,
        "--count",
        "1",
        "--interval",
        "0",
        "--linger",
        "0",
        "--max-runtime",
        "5",
        "--quiet",
    ],
    "bot_key_file": lambda h, db, t: [
        "bot",
        "--name",
        "alice",
        "--key-file",
        t.key,
        "--channel",
        "team",
        "--db",
        db,
        "--broker",
        t.url,
        "--count",
        "1",
        "--interval",
        "0",
        "--linger",
        "0",
        "--max-runtime",
        "5",
        "--quiet",
    ],
    "search": lambda h, db, t: ["search", "--home", h, "alice"],
    "inspect": lambda h, db, t: ["inspect", "--gaps", "--channel", "team", "--home", h],
    "channels": lambda h, db, t: ["channels", "--home", h],
    "invite": lambda h, db, t: ["invite", "team", "--home", h],
    "kick": lambda h, db, t: ["kick", "team", "bob", "--wait", "0", "--home", h],
    "rekey": lambda h, db, t: ["rekey", "team", "--wait", "0", "--home", h],
    "admin": lambda h, db, t: ["admin", "team", "bob", "--wait", "0", "--home", h],
    "chat": lambda h, db, t: ["chat", "--channel", "team", "--home", h],
    "window": lambda h, db, t: ["--home", h],
}
#: commands that need a terminal: run on a pty
TTY = {"chat", "window"}
#: the commands that read the newest message row (for ROW_DAMAGES)
ROW_READERS = ("export", "export_db", "bot", "bot_key_file", "kick", "chat")


def _run(argv: list[str], tty: bool, timeout: float = 60) -> tuple[int | None, str]:
    """The command's exit code (None: still running at ``timeout``, then killed) and its stderr."""
    if not tty:
        p = subprocess.run(
            [*SDSCHAT, *argv],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return p.returncode, p.stderr
    master, slave = os.openpty()
    p = subprocess.Popen([*SDSCHAT, *argv], stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=ENV, close_fds=True)
    os.close(slave)

    def drain():  # an app that started would block on a full terminal
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    try:
        _, err = p.communicate(timeout=timeout)
        code = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        code = None
    finally:
        os.close(master)
    return code, err.decode("utf-8", "replace")


class Outcome:
    """One command against one damaged copy, and what it must not have done."""

    def __init__(
        self, command: str, damage: str, code: int | None, err: str, db: Path, changed: bool, new_files: list[str]
    ) -> None:
        self.command, self.damage, self.code, self.err, self.db = command, damage, code, err, db
        self.changed, self.new_files = changed, new_files
        self.lines = [line for line in err.splitlines() if line.strip()]

    @property
    def traceback(self) -> bool:
        return "Traceback" in self.err

    @property
    def clean_refusal(self) -> bool:
        return self.code == 2 and len(self.lines) == 1 and self.db.name in self.lines[0] and not self.traceback

    def __repr__(self) -> str:
        return f"{self.command} x {self.damage}: exit {self.code}, stderr {self.err[-1500:]!r}"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def attempt(t: Template, workdir: Path, command: str, damage: str, fn) -> Outcome:
    home = workdir / f"{command}-{damage}"
    shutil.copytree(t.home, home)
    db = home / "db" / t.db.name
    fn(db, t)
    before, files = _digest(db), sorted(p.name for p in home.rglob("*"))
    code, err = _run(COMMANDS[command](home, db, t), command in TTY, timeout=20 if command in TTY else 60)
    changed = _digest(db) != before if db.exists() else True
    new = sorted(p.name for p in home.rglob("*") if p.name not in files and not p.name.endswith(("-wal", "-shm")))
    return Outcome(command, damage, code, err, db, changed, new)


def _check_open_damage(o: Outcome) -> None:
    assert not o.traceback, o
    assert o.clean_refusal, o
    assert not o.changed, f"{o.command} wrote into the damaged file ({o.damage}): taken as a new database"
    assert o.new_files == [], f"{o.command} ({o.damage}) made {o.new_files}"


def _still_the_same_channel(o: Outcome, t: Template) -> None:
    """A row damage is found after the file was opened (the node may have written its nick meanwhile): the
    channel is still the one it was, with no message more."""
    con = sqlite3.connect(o.db)
    try:
        assert con.execute("SELECT participant_id FROM channels").fetchall() == [(t.participant,)], o
        assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == t.messages, o
    finally:
        con.close()


# -------------------------------------------------------------------------------------------------------- tests


def _round_robin() -> list[tuple[str, str]]:
    names, damages = list(COMMANDS), list(OPEN_DAMAGES)
    names.remove("export_db")  # (export --db reads the same as export --db --events at open)
    pairs = [(c, damages[i % len(damages)]) for i, c in enumerate(names)]
    covered = {d for _, d in pairs}
    pairs += [(names[i % len(names)], d) for i, d in enumerate(damages) if d not in covered]
    return pairs


def test_every_command_refuses_a_damaged_database_in_one_line(template, listener, tmp_path):
    pairs = _round_robin()
    assert {c for c, _ in pairs} | {"export_db"} == set(COMMANDS) and {d for _, d in pairs} == set(OPEN_DAMAGES)
    outcomes = [attempt(template, tmp_path, c, d, OPEN_DAMAGES[d]) for c, d in pairs]
    for o in outcomes:
        _check_open_damage(o)
    time.sleep(0.3)
    assert listener.count == 0, "a command published on a damaged database"
    print(f"{len(outcomes)} runs (commands x damages), tracebacks 0, silent acceptances 0")


@pytest.mark.parametrize("damage", sorted(ROW_DAMAGES))
@pytest.mark.parametrize("command", ["export", "bot"])
def test_a_damaged_row_is_one_line_when_read(template, listener, tmp_path, command, damage):
    o = attempt(template, tmp_path, command, damage, ROW_DAMAGES[damage])
    assert not o.traceback and o.clean_refusal, o
    assert "damaged" in o.lines[0] and "messages" in o.lines[0], o
    _still_the_same_channel(o, template)
    assert listener.count == 0


@pytest.mark.parametrize("size", [0, 1])
def test_a_truncated_database_never_becomes_a_new_channel_when_the_bot_runs_twice(template, listener, tmp_path, size):
    """The tester's case: a bot on a channel database cut to 0 or 1 byte published a fresh join and its
    messages. Now it refuses, and refuses again the second time (nothing was initialised the first)."""
    home = tmp_path / "home"
    shutil.copytree(template.home, home)
    db = home / "db" / template.db.name
    with open(db, "r+b") as f:
        f.truncate(size)
    for _ in range(2):
        code, err = _run(COMMANDS["bot"](home, db, template), tty=False)
        assert code == 2 and "Traceback" not in err, err
        assert err.strip().splitlines() == [
            f"sdschat: database {db} is damaged: the file is "
            + ("empty (0 bytes)" if size == 0 else "cut short (1 byte, less than a database header)")
        ]
        assert db.stat().st_size == size
    assert listener.count == 0


@pytest.mark.slow  # every command against every damage: `pytest -m slow tests/cli/test_cli_damaged_db.py`
@pytest.mark.timeout(1200)
def test_every_command_against_every_damage_slow(template, listener, tmp_path):
    open_runs = [attempt(template, tmp_path, c, d, fn) for c in COMMANDS for d, fn in OPEN_DAMAGES.items()]
    row_runs = [attempt(template, tmp_path, c, d, fn) for c in ROW_READERS for d, fn in ROW_DAMAGES.items()]
    rng = random.Random(43)
    flips = []
    size = template.db.stat().st_size
    for i in range(60):  # seeded random byte flips anywhere in the file, random commands
        at, mask = rng.randrange(size), rng.randrange(1, 256)
        command = rng.choice([c for c in COMMANDS if c not in TTY])
        flips.append(attempt(template, tmp_path, command, f"flip{i}", _flip_at(lambda data, t, a=at, m=mask: (a, m))))
    tracebacks = [o for o in open_runs + row_runs + flips if o.traceback]
    assert tracebacks == []
    for o in open_runs:
        _check_open_damage(o)
    for o in row_runs:
        assert o.clean_refusal, o
        _still_the_same_channel(o, template)
    for o in flips:  # a flip inside a value can go unseen (SQLite keeps no checksums); then the channel is intact
        assert o.code in (0, 2, 3) and (o.code in (0, 3) or len(o.lines) == 1), o
        if o.code != 2:
            assert o.new_files == [], o
    assert listener.count == 0 or any(o.code in (0, 3) for o in flips)
    refused = sum(o.clean_refusal for o in flips)
    print(
        f"{len(open_runs)} open damages ({len(COMMANDS)} commands x {len(OPEN_DAMAGES)}), {len(row_runs)} row "
        f"damages ({len(ROW_READERS)} commands x {len(ROW_DAMAGES)}), all refused in one line; {len(flips)} random "
        f"flips ({refused} refused in one line naming the file, the rest unseen); tracebacks 0, silent acceptances 0"
    )


@pytest.mark.parametrize("size", [0, 1, None])
def test_join_with_a_damaged_database_to_import_refuses_it_before_copying(template, tmp_path, size):
    """``sdschat join --key-file K --channel C --db FILE`` imports a database: an empty, cut or zeroed one is
    refused in one line before anything is copied or the channel is added to the profile."""
    source = tmp_path / "old.db"
    shutil.copy(template.db, source)
    with open(source, "r+b") as f:
        if size is None:
            f.seek(template.page)  # the second page on: zeroed
            f.write(b"\0" * (source.stat().st_size - template.page))
        else:
            f.truncate(size)
    home = tmp_path / "bob"
    subprocess.run(
        [*SDSCHAT, "init", "--name", "bob", "--broker", template.url, "--home", str(home)],
        check=True,
        capture_output=True,
        env=ENV,
        timeout=60,
    )
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    code, err = _run(
        ["join", "--key-file", str(template.key), "--channel", "team", "--db", str(source), "--home", str(home)],
        tty=False,
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and str(source) in err, err
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before  # nothing copied, no channel added
