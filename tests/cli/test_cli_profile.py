"""``sdschat init / new / invite / join / part``: results on stdout, notes on stderr, one line for bad input."""

from __future__ import annotations

import base64
import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import segno
from brokers import Mosquitto, mosquitto_binary

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
    code, out, err = sdschat(
        capsys, "join", "--key-file", DATA / "team.key", "--channel", "team", "--db", DATA / "alice.db", "--home", home
    )
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


def _chat_in_the_imported_channel(
    tmp_path: Path, capsys, *, delivered: bool
) -> tuple[list[tuple], list[dict], object, list[str]]:
    """Import the committed 0.1 channel into alice's new profile, check ``export --channel`` and ``channels`` on it,
    then, over the embedded broker: bob joins by alice's invite, alice's node (her profile's, on the imported
    database) sends one message, and bob's node gets it (``delivered``: until bob's engine delivers it; 6 s).
    Returns the 0.1 history's (message_id, lamport), alice's export after, bob's copy of the message and the ids
    of every message bob's node has."""
    import asyncio
    import functools

    from sdschat.cli.wiring import profile_node_config
    from sdschat.node import Node, node_channel_config
    from sdschat.node import events as ev
    from sdschat.profile import encode_invite
    from sdschat.transport import EmbeddedBroker

    home, bob_home = tmp_path / "alice", tmp_path / "bob"
    with sqlite3.connect(f"file:{DATA / 'alice.db'}?mode=ro", uri=True) as old:
        history = old.execute("SELECT message_id, lamport_timestamp FROM messages ORDER BY 2, 1").fetchall()
    assert len(history) == 6

    def exported() -> list[dict]:
        code, out, err = sdschat(capsys, "export", "--channel", "team", "--home", home)
        assert code == 0, err
        return [json.loads(line) for line in out.splitlines()]

    async def scenario():
        cli = functools.partial(asyncio.to_thread, sdschat, capsys)  # main() runs its own event loop
        broker = await EmbeddedBroker.start()
        nodes = []
        try:
            assert (await cli("init", "--name", "alice", "--broker", broker.url, "--home", home))[0] == 0
            code, out, err = await cli(
                "join", "--key-file", DATA / "team.key", "--channel", "team", "--db", DATA / "alice.db", "--home", home
            )
            assert (code, out) == (0, "team\n"), err

            # export: the imported history, in (lamport, message_id) order, with its texts
            rows = await asyncio.to_thread(exported)
            assert [(r["message_id"], r["lamport_timestamp"]) for r in rows] == history
            assert [r["text"] for r in rows] == [f"{who} says {i}" for i in range(3) for who in ("alice", "bob")]
            assert all(next(iter(r)) == "message_id" for r in rows)

            # channels: listed with its six messages and both members
            code, out, err = await cli("channels", "--json", "--home", home)
            assert code == 0, err
            assert [(r["channel"], r["messages"], r["members"]) for r in map(json.loads, out.splitlines())] == [
                ("team", 6, 2)
            ]
            code, out, _ = await cli("channels", "--home", home)
            assert code == 0 and out.splitlines()[1].split()[:4] == ["#team", "2", "3", "6"]

            alice = Profile.load(resolve_paths(home))
            assert (await cli("init", "--name", "bob", "--broker", broker.url, "--home", bob_home))[0] == 0
            token = encode_invite(alice.invite("team"))
            assert (await cli("join", token, "--home", bob_home))[:2] == (0, "team\n")
            bob_profile = Profile.load(resolve_paths(bob_home))
            fast = node_channel_config(repair_t_min_ms=300, repair_t_max_ms=1_500)  # repairs within a few seconds
            bob = await Node.start(profile_node_config(bob_profile, bob_profile.channel("team"), channel_config=fast))
            nodes.append(bob)
            mine = await Node.start(profile_node_config(alice, alice.channel("team"), channel_config=fast))
            nodes.append(mine)
            sent = await mine.send_text("alice after the import")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 6

            def bobs_copy():
                return next((m for m in bob.messages() if m.message_id == sent), None)

            while bobs_copy() is None or (delivered and bobs_copy().state == ev.WAITING):
                if loop.time() > deadline:
                    raise AssertionError(f"bob's copy after 6 s: {bobs_copy()}; bob's health: {bob.health()}")
                await asyncio.sleep(0.05)
            return bobs_copy(), [m.message_id for m in bob.messages()]
        finally:
            for node in reversed(nodes):
                await node.stop()
            await broker.close()

    theirs, shown = asyncio.run(asyncio.wait_for(scenario(), 60))
    return history, exported(), theirs, shown


def test_the_imported_0_1_channel_is_read_listed_and_chatted_in_by_the_current_code(tmp_path, capsys) -> None:
    """After ``join --key-file F --channel C --db OLD.db`` of the committed 0.1 database, today's code opens it:
    ``export --channel`` prints its six messages in order, ``channels`` lists it, and a node of the profile on it
    sends (over the embedded broker, to a member invited by token) a message that lands after the history, from
    the same participant as the 0.1 messages of alice."""
    history, rows, theirs, _ = _chat_in_the_imported_channel(tmp_path, capsys, delivered=False)
    assert [(r["message_id"], r["lamport_timestamp"]) for r in rows[:6]] == history
    assert [r["text"] for r in rows[6:] if r["kind"] == "msg"] == ["alice after the import"]
    new = next(r for r in rows if r["text"] == "alice after the import")
    assert new["lamport_timestamp"] > history[-1][1] and new["sender_id"] == rows[0]["sender_id"]
    assert (theirs.text, theirs.nick, theirs.sender_id) == ("alice after the import", "alice", new["sender_id"])


def test_a_member_invited_into_an_imported_0_1_channel_gets_the_new_messages(tmp_path, capsys) -> None:
    """The 0.1 history's content is signed without its Lamport time and history, so a member who joins after the
    import refuses it (SECURITY.md: unsigned ordering): the new messages that name it are not held back behind it
    (until lost_after, minutes) but delivered once its repaired copy is refused, and the history is never shown."""
    from sdschat.node import events as ev

    history, _, theirs, shown = _chat_in_the_imported_channel(tmp_path, capsys, delivered=True)
    assert theirs.state != ev.WAITING and theirs.text == "alice after the import"
    assert not {mid for mid, _ in history} & set(shown)


@pytest.fixture(scope="module")
def login_broker(tmp_path_factory):
    """mosquitto that lets in alice and bob with their passwords, and nobody without a login."""
    workdir = tmp_path_factory.mktemp("login-mosquitto")
    passwords = workdir / "passwords"
    for i, (user, password) in enumerate((("alice", "alice-pw"), ("bob", "bob-pw"))):
        subprocess.run(
            ["mosquitto_passwd", "-b", *(["-c"] if i == 0 else []), str(passwords), user, password],
            check=True,
            capture_output=True,
        )
    broker = Mosquitto(mosquitto_binary(), workdir)
    broker.config.write_text(
        f"listener {broker.port} 127.0.0.1\nallow_anonymous false\npassword_file {passwords}\n"
        "persistence false\nlog_dest stderr\n" + ("user root\n" if os.geteuid() == 0 else "")
    )
    broker.start()
    yield broker
    broker.close()


def _bots(*homes, linger: float = 3.0) -> list[subprocess.CompletedProcess]:
    """One ``sdschat bot`` per home at once (each says two lines), as processes, until each has settled."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sdschat",
                "bot",
                "--channel",
                "team",
                "--home",
                str(home),
                "--count",
                "2",
                "--interval",
                "0.2",
                "--linger",
                str(linger),
                "--max-runtime",
                "40",
                "--tune",
                "repair_t_min_ms=300",
                "--tune",
                "repair_t_max_ms=1500",
                "--quiet",
                "--text",
                f"{home.name} says {{i}}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        for home in homes
    ]
    return [subprocess.CompletedProcess(p.args, p.wait(90), *p.communicate()) for p in procs]


@pytest.mark.timeout(150)
def test_an_invite_on_a_broker_with_logins_holds_none_and_the_joiner_logs_in_as_themselves(
    login_broker, tmp_path, capsys
) -> None:
    port = login_broker.port
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    assert (
        sdschat(
            capsys, "init", "--name", "alice", "--broker", f"mqtt://alice:alice-pw@127.0.0.1:{port}", "--home", alice
        )[0]
        == 0
    )
    assert sdschat(capsys, "new", "team", "--home", alice)[0] == 0
    code, token, err = sdschat(capsys, "invite", "team", "--home", alice)
    assert code == 0 and decode_invite(token).broker == f"mqtt://127.0.0.1:{port}"
    raw = base64.urlsafe_b64decode(token.strip()[len("sdschat:") :] + "==")
    assert b"alice-pw" not in raw and b"alice@" not in raw and "alice-pw" not in err

    # bob joins by the token alone: the broker turns him away, and he is told in one line how to log in
    assert sdschat(capsys, "init", "--name", "bob", "--home", bob)[0] == 0
    assert sdschat(capsys, "join", token.strip(), "--home", bob)[:2] == (0, "team\n")
    (refused,) = _bots(bob, linger=0)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "not authorized" in lines[0] and f"--broker mqtt://USER:PASSWORD@127.0.0.1:{port}" in lines[0], lines
    # a wrong password: told to check it
    code, out, _ = sdschat(
        capsys, "join", token.strip(), "--broker", f"mqtt://bob:wrong@127.0.0.1:{port}", "--home", bob
    )
    assert (code, out) == (0, "team\n")
    (wrong,) = _bots(bob, linger=0)
    assert wrong.returncode == 2 and "check the user name and password" in wrong.stderr and "wrong" not in wrong.stderr

    # with his own login he joins and reads what alice writes
    assert (
        sdschat(capsys, "join", token.strip(), "--broker", f"mqtt://bob:bob-pw@127.0.0.1:{port}", "--home", bob)[0] == 0
    )
    assert Profile.load(resolve_paths(bob)).broker == f"mqtt://bob:bob-pw@127.0.0.1:{port}"
    runs = _bots(alice, bob)
    assert all(r.returncode in (0, 3) for r in runs), [r.stderr for r in runs]
    profile = Profile.load(resolve_paths(bob))
    with sqlite3.connect(profile.db_path(profile.channel("team"))) as conn:
        texts = {json.loads(c).get("text", "") for (c,) in conn.execute("SELECT content FROM messages")}
    assert {"alice says 0", "alice says 1"} <= texts, texts
