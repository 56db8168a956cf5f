"""The CLI with real processes: bots converge, a kill -9 loses nothing accepted, bad input gets one line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

SDSCHAT = [sys.executable, "-m", "sdschat"]
# 30% loss each way; protocol timers scaled down ~5x so a run settles in seconds (linger > T_max)
FAST = ["--loss", "0.3"] + [
    a
    for kv in (
        "repair_t_min_ms=300",
        "repair_t_max_ms=1500",
        "resend_unacknowledged_ms=400",
        "resend_possibly_acknowledged_ms=1200",
        "resend_max_interval_ms=1000",
        "sync_interval_ms=2000",
        "sync_jitter_ms=500",
    )
    for a in ("--tune", kv)
]
# A bot leaves after LINGER s without peer work. A peer still resending a message this bot lacks (nothing else
# names its last message) reaches it with p = 0.7 * 0.7 per resend, at most 1 s apart: the bot leaves under its
# feet only after 8 misses in a row (0.51 ** 8 < 0.5%), not after one (with 5 s and 3 s resends: 51%, which CI hit).
LINGER = "8"


def cli(*args, timeout=60, env=None, check=False):
    """``python -m sdschat ARGS`` to completion, its output captured; ``check``: fail the test on a non-zero exit."""
    p = subprocess.run([*SDSCHAT, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def bot(folder: Path, name: str, url: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *SDSCHAT,
            "bot",
            "--name",
            name,
            "--key-file",
            str(folder / "k.key"),
            "--broker",
            url,
            "--db",
            str(folder / f"{name}.db"),
            "--quiet",
            "--max-runtime",
            "120",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def export(db: Path) -> list[dict]:
    p = cli("export", "--db", str(db), check=True)
    return [json.loads(line) for line in p.stdout.splitlines()]


def own_accepted(db: Path) -> set[str]:
    """Own messages committed to the database (accepted): sender = the db's identity's id."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT participant_id FROM channels").fetchone()
        if row is None:
            return set()
        pid = row[0]
        return {r[0] for r in con.execute("SELECT message_id FROM messages WHERE sender_id = ?", (pid,))}
    finally:
        con.close()


def test_three_bots_with_loss_converge_and_export(tmp_path, node_mosquitto):
    cli("keygen", str(tmp_path / "k.key"), check=True)
    procs = [
        bot(tmp_path, n, node_mosquitto.url, "--count", "12", "--interval", "0.05", "--linger", LINGER, *FAST)
        for n in ("ann", "bob", "cyd")
    ]
    for p in procs:
        out, err = p.communicate(timeout=150)
        assert p.returncode == 0, err
    logs = [export(tmp_path / f"{n}.db") for n in ("ann", "bob", "cyd")]
    assert len(logs[0]) == 36 + 3  # and each member's join
    assert sorted(r["kind"] for r in logs[0] if r["kind"] != "msg") == ["join"] * 3
    assert logs[0] == [{**r} for r in logs[0]]
    ids = [[r["message_id"] for r in log] for log in logs]
    assert ids[0] == ids[1] == ids[2]
    for log in logs:
        assert {"message_id", "sender_id", "lamport_timestamp", "nick", "text"} <= set(log[0])
        chat = [r for r in log if r["kind"] == "msg"]  # (the joins aside)
        assert sorted(r["text"] for r in chat) == sorted(f"{n} #{i}" for n in ("ann", "bob", "cyd") for i in range(12))
        assert [(r["lamport_timestamp"], r["message_id"]) for r in log] == sorted(
            (r["lamport_timestamp"], r["message_id"]) for r in log
        )
    events = cli("export", "--db", str(tmp_path / "ann.db"), "--events", check=True).stdout.splitlines()
    kinds = {json.loads(e)["kind"] for e in events}
    assert {"sent", "received", "delivered", "acked"} <= kinds
    out = tmp_path / "ann.parquet"
    cli("export", "--db", str(tmp_path / "ann.db"), "--format", "parquet", "--out", str(out), check=True)
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert table.num_rows == 36 + 3 and table.column("message_id").to_pylist() == ids[0]


def test_kill_9_mid_run_loses_nothing_accepted(tmp_path, node_mosquitto):
    cli("keygen", str(tmp_path / "k.key"), check=True)
    others = [
        bot(tmp_path, n, node_mosquitto.url, "--count", "10", "--interval", "0.2", "--linger", LINGER, *FAST)
        for n in ("bob", "cyd")
    ]
    victim = bot(tmp_path, "ann", node_mosquitto.url, "--count", "200", "--interval", "0.02", *FAST)
    db = tmp_path / "ann.db"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # kill once it has accepted a few messages
        if db.exists():
            try:
                if len(own_accepted(db)) >= 8:
                    break
            except sqlite3.Error:
                pass
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(10)
    accepted = own_accepted(db)
    assert 8 <= len(accepted) < 200
    restarted = bot(tmp_path, "ann", node_mosquitto.url, "--count", "0", "--linger", LINGER, *FAST)
    for p in [*others, restarted]:
        out, err = p.communicate(timeout=150)
        assert p.returncode == 0, err
    logs = {n: [r["message_id"] for r in export(tmp_path / f"{n}.db")] for n in ("ann", "bob", "cyd")}
    assert logs["ann"] == logs["bob"] == logs["cyd"]
    assert accepted <= set(logs["bob"])
    assert len(logs["ann"]) == 20 + 2 + len(accepted)  # bob's and cyd's joins (ann's is among hers)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


@pytest.mark.parametrize(
    "args, expect",
    [
        (
            [
                "bot",
                "--name",
                "x",
                "--key-file",
                "{tmp}/k.key",
                "--broker",
                "mqtt://127.0.0.1:{closed}",
                "--db",
                "{tmp}/x.db",
            ],
            "cannot reach MQTT broker",
        ),
        (["bot", "--name", "x", "--key-file", "{tmp}/bad.key", "--db", "{tmp}/x.db"], "key"),
        (["bot", "--name", "x", "--key-file", "{tmp}/missing.key", "--db", "{tmp}/x.db"], "not found"),
        (["bot", "--name", "x", "--key-file", "{tmp}/k.key", "--broker", "http://nope", "--db", "{tmp}/x.db"], "mqtt"),
        (
            [
                "bot",
                "--name",
                "x",
                "--key-file",
                "{tmp}/k.key",
                "--db",
                "{tmp}/garbage.db",
                "--broker",
                "mqtt://127.0.0.1:1",
            ],
            "garbage.db",
        ),
        (
            [
                "bot",
                "--name",
                "x",
                "--key-file",
                "{tmp}/k.key",
                "--db",
                "{tmp}/newer.db",
                "--broker",
                "mqtt://127.0.0.1:1",
            ],
            "newer than this sdschat",
        ),
        (["bot", "--name", "x", "--key-file", "{tmp}/k.key", "--count", "-3"], "--count"),
        (["bot", "--name", "x", "--key-file", "{tmp}/k.key", "--loss", "1.5"], "--loss"),
        (["export", "--db", "{tmp}/nothing.db"], "no database"),
        (["export", "--db", "{tmp}/garbage.db"], "garbage.db"),
        (["keygen", "{tmp}/k.key"], "exists"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_cli_input_gets_one_line(tmp_path, args, expect):
    cli("keygen", str(tmp_path / "k.key"), check=True)
    (tmp_path / "bad.key").write_text("sdschat-key v1\nnot base64!!\n")
    (tmp_path / "garbage.db").write_bytes(b"this is not a database" * 100)
    con = sqlite3.connect(tmp_path / "newer.db")
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")
    con.execute("INSERT INTO schema_version VALUES (999, 0)")
    con.commit()
    con.close()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    argv = [a.format(tmp=tmp_path, closed=closed) for a in args]
    env = {**os.environ, "SDSCHAT_PASSPHRASE": ""}
    p = cli(*argv, env=env, timeout=30)
    assert p.returncode != 0
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert expect.lower() in lines[0].lower(), lines[0]


def test_passphrase_from_environment_and_db_mode(tmp_path, node_mosquitto):
    env = {**os.environ, "SDSCHAT_PASSPHRASE": "correct horse battery staple", "SDSCHAT_HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [
            *SDSCHAT,
            "bot",
            "--name",
            "solo",
            "--channel",
            "club",
            "--broker",
            node_mosquitto.url,
            "--count",
            "1",
            "--interval",
            "0",
            "--linger",
            "0",
            "--quiet",
            "--max-runtime",
            "6",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert p.returncode in (0, 3), p.stderr  # alone: nobody acknowledges, max-runtime may end it
    dbs = list((tmp_path / "home").glob("solo-*.db"))
    assert len(dbs) == 1
    assert dbs[0].stat().st_mode & 0o777 == 0o600
    assert "club" not in dbs[0].name


def test_two_profiles_invite_join_and_chat_both_ways_under_loss(tmp_path, node_mosquitto):
    """alice creates #team and invites bob (a profile) and carol (a bot with no profile): one paste each."""
    alice, bob, nobody = tmp_path / "alice", tmp_path / "bob", tmp_path / "nobody"
    cli("init", "--name", "alice", "--broker", node_mosquitto.url, "--home", alice, check=True)
    cli("new", "team", "--home", alice, check=True)
    token = cli("invite", "team", "--home", alice, check=True).stdout.strip()
    cli("init", "--name", "bob", "--home", bob, check=True)  # no broker: the invite brings it
    assert cli("join", token, "--home", bob, check=True).stdout == "team\n"

    def profile_bot(home: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [
                *SDSCHAT,
                "bot",
                "--channel",
                "team",
                "--home",
                str(home),
                "--count",
                "10",
                "--interval",
                "0.05",
                "--linger",
                LINGER,
                "--quiet",
                "--max-runtime",
                "120",
                "--loss",
                "0.2",
                *FAST[2:],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    env = {**os.environ, "SDSCHAT_HOME": str(nobody)}  # carol has no profile at all
    carol = subprocess.Popen(
        [
            *SDSCHAT,
            "bot",
            "--invite",
            token,
            "--name",
            "carol",
            "--count",
            "10",
            "--interval",
            "0.05",
            "--linger",
            LINGER,
            "--quiet",
            "--max-runtime",
            "120",
            "--loss",
            "0.2",
            *FAST[2:],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    procs = [profile_bot(alice), profile_bot(bob), carol]
    for p in procs:
        _, err = p.communicate(timeout=150)
        assert p.returncode == 0, err
    logs = [
        [
            json.loads(line)
            for line in cli("export", "--channel", "team", "--home", home, check=True).stdout.splitlines()
        ]
        for home in (alice, bob)
    ]
    carol_db = next(nobody.glob("carol-*.db"))
    logs.append(export(carol_db))
    ids = [[r["message_id"] for r in log] for log in logs]
    assert len(ids[0]) == 30 + 3 and ids[0] == ids[1] == ids[2]  # and each member's join
    assert sorted({r["nick"] for r in logs[0]}) == ["alice", "bob", "carol"]
    assert list(logs[0][0])[0] == "message_id"
    assert not (nobody / "profile.toml").exists()

    # `channels` counts from each profile's database: all three members seen, everyone else's 20 unread
    # (neither profile has had #team on screen), 30 messages; the table says the same for people
    for home, mine in ((alice, "alice"), (bob, "bob")):
        row = json.loads(cli("channels", "--json", "--home", home, check=True).stdout)
        # the log's 30 lines and three joins (not counted as unread)
        assert row == {"channel": "team", "members": 3, "unread": 20, "messages": 33}, (mine, row)
    table = cli("channels", "--home", alice, check=True).stdout.splitlines()
    assert table[0].split() == ["CHANNEL", "MEMBERS", "UNREAD", "MESSAGES"]
    assert table[1].split() == ["#team", "3", "20", "33"]
    # the profile's one identity is every channel's: alice's messages carry it
    from sdschat.profile import Profile, resolve_paths

    alice_id = Profile.load(resolve_paths(alice)).identity().participant_id
    assert {r["sender_id"] for r in logs[0] if r["nick"] == "alice"} == {alice_id}
