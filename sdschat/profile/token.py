"""Invite tokens: a channel's name, key and broker in one line you can paste.

Format: ``sdschat:`` followed by the unpadded base64url of::

    version (1 byte, 1) | name length (1) | name (UTF-8) | secret (32)
    | broker length (2, big-endian) | broker URL (UTF-8) | CRC-32 of everything before (4, big-endian)

A CRC-32 detects every change confined to 32 consecutive bits, so any single
character changed, dropped or added is refused; decoding is strict (the text
must be exactly the encoding of what it decodes to). A token is a secret: it
is the channel's key.
"""

from __future__ import annotations

import base64
import binascii
import struct
import unicodedata
import zlib
from dataclasses import dataclass

from .errors import TokenError

__all__ = ["Invite", "TOKEN_PREFIX", "TOKEN_VERSION", "encode_invite", "decode_invite"]

TOKEN_PREFIX = "sdschat:"
TOKEN_VERSION = 1
SECRET_SIZE = 32
MAX_NAME_BYTES = 255
MAX_BROKER_BYTES = 1024
MAX_TOKEN_CHARS = 4 * (1 + 1 + MAX_NAME_BYTES + SECRET_SIZE + 2 + MAX_BROKER_BYTES + 4) // 3 + len(TOKEN_PREFIX) + 4


@dataclass(frozen=True)
class Invite:
    """What a token carries."""

    channel: str
    secret: bytes
    broker: str = ""

    def __repr__(self) -> str:  # never the secret
        return f"Invite(channel={self.channel!r}, broker={self.broker!r})"


def encode_invite(invite: Invite) -> str:
    name = unicodedata.normalize("NFC", invite.channel).encode("utf-8")
    broker = invite.broker.encode("utf-8")
    if not name or len(name) > MAX_NAME_BYTES:
        raise TokenError(f"a channel name must be 1 to {MAX_NAME_BYTES} bytes")
    if len(invite.secret) != SECRET_SIZE:
        raise TokenError(f"a channel secret is {SECRET_SIZE} bytes")
    if len(broker) > MAX_BROKER_BYTES:
        raise TokenError(f"a broker URL must be at most {MAX_BROKER_BYTES} bytes")
    body = (bytes([TOKEN_VERSION, len(name)]) + name + bytes(invite.secret) + struct.pack(">H", len(broker))
            + broker)
    body += struct.pack(">I", zlib.crc32(body))
    return TOKEN_PREFIX + base64.urlsafe_b64encode(body).rstrip(b"=").decode("ascii")


def _unbase64(text: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("not an invite token (damaged: not base64url)") from None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != text:
        raise TokenError("not an invite token (damaged)")
    return raw


def decode_invite(text: str) -> Invite:
    """The invite in ``text``; raises :class:`TokenError` (one line) for anything else."""
    text = text.strip()
    if not text.startswith(TOKEN_PREFIX):
        raise TokenError(f"not an invite token (it starts with {TOKEN_PREFIX!r})")
    if len(text) > MAX_TOKEN_CHARS:
        raise TokenError("not an invite token (too long)")
    body = text[len(TOKEN_PREFIX):]
    if not body.isascii():
        raise TokenError("not an invite token (damaged)")
    raw = _unbase64(body)
    if len(raw) < 2:
        raise TokenError("invite token is truncated")
    if raw[0] != TOKEN_VERSION:
        raise TokenError(f"invite token of version {raw[0]}; this sdschat reads version {TOKEN_VERSION}")
    if len(raw) < 4 or zlib.crc32(raw[:-4]) != struct.unpack(">I", raw[-4:])[0]:
        raise TokenError("invite token is truncated or altered (checksum mismatch)")
    return _parse(raw[:-4])


def _parse(raw: bytes) -> Invite:
    n = raw[1]
    end_name = 2 + n
    end_secret = end_name + SECRET_SIZE
    if n == 0 or len(raw) < end_secret + 2:
        raise TokenError("invite token is malformed")
    (blen,) = struct.unpack(">H", raw[end_secret:end_secret + 2])
    if len(raw) != end_secret + 2 + blen:
        raise TokenError("invite token is malformed")
    try:
        name = raw[2:end_name].decode("utf-8")
        broker = raw[end_secret + 2:].decode("utf-8")
    except UnicodeDecodeError:
        raise TokenError("invite token is malformed (not UTF-8)") from None
    if any(unicodedata.category(c) == "Cc" for c in name + broker):
        raise TokenError("invite token is malformed (control characters)")
    return Invite(name, raw[end_name:end_secret], broker)
