"""``sdschat init / new / invite / join / part``: results on stdout, notes on stderr, one line for bad input."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest
import segno

from sdschat.cli import main
from sdschat.profile import Profile, decode_invite, resolve_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "v0.1"


def sdschat(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def test_init_new_invite_join_part(tmp_path, capsys) -> None:
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    code, out, err = sdschat(capsys, "init", "--name", "alice", "--broker", "mqtt://127.0.0.1:1883", "--home", alice)
    assert code == 0 and out.strip() == str(alice / "profile.toml") and "alice" in err
    assert sdschat(capsys, "new", "team", "--home", alice)[:2] == (0, "team\n")
    code, token, err = sdschat(capsys, "invite", "team", "--home", alice)
    assert code == 0 and token.count("\n") == 1 and "key" in err and "secret" not in token
    invite = decode_invite(token)
    assert (invite.channel, invite.broker) == ("team", "mqtt://127.0.0.1:1883")
    code, out, _ = sdschat(capsys, "invite", "team", "--qr", "--home", alice)
    first, qr = out.split("\n", 1)
    assert code == 0 and decode_invite(first) == invite
    expected = io.StringIO()
    segno.make(first, error="m").terminal(out=expected, compact=True)
    assert qr == expected.getvalue() and qr.count("\n") > 20 and "▀" in qr

    assert sdschat(capsys, "init", "--name", "bob", "--home", bob)[0] == 0
    assert sdschat(capsys, "join", token.strip(), "--home", bob)[:2] == (0, "team\n")
    a, b = (Profile.load(resolve_paths(h)) for h in (alice, bob))
    assert a.key(a.channel("team")).topic == b.key(b.channel("team")).topic
    assert a.identity().participant_id != b.identity().participant_id

    # everything private: folders 0700, files 0600
    for home in (alice, bob):
        for name, mode in modes(home).items():
            assert mode == (0o700 if (home / name).is_dir() else 0o600), (name, oct(mode))

    # part keeps the history unless --forget
    db = b.db_path(b.channel("team"))
    db.write_bytes(b"history")
    code, out, err = sdschat(capsys, "part", "team", "--home", bob)
    assert (code, out) == (0, "team\n") and db.exists() and "stays" in err
    assert Profile.load(resolve_paths(bob)).channels == {}
    assert sdschat(capsys, "join", token.strip(), "--home", bob)[0] == 0
    db = Profile.load(resolve_paths(bob)).db_path(Profile.load(resolve_paths(bob)).channel("team"))
    db.write_bytes(b"history")
    assert sdschat(capsys, "part", "team", "--home", bob, "--forget")[0] == 0 and not db.exists()


def test_bad_input_is_one_line_and_changes_nothing(tmp_path, capsys) -> None:
    home = tmp_path / "me"
    assert sdschat(capsys, "new", "team", "--home", home)[0] == 2  # no profile yet
    assert not home.exists()
    sdschat(capsys, "init", "--name", "me", "--home", home)
    before = modes(home), (home / "channels.json").read_bytes()
    cases = [
        ("init", "--name", "again", "--home", home),
        ("init", "--name", "x", "--broker", "http://nope", "--home", tmp_path / "other"),
        ("init", "--name", " spaced", "--home", tmp_path / "other"),
        ("join", "sdschat:AAAA", "--home", home),
        ("join", "not-a-token", "--home", home),
        ("join", "--home", home),
        ("join", "--key-file", tmp_path / "missing.key", "--channel", "c", "--home", home),
        ("invite", "nope", "--home", home),
        ("part", "nope", "--home", home),
        ("new", "bad\x07name", "--home", home),
    ]
    for argv in cases:
        code, out, err = sdschat(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert (modes(home), (home / "channels.json").read_bytes()) == before
    assert not (tmp_path / "other").exists()


def test_a_0_1_key_file_and_database_are_imported_with_their_history(tmp_path, capsys) -> None:
    home = tmp_path / "me"
    sdschat(capsys, "init", "--name", "alice", "--home", home)
    code, out, err = sdschat(capsys, "join", "--key-file", DATA / "team.key", "--channel", "team",
                             "--db", DATA / "alice.db", "--home", home)
    assert (code, out) == (0, "team\n"), err
    profile = Profile.load(resolve_paths(home))
    entry = profile.channel("team")
    copy = profile.db_path(entry)
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and copy.parent == home / "db"
    with sqlite3.connect(copy) as new, sqlite3.connect(f"file:{DATA / 'alice.db'}?mode=ro", uri=True) as old:
        query = "SELECT message_id, sender_id, lamport_timestamp, content, state FROM messages ORDER BY 3, 1"
        assert new.execute(query).fetchall() == old.execute(query).fetchall()
        assert len(old.execute(query).fetchall()) == 6
    assert profile.key(entry).topic == profile.key(entry).for_channel("team").topic
    # the same key under the same name: the same channel as the 0.1 one
    from sdschat.crypto import ChannelKey

    assert profile.key(entry).topic == ChannelKey.from_file(DATA / "team.key", "team").topic
    assert json.loads((home / "channels.json").read_text())["channels"][0]["name"] == "team"
    assert os.listdir(home / "keys")
