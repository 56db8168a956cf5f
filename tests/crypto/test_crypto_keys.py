"""Channel key derivation, topics, key files."""

import base64
import hashlib
import hmac
import os
import re
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdschat.crypto import (
    DEFAULT_SCRYPT_PARAMS,
    KEY_FILE_HEADER,
    ChannelKey,
    CryptoError,
    KeyFileError,
    ScryptParams,
    key_file_is_private,
    keygen,
)
from sdschat.crypto.keyfile import parse_key_file

FAST = ScryptParams(n=2**8, r=8, p=1)
SECRET = bytes(range(32))


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def hkdf_sha256(ikm, info, length):
    """RFC 5869 written out, to pin the derivation independently."""
    prk = hmac.new(bytes(32), ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes((counter,)), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


# -- derivation -------------------------------------------------------------


def test_passphrase_derivation_is_deterministic():
    a = ChannelKey.from_passphrase("general", "correct horse", scrypt_params=FAST)
    b = ChannelKey.from_passphrase("general", "correct horse", scrypt_params=FAST)
    assert (a.topic, a.channel_id, a.channel_binding) == (b.topic, b.channel_id, b.channel_binding)
    assert b.open(a.seal(b"x")) == b"x"


def test_passphrase_derivation_differs_per_channel_and_passphrase():
    base = ChannelKey.from_passphrase("general", "correct horse", scrypt_params=FAST)
    other_name = ChannelKey.from_passphrase("random", "correct horse", scrypt_params=FAST)
    other_pass = ChannelKey.from_passphrase("general", "battery staple", scrypt_params=FAST)
    topics = {base.topic, other_name.topic, other_pass.topic}
    assert len(topics) == 3
    assert len({base.channel_binding, other_name.channel_binding, other_pass.channel_binding}) == 3
    with pytest.raises(CryptoError):
        other_name.open(base.seal(b"x"))


def test_default_scrypt_parameters_match_the_documented_derivation():
    assert DEFAULT_SCRYPT_PARAMS == ScryptParams(n=2**15, r=8, p=1)
    key = ChannelKey.from_passphrase("general", "correct horse")
    expected_secret = hashlib.scrypt(
        b"correct horse",
        salt=b"sdschat/v1/scrypt/general",
        n=2**15,
        r=8,
        p=1,
        dklen=32,
        maxmem=64 * 1024 * 1024,
    )
    assert key.topic == ChannelKey(expected_secret, "general").topic
    assert key.topic == "sdschat/734592845005cd796ec17d9df63edeee"


def test_hkdf_subkeys_match_the_documented_derivation():
    key = ChannelKey(SECRET, "general")
    info = lambda purpose: b"sdschat/v1/" + purpose + b"\x00general"  # noqa: E731
    assert key.topic == "sdschat/" + hkdf_sha256(SECRET, info(b"topic"), 16).hex()
    assert key.channel_id == hkdf_sha256(SECRET, info(b"channel-id"), 16).hex()
    assert key.channel_binding == hkdf_sha256(SECRET, info(b"binding"), 32)
    # pinned, so a change to the derivation cannot go unnoticed
    assert key.topic == "sdschat/e43e70f03c93ff9807785a0caa1e0d32"
    assert key.channel_id == "6306c974e1a49d2ba9e9931f448d1d28"


def test_channel_name_is_nfc_normalized():
    composed = ChannelKey.from_passphrase("caf\u00e9", "p\u00e4ss", scrypt_params=FAST)
    decomposed = ChannelKey.from_passphrase("cafe\u0301", "pa\u0308ss", scrypt_params=FAST)
    assert composed.topic == decomposed.topic
    assert decomposed.channel_name == "caf\u00e9"


def test_bytes_passphrase_equals_utf8_str():
    a = ChannelKey.from_passphrase("general", "pässword", scrypt_params=FAST)
    b = ChannelKey.from_passphrase("general", "pässword".encode(), scrypt_params=FAST)
    assert a.topic == b.topic


@pytest.mark.parametrize(
    "call",
    [
        lambda: ChannelKey.from_passphrase("", "pass", scrypt_params=FAST),
        lambda: ChannelKey.from_passphrase("general", "", scrypt_params=FAST),
        lambda: ChannelKey(bytes(31), "general"),
        lambda: ChannelKey(bytes(33), "general"),
        lambda: ChannelKey.generate(""),
    ],
)
def test_invalid_inputs(call):
    with pytest.raises(ValueError):
        call()


def test_topic_and_channel_id_format_and_secrecy():
    name = "deadbeef"  # hex-looking on purpose
    key = ChannelKey(SECRET, name)
    assert re.fullmatch(r"sdschat/[0-9a-f]{32}", key.topic)
    assert re.fullmatch(r"[0-9a-f]{32}", key.channel_id)
    assert key.channel_id not in key.topic
    for leaked in (name, SECRET.hex(), base64.b64encode(SECRET).decode(), key.channel_binding.hex()[:16]):
        assert leaked not in key.topic
    assert name.encode() not in key.channel_binding
    assert key.channel_name == name


def test_generated_keys_differ():
    a, b = ChannelKey.generate("general"), ChannelKey.generate("general")
    assert a.topic != b.topic


def test_for_channel_keeps_secret_changes_derivations():
    a = ChannelKey(SECRET, "general")
    b = a.for_channel("random")
    assert b.channel_name == "random"
    assert b.topic == ChannelKey(SECRET, "random").topic != a.topic


def test_repr_hides_secret_and_name():
    key = ChannelKey(SECRET, "secret-channel-name")
    for text in (repr(key), str(key)):
        assert SECRET.hex() not in text
        assert base64.b64encode(SECRET).decode() not in text
        assert "secret-channel-name" not in text
        assert key.channel_binding.hex() not in text
        assert key.topic in text
    assert not hasattr(key, "__dict__")


# -- key files --------------------------------------------------------------


def test_keygen_creates_0600_file_even_with_permissive_umask(tmp_path):
    path = tmp_path / "general.key"
    old = os.umask(0)
    try:
        keygen(path)
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert key_file_is_private(path)
    lines = path.read_text("ascii").split("\n")
    assert lines[0] == KEY_FILE_HEADER == "sdschat-key v1"
    assert len(base64.b64decode(lines[1], validate=True)) == 32
    assert lines[2:] == [""]
    ChannelKey.from_file(path, "general")  # loads


def test_write_and_read_back(tmp_path):
    path = tmp_path / "k"
    key = ChannelKey(SECRET, "general")
    key.write_key_file(path)
    assert path.read_bytes() == b"sdschat-key v1\n" + base64.b64encode(SECRET) + b"\n"
    loaded = ChannelKey.from_file(str(path), "general")
    assert loaded.topic == key.topic
    assert loaded.open(key.seal(b"x")) == b"x"


def test_keygen_refuses_to_overwrite(tmp_path):
    path = tmp_path / "k"
    keygen(path)
    before = path.read_bytes()
    with pytest.raises(KeyFileError, match="already exists"):
        keygen(path)
    with pytest.raises(KeyFileError, match="already exists"):
        ChannelKey(SECRET, "x").write_key_file(path)
    assert path.read_bytes() == before


def test_overwrite_when_asked_replaces_with_private_file(tmp_path):
    path = tmp_path / "k"
    path.write_text("old contents")
    path.chmod(0o644)
    ChannelKey(SECRET, "general").write_key_file(path, overwrite=True)
    assert mode_of(path) == 0o600
    assert ChannelKey.from_file(path, "general").topic == ChannelKey(SECRET, "general").topic
    keygen(path, overwrite=True)
    assert mode_of(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]  # no temp file left


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_keygen_does_not_follow_symlinks(tmp_path):
    target = tmp_path / "elsewhere"
    link = tmp_path / "k"
    link.symlink_to(target)
    with pytest.raises(KeyFileError):
        keygen(link)
    assert not target.exists()


def test_keygen_into_missing_directory(tmp_path):
    with pytest.raises(KeyFileError, match="cannot write"):
        keygen(tmp_path / "no" / "such" / "dir" / "k")


def test_missing_key_file(tmp_path):
    path = tmp_path / "missing.key"
    with pytest.raises(KeyFileError, match="not found") as info:
        ChannelKey.from_file(path, "general")
    assert str(path) in str(info.value)
    assert isinstance(info.value, CryptoError)


def test_directory_as_key_file(tmp_path):
    with pytest.raises(KeyFileError, match="directory"):
        ChannelKey.from_file(tmp_path, "general")


B64_16 = base64.b64encode(bytes(range(16))).decode()
B64_33 = base64.b64encode(bytes(range(33))).decode()
B64_32 = base64.b64encode(SECRET).decode()


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "empty"),
        (b"\n\n  \n", "empty"),
        (B64_32.encode() + b"\n", "not a sdschat key file"),
        (b"hello world\n" + B64_32.encode(), "not a sdschat key file"),
        (b"sdschat-key v2\n" + B64_32.encode(), "unsupported key file version"),
        (b"sdschat-key v1\n", "exactly one key line"),
        (b"sdschat-key v1\n" + B64_32.encode() + b"\nextra\n", "exactly one key line"),
        (b"sdschat-key v1\n" + B64_32.encode() + b" extra\n", "not valid base64"),
        (b"sdschat-key v1\nnot base64 !!!\n", "not valid base64"),
        (b"sdschat-key v1\n" + SECRET.hex().encode() + b"\n", "bytes, expected 32"),
        (b"sdschat-key v1\n" + B64_16.encode() + b"\n", "16 bytes, expected 32"),
        (b"sdschat-key v1\n" + B64_33.encode() + b"\n", "33 bytes, expected 32"),
        (b"\xff\xfe binary \x00", "not ASCII"),
        ("sdschat-key v1\nkéy\n".encode(), "not ASCII"),
        (b"sdschat-key v1\n" + b"A" * 5000, "too large"),
    ],
)
def test_malformed_key_files(tmp_path, content, match):
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=match) as info:
        ChannelKey.from_file(path, "general")
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    for secret_text in (B64_32, B64_16, B64_33, SECRET.hex()):
        assert secret_text not in message


def test_tolerant_whitespace_and_crlf(tmp_path):
    path = tmp_path / "k"
    path.write_bytes(b"\r\n  sdschat-key v1  \r\n\r\n" + B64_32.encode() + b"  \r\n\r\n")
    assert ChannelKey.from_file(path, "general").topic == ChannelKey(SECRET, "general").topic


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize(
    "mode, private",
    [(0o600, True), (0o400, True), (0o640, False), (0o604, False), (0o644, False), (0o660, False)],
)
def test_key_file_is_private(tmp_path, mode, private):
    path = tmp_path / "k"
    keygen(path)
    path.chmod(mode)
    assert key_file_is_private(path) is private
    ChannelKey.from_file(path, "general")  # loose permissions are a warning, not an error


def test_key_file_is_private_on_missing_file(tmp_path):
    with pytest.raises(KeyFileError):
        key_file_is_private(tmp_path / "nope")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=120).map(lambda s: ("sdschat-key v1\n" + s).encode()))
def test_parse_key_file_only_raises_key_file_error(data):
    try:
        secret = parse_key_file(data)
    except KeyFileError as exc:
        assert "\n" not in str(exc)
    else:
        assert len(secret) == 32


def test_permission_denied_is_reported(tmp_path, monkeypatch):
    from sdschat.crypto import keyfile

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(keyfile, "open", denied, raising=False)
    with pytest.raises(KeyFileError, match="permission denied"):
        ChannelKey.from_file(tmp_path / "k", "general")
