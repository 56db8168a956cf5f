"""Invite tokens: round trip, and every damaged or foreign token refused with one line."""

from __future__ import annotations

import base64
import os
import random
import struct
import zlib

import pytest

from sdschat.profile import (
    MAX_EPOCH,
    TOKEN_PREFIX,
    Invite,
    Profile,
    ProfileError,
    TokenError,
    decode_invite,
    encode_invite,
    public_broker,
    resolve_paths,
)

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def token(channel="team", broker="mqtt://chat.example:1883") -> tuple[Invite, str]:
    invite = Invite(channel, os.urandom(32), broker)
    return invite, encode_invite(invite)


@pytest.mark.parametrize(
    "channel,broker",
    [("team", "mqtt://127.0.0.1:1883"), ("équipe ☕", ""), ("x" * 40, "mqtts://u:p@h:8883?ca=/etc/ca.pem")],
)
def test_round_trip(channel, broker) -> None:
    invite, text = token(channel, broker)
    assert text.startswith(TOKEN_PREFIX) and "\n" not in text and " " not in text
    assert decode_invite(text) == invite
    assert decode_invite(f"  {text}\n") == invite  # pasted with blanks around
    assert invite.secret.hex() not in repr(invite)


def test_every_truncation_is_refused() -> None:
    _, text = token()
    for n in range(len(text)):
        with pytest.raises(TokenError) as e:
            decode_invite(text[:n])
        assert "\n" not in str(e.value)


def test_every_single_character_change_is_refused() -> None:
    _, text = token()
    tried = 0
    for i in range(len(TOKEN_PREFIX), len(text)):
        for c in ALPHABET + "=+/ .é":
            if c == text[i]:
                continue
            with pytest.raises(TokenError):
                decode_invite(text[:i] + c + text[i + 1 :])
            tried += 1
        with pytest.raises(TokenError):
            decode_invite(text[:i] + text[i + 1 :])  # dropped
    assert tried > 60 * (len(text) - len(TOKEN_PREFIX))


def test_random_damage_never_gets_through() -> None:
    rng = random.Random(7)
    _, text = token()
    for _ in range(5_000):
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            chars[rng.randrange(len(TOKEN_PREFIX), len(chars))] = rng.choice(ALPHABET)
        damaged = "".join(chars)
        if damaged != text:
            with pytest.raises(TokenError):
                decode_invite(damaged)


def _forge(version: int, body: bytes) -> str:
    raw = bytes([version]) + body
    raw += struct.pack(">I", zlib.crc32(raw))
    return TOKEN_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_other_versions_and_foreign_tokens_are_refused() -> None:
    invite, text = token()
    raw = base64.urlsafe_b64decode(text[len(TOKEN_PREFIX) :] + "==")
    with pytest.raises(TokenError, match="version 3"):
        decode_invite(_forge(3, raw[1:-4]))
    for foreign in (
        "",
        "sdschat:",
        "hello",
        "sdschat-key v1",
        "https://example.org/invite/abc",
        text.replace("sdschat:", "sdschat;"),
        text + text,
        "sdschat:" + "A" * 10_000,
    ):
        with pytest.raises(TokenError):
            decode_invite(foreign)
    # checksummed but malformed inside: no name, a control character, lengths that do not add up
    for body in (
        b"\x00" + invite.secret + b"\x00\x00",
        b"\x02a\x07" + invite.secret + b"\x00\x00",
        b"\x04team" + invite.secret + b"\x00\x09mqtt://",
        b"\x04team" + invite.secret[:10],
    ):
        with pytest.raises(TokenError, match="malformed"):
            decode_invite(_forge(1, body))


def test_admins_and_a_later_key_epoch_round_trip_and_version_1_tokens_still_decode() -> None:
    admins = (os.urandom(16).hex(), os.urandom(16).hex())
    invite = Invite("team", os.urandom(32), "mqtt://h:1883", admins, 7, os.urandom(32), (os.urandom(16).hex(),) * 3)
    text = encode_invite(invite)
    assert decode_invite(text) == invite
    assert invite.epoch_secret.hex() not in repr(invite)
    first = Invite("team", os.urandom(32), "", admins[:1])
    assert decode_invite(encode_invite(first)) == first
    # a token of sdschat before admins and epochs (version 1): the channel's first key, no admins
    name = b"old"
    old = _forge(1, bytes([len(name)]) + name + invite.secret + struct.pack(">H", 0))
    assert decode_invite(old) == Invite("old", invite.secret, "", (), 0, b"")
    for bad in (
        Invite("t", invite.secret, "", (), 3, b""),
        Invite("t", invite.secret, "", (), 0, os.urandom(32)),
        Invite("t", invite.secret, "", ("not an id",)),
        Invite("t", invite.secret, "", ("ab",) * 17),
    ):
        with pytest.raises(TokenError):
            encode_invite(bad)
    # checksummed, version 2, but the epoch secret's length does not match the epoch
    raw = base64.urlsafe_b64decode(text[len(TOKEN_PREFIX) :] + "==")[1:-4]
    with pytest.raises(TokenError, match="malformed"):
        decode_invite(_forge(2, raw[:-1]))


def _v2(name: bytes, secret: bytes, broker: bytes = b"", epoch: int = 0, epoch_secret: bytes = b"") -> str:
    """A checksummed version 2 token whose fields are whatever the caller says (what a tamperer could send)."""
    return _forge(
        2,
        bytes([len(name)])
        + name
        + secret
        + struct.pack(">H", len(broker))
        + broker
        + b"\x00"
        + struct.pack(">H", 0)
        + struct.pack(">I", epoch)
        + epoch_secret,
    )


def test_every_field_is_checked_as_new_and_init_check_it() -> None:
    secret = os.urandom(32)
    assert decode_invite(_v2(b"team", secret, b"mqtt://h:1883")) == Invite("team", secret, "mqtt://h:1883")
    # the highest epoch a token carries, and the first above it (the field holds up to 2^32-1)
    top = decode_invite(_v2(b"team", secret, epoch=MAX_EPOCH, epoch_secret=secret))
    assert top.epoch == MAX_EPOCH == 2**31 - 1
    for epoch in (MAX_EPOCH + 1, 2**32 - 1):
        with pytest.raises(TokenError, match="epoch") as e:
            decode_invite(_v2(b"team", secret, epoch=epoch, epoch_secret=secret))
        assert "\n" not in str(e.value)
        with pytest.raises(TokenError, match="epoch"):
            encode_invite(Invite("team", secret, "", (), epoch, secret))
    # channel names `sdschat new` refuses: too long, blank-edged, a separator inside, not NFC
    for name in ("x" * 41, " team", "team ", "a\u2028b", "te\u00a0am", "e\u0301quipe"):
        with pytest.raises(TokenError, match="channel name") as e:
            decode_invite(_v2(name.encode(), secret))
        assert "\n" not in str(e.value)
    with pytest.raises(TokenError, match="channel name"):
        encode_invite(Invite(" team", secret))
    with pytest.raises(TokenError, match="control"):
        encode_invite(Invite("team", secret, "mqtt://h\n:1883"))
    assert decode_invite(_v2("équipe ☕".encode(), secret)).channel == "équipe ☕"


def test_an_invite_carries_no_broker_login_or_local_path_unless_asked(tmp_path) -> None:
    assert public_broker("mqtts://alice:s3cret@host:8883?ca=/home/alice/ca.pem") == "mqtts://host:8883"
    assert public_broker("mqtt://alice@chat.example") == "mqtt://chat.example"
    assert public_broker("MQTT://u:p%40ss@[::1]:1884") == "mqtt://[::1]:1884"
    assert public_broker("") == "" and public_broker("mqtt://:99999") == ""
    url = "mqtts://alice:s3cret@host:8883?ca=/home/alice/ca.pem"
    profile = Profile.create(resolve_paths(tmp_path / "alice"), "alice", url)
    profile.add_channel("team", os.urandom(32))
    text = encode_invite(profile.invite("team"))
    invite = decode_invite(text)
    assert invite.broker == "mqtts://host:8883"
    raw = base64.urlsafe_b64decode(text[len(TOKEN_PREFIX) :] + "==")
    assert b"s3cret" not in raw and b"alice" not in raw and b"ca.pem" not in raw
    assert decode_invite(encode_invite(profile.invite("team", with_credentials=True))).broker == url


def test_an_empty_sdschat_home_is_refused(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        monkeypatch.setenv("SDSCHAT_HOME", empty)
        with pytest.raises(ProfileError, match="SDSCHAT_HOME"):
            resolve_paths()
    assert resolve_paths(tmp_path / "h").config == tmp_path / "h"  # --home wins over it
    assert list(tmp_path.iterdir()) == []
