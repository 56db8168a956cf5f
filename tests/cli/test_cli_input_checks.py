"""What ``init``, ``join`` and ``invite`` take: a token is checked field by field as ``init`` and ``new`` check
them, empty ``--broker`` / ``--home`` / ``$SDSCHAT_HOME`` are refused, ``--ca`` names a readable file of this
machine, and an invite names its broker without the inviter's login. Bad input: one line, exit 2, nothing saved.
The real ``sdschat`` command (its ``main``, or a process where the environment matters)."""

from __future__ import annotations

import base64
import os
import stat
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from sdschat.cli import main
from sdschat.profile import TOKEN_PREFIX, Profile, decode_invite, resolve_paths


def sdschat(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_refusal(capsys, *argv) -> str:
    code, out, err = sdschat(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (argv, code, err)
    return err


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every file and folder under ``root``: its mode and, for a file, its bytes."""
    return {
        str(p.relative_to(root)): (stat.S_IMODE(p.stat().st_mode), p.read_bytes() if p.is_file() else None)
        for p in [root, *root.rglob("*")]
    }


def forged(name: str, broker: str = "", epoch: int = 0) -> str:
    """A well-formed, checksummed version 2 token saying whatever it is told (as a tamperer would make one)."""
    secret = os.urandom(32)
    raw = bytes([2, len(name.encode())]) + name.encode() + secret + struct.pack(">H", len(broker.encode()))
    raw += broker.encode() + b"\x00" + struct.pack(">H", 0) + struct.pack(">I", epoch)
    raw += os.urandom(32) if epoch else b""
    raw += struct.pack(">I", zlib.crc32(raw))
    return TOKEN_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_token_with_a_bad_field_is_one_line_and_nothing_is_saved(tmp_path, capsys) -> None:
    home = tmp_path / "bob"
    assert sdschat(capsys, "init", "--name", "bob", "--home", home)[0] == 0
    before = snapshot(home)
    assert decode_invite(forged("team", "http://x"))  # well-formed: only the fields are wrong
    for token, what in (
        (forged("team", "http://x"), "scheme"),
        (forged("team", "file:///etc/passwd"), "scheme"),
        (forged("team", "mqtt://"), "host"),
        (forged("team", "mqtt://h:0"), "port"),
        (forged("team", "mqtt://h?ca=/etc/ca.pem"), "mqtts"),
        (forged("team", epoch=2**32 - 1), "epoch"),
        (forged("team", epoch=2**31), "epoch"),
        (forged(" team"), "channel name"),
        (forged("x" * 41), "channel name"),
    ):
        err = one_line_refusal(capsys, "join", token, "--home", home)
        assert what in err, err
        assert snapshot(home) == before
    # the same profile then joins a good token, and its broker is the invite's
    code, out, _ = sdschat(capsys, "join", forged("team", "mqtt://chat.example:1884", epoch=2**31 - 1), "--home", home)
    assert (code, out) == (0, "team\n")
    profile = Profile.load(resolve_paths(home))
    assert profile.broker == "mqtt://chat.example:1884" and profile.channel("team").epoch[0] == 2**31 - 1


def test_empty_broker_and_home_are_refused_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (
        ("init", "--name", "me", "--broker", "", "--home", tmp_path / "me"),
        ("init", "--name", "me", "--broker", " ", "--home", tmp_path / "me"),
        ("init", "--name", "me", "--home", ""),
        ("--home", "", "init", "--name", "me"),
        ("channels", "--home", " "),
        ("bot", "--channel", "team", "--broker", "", "--home", tmp_path / "me"),
    ):
        err = one_line_refusal(capsys, *argv)
        assert "empty" in err, err
    assert list(tmp_path.iterdir()) == []  # no profile.toml in the current folder, nor anywhere
    env = {**os.environ, "SDSCHAT_HOME": ""}
    for argv in (("init", "--name", "me"), ("channels",), ("invite", "team")):
        p = subprocess.run(
            [sys.executable, "-m", "sdschat", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, (argv, p.stderr)
        assert "SDSCHAT_HOME is set but empty" in p.stderr
    assert list(tmp_path.iterdir()) == []
    # --home wins over an empty SDSCHAT_HOME
    p = subprocess.run(
        [sys.executable, "-m", "sdschat", "init", "--name", "me", "--home", "me"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert p.returncode == 0 and (tmp_path / "me" / "profile.toml").exists(), p.stderr


def test_ca_files_are_the_joiners_own_checked_and_kept_in_the_profile(tmp_path, capsys) -> None:
    ca = tmp_path / "my-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    unreadable = tmp_path / "locked.pem"
    unreadable.write_text("x")
    unreadable.chmod(0)
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for argv, what in (
        (("--broker", "mqtts://h:8883", "--ca", tmp_path / "missing.pem"), "missing.pem"),
        (("--broker", "mqtts://h:8883", "--ca", tmp_path), "folder"),
        (("--broker", "mqtts://h:8883", "--ca", ""), "empty"),
        (("--broker", "mqtt://h:1883", "--ca", ca), "mqtts"),
        (("--ca", ca), "--broker"),
    ):
        err = one_line_refusal(capsys, "init", "--name", "alice", *argv, "--home", alice)
        assert what in err, err
    if os.geteuid() != 0:  # root reads any file
        assert "locked.pem" in one_line_refusal(
            capsys, "init", "--name", "alice", "--broker", "mqtts://h", "--ca", unreadable, "--home", alice
        )
    assert not alice.exists()

    url = "mqtts://alice:s3cret@chat.example:8883"
    assert sdschat(capsys, "init", "--name", "alice", "--broker", url, "--ca", ca, "--home", alice)[0] == 0
    assert Profile.load(resolve_paths(alice)).broker == f"{url}?ca={ca}"
    assert sdschat(capsys, "new", "team", "--home", alice)[0] == 0
    code, token, err = sdschat(capsys, "invite", "team", "--home", alice)
    assert code == 0 and decode_invite(token).broker == "mqtts://chat.example:8883"
    assert "s3cret" not in err and "--broker mqtts://USER:PASSWORD@chat.example:8883 --ca FILE" in err

    # bob joins with his own login and his own CA file; a CA path that is not on his machine is refused
    assert sdschat(capsys, "init", "--name", "bob", "--home", bob)[0] == 0
    before = snapshot(bob)
    code, loaded, err = sdschat(capsys, "invite", "team", "--with-credentials", "--home", alice)
    assert decode_invite(loaded).broker == f"{url}?ca={ca}"
    ca.rename(tmp_path / "moved.pem")
    assert "cannot be read here" in one_line_refusal(capsys, "join", loaded.strip(), "--home", bob)
    assert "mqtts" in one_line_refusal(
        capsys,
        "join",
        token.strip(),
        "--broker",
        "mqtt://bob:pw@chat.example",
        "--ca",
        tmp_path / "moved.pem",
        "--home",
        bob,
    )
    assert snapshot(bob) == before
    code, out, _ = sdschat(
        capsys,
        "join",
        token.strip(),
        "--broker",
        "mqtts://bob:pw@chat.example:8883",
        "--ca",
        tmp_path / "moved.pem",
        "--home",
        bob,
    )
    assert (code, out) == (0, "team\n")
    assert Profile.load(resolve_paths(bob)).broker == f"mqtts://bob:pw@chat.example:8883?ca={tmp_path / 'moved.pem'}"


def test_invite_leaves_out_the_login_unless_asked_and_then_warns(tmp_path, capsys) -> None:
    home = tmp_path / "alice"
    url = "mqtt://alice:s3cret@chat.example:1884"
    assert sdschat(capsys, "init", "--name", "alice", "--broker", url, "--home", home)[0] == 0
    assert sdschat(capsys, "new", "team", "--home", home)[0] == 0
    code, token, err = sdschat(capsys, "invite", "team", "--home", home)
    assert code == 0 and decode_invite(token).broker == "mqtt://chat.example:1884"
    assert "s3cret" not in token + err and "warning" not in err
    code, token, err = sdschat(capsys, "invite", "team", "--with-credentials", "--home", home)
    assert code == 0 and decode_invite(token).broker == url
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "login" in warnings[0] and "s3cret" not in err
    # a broker without a login or CA file: nothing to leave out, nothing to warn about
    other = tmp_path / "carol"
    assert sdschat(capsys, "init", "--name", "carol", "--broker", "mqtt://h:1883", "--home", other)[0] == 0
    assert sdschat(capsys, "new", "team", "--home", other)[0] == 0
    code, token, err = sdschat(capsys, "invite", "team", "--with-credentials", "--home", other)
    assert code == 0 and decode_invite(token).broker == "mqtt://h:1883" and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv", [("join", "--broker", "http://x", "sdschat:AAAA"), ("bot", "--broker", "file:///etc/passwd")]
)
def test_a_bad_broker_option_is_one_line(tmp_path, capsys, argv) -> None:
    assert "scheme" in one_line_refusal(capsys, *argv, "--home", tmp_path / "x")


def test_the_hint_after_new_is_a_command_that_runs_as_pasted(capsys, tmp_path):
    """`sdschat new "release plan"` says how to invite people with the name quoted for the shell, and that
    command, split as a shell splits it, prints the channel's token."""
    import shlex

    home = tmp_path / "home"
    assert sdschat(capsys, "init", "--name", "alice", "--home", home)[0] == 0
    for name in ("team", "release plan", "it's"):
        code, out, err = sdschat(capsys, "new", name, "--home", home)
        assert code == 0 and out == f"{name}\n", err
        hint = err.split("`")[1]
        assert hint == f"sdschat invite {shlex.quote(name)}"
        code, token, _ = sdschat(capsys, *shlex.split(hint)[1:], "--home", home)
        assert code == 0 and token.startswith("sdschat:"), (name, hint)


def test_channels_lists_the_channels_it_can_read_and_names_a_damaged_one_after_them(capsys, tmp_path):
    """One of three channels has a damaged database: `sdschat channels` (and `--json`) still lists the other two,
    then says in one line which channel could not be read and why, and exits 2; with that channel alone, that
    line is all it says."""
    import asyncio
    import json

    from sdschat.store import Store

    home = tmp_path / "home"
    assert sdschat(capsys, "init", "--name", "alice", "--home", home)[0] == 0
    for name in ("ops", "team", "zed"):
        assert sdschat(capsys, "new", name, "--home", home)[0] == 0
    profile = Profile.load(resolve_paths(home))
    db = profile.db_path(profile.channel("team"))

    async def make() -> None:
        store = await Store.open(db)
        await store.close()

    asyncio.run(make())
    data = bytearray(db.read_bytes())
    data[4096:] = bytes(b ^ 0x5A for b in data[4096:])  # every page but the header's
    db.write_bytes(bytes(data))

    code, out, err = sdschat(capsys, "channels", "--home", home)
    assert code == 2 and [line.split()[0] for line in out.splitlines()] == ["CHANNEL", "#ops", "#zed"], out
    assert err.count("\n") == 1 and "#team" in err and "damaged" in err and "Traceback" not in err, err
    code, out, err = sdschat(capsys, "channels", "--json", "--home", home)
    assert code == 2 and [json.loads(line)["channel"] for line in out.splitlines()] == ["ops", "zed"]
    assert err.count("\n") == 1 and "#team" in err
    for name in ("ops", "zed"):
        Profile.load(resolve_paths(home)).remove_channel(name)
    assert "#team" in one_line_refusal(capsys, "channels", "--home", home)
