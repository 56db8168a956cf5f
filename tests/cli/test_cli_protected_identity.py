"""`sdschat init --protect`: the identity key sealed under a passphrase, never in the clear on disk.

Real files, a real mosquitto and real `sdschat bot` processes; the passphrase comes from
SDSCHAT_IDENTITY_PASSPHRASE (CI has no terminal to ask on).
"""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys

import pytest
from brokers import Mosquitto, mosquitto_binary

from sdschat.cli import main
from sdschat.profile import Profile, ProfileError, resolve_paths

PASS = "correct horse battery staple"


def no_key_in(data: bytes, private: bytes) -> bool:
    return not any(form in data for form in (private, private.hex().encode(), base64.b64encode(private)))


def test_a_sealed_identity_opens_only_with_its_passphrase(tmp_path) -> None:
    paths = resolve_paths(tmp_path)
    profile = Profile.create(paths, "alice", passphrase=PASS)
    assert profile.protected
    identity = profile.identity(PASS)
    assert profile.participant_id == identity.participant_id  # the id needs no passphrase
    text = (paths.data / "identity.key").read_bytes()
    assert no_key_in(text, identity.private_bytes())
    with pytest.raises(ProfileError, match="wrong passphrase"):
        profile.identity("not the passphrase")
    with pytest.raises(ProfileError, match="protected by a passphrase"):
        profile.identity()
    damaged = text.replace(text[40:44], b"AAAA")
    (paths.data / "identity.key").write_bytes(damaged)
    with pytest.raises(ProfileError):
        profile.identity(PASS)
    plain = Profile.create(resolve_paths(tmp_path / "plain"), "bob")
    assert not plain.protected and plain.identity().participant_id == plain.participant_id


def test_init_protect_then_a_bot_runs_and_no_database_holds_the_key(tmp_path, capsys, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("SDSCHAT_IDENTITY_PASSPHRASE", "short")
    assert main(["init", "--name", "alice", "--protect", "--home", str(home)]) == 2
    assert "at least 8 characters" in capsys.readouterr().err
    monkeypatch.setenv("SDSCHAT_IDENTITY_PASSPHRASE", PASS)
    assert main(["init", "--name", "alice", "--protect", "--home", str(home)]) == 0
    assert main(["new", "team", "--home", str(home)]) == 0
    capsys.readouterr()
    assert main(["invite", "team", "--home", str(home)]) == 0
    token = capsys.readouterr().out.strip()
    profile = Profile.load(resolve_paths(home))
    private = profile.identity(PASS).private_bytes()

    (tmp_path / "mosq").mkdir()
    broker = Mosquitto(mosquitto_binary(), tmp_path / "mosq")
    broker.start()
    try:
        bot = [
            sys.executable,
            "-m",
            "sdschat",
            "bot",
            "--home",
            str(home),
            "--channel",
            "team",
            "--broker",
            broker.url,
            "--count",
            "2",
            "--interval",
            "0.05",
            "--linger",
            "1",
            "--quiet",
            "--max-runtime",
            "60",
        ]
        env = {**os.environ, "SDSCHAT_IDENTITY_PASSPHRASE": PASS}
        peer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sdschat",
                "bot",
                "--invite",
                token,
                "--name",
                "bob",
                "--db",
                str(tmp_path / "bob.db"),
                "--broker",
                broker.url,
                "--count",
                "1",
                "--linger",
                "1",
                "--quiet",
                "--max-runtime",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        ok = subprocess.run(bot, capture_output=True, text=True, timeout=90, env=env, stdin=subprocess.DEVNULL)
        assert peer.wait(90) == 0, peer.stdout.read()
        assert ok.returncode == 0, ok.stderr
        for wrong, fragment in (
            ({**os.environ, "SDSCHAT_IDENTITY_PASSPHRASE": "wrong passphrase!"}, "wrong passphrase"),
            (
                {k: v for k, v in os.environ.items() if k != "SDSCHAT_IDENTITY_PASSPHRASE"},
                "your identity is protected: set SDSCHAT_IDENTITY_PASSPHRASE",
            ),
        ):
            r = subprocess.run(bot, capture_output=True, text=True, timeout=60, env=wrong, stdin=subprocess.DEVNULL)
            assert r.returncode == 2 and fragment in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        broker.close()

    db = profile.db_path(profile.channel("team"))
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM identity").fetchone()[0] == 0  # the key was never copied in
        # two of alice's, one of bob's, and their joins
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 3 + 2
        assert conn.execute("SELECT participant_id FROM channels").fetchone()[0] == profile.participant_id
    finally:
        conn.close()
    for f in [p for p in home.rglob("*") if p.is_file()]:
        assert no_key_in(f.read_bytes(), private), f  # not in the profile, a database, its WAL, anywhere
    monkeypatch.delenv("SDSCHAT_IDENTITY_PASSPHRASE")
    assert main(["channels", "--home", str(home), "--json"]) == 0  # listing needs no passphrase
    listing = capsys.readouterr().out
    assert '"messages": 5' in listing and '"members": 2' in listing  # three lines and two joins


def test_the_window_client_asks_once_and_keeps_the_key_out_of_every_channel_database(tmp_path, monkeypatch) -> None:
    import asyncio

    from sdschat.cli.window import ProfileClient

    paths = resolve_paths(tmp_path / "home")
    profile = Profile.create(paths, "alice", passphrase=PASS)
    for name in ("general", "ops"):
        profile.add_channel(name, os.urandom(32))
    monkeypatch.setenv("SDSCHAT_IDENTITY_PASSPHRASE", PASS)

    async def main():
        client = await ProfileClient.start(Profile.load(paths))  # every channel, one shared connection
        try:
            assert {n.key.channel_name for n in client.nodes} == {"general", "ops"}
            assert {n.participant_id for n in client.nodes} == {profile.participant_id}
        finally:
            await client.stop()

    asyncio.run(main())
    private = profile.identity(PASS).private_bytes()
    for name in ("general", "ops"):
        conn = sqlite3.connect(profile.db_path(profile.channel(name)))
        try:
            assert conn.execute("SELECT count(*) FROM identity").fetchone()[0] == 0
        finally:
            conn.close()
    for f in [p for p in (tmp_path / "home").rglob("*") if p.is_file()]:
        assert no_key_in(f.read_bytes(), private), f
