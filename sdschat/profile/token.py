"""Invite tokens: a channel's name, key and broker in one line you can paste.

Format: ``sdschat:`` followed by the unpadded base64url of::

    version (1 byte, 2) | name length (1) | name (UTF-8) | secret (32)
    | broker length (2, big-endian) | broker URL (UTF-8)
    | admin count (1) | admins (16 bytes each: participant ids)
    | removed count (2, big-endian) | removed members (16 bytes each)
    | epoch (4, big-endian) | epoch secret (32, only if epoch > 0)
    | CRC-32 of everything before (4, big-endian)

The admins are the channel's trust root (its creator, and whoever it named):
only they can remove members and change the key. The epoch and its secret
are the channel's current key when it is no longer the first one (after a
removal or rotation); the removed members are those whose frames the new
member must refuse from the start. Version 1 tokens (no admins, epoch 0) still decode.

Every field is checked on the way in as on the way out: the channel name as a
name of ``sdschat new`` (:func:`~sdschat.profile.names.valid_name`, already NFC),
the epoch below 2^31 (:data:`MAX_EPOCH`), no control characters in the broker.
The broker URL's syntax is the transport's to check (``sdschat join`` does, with
the parser ``sdschat init`` uses). An invite's broker carries no login and no
CA file path unless its maker asked for them (:meth:`Profile.invite`).

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
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import ProfileError, TokenError
from .names import valid_name

__all__ = ["Invite", "MAX_EPOCH", "TOKEN_PREFIX", "TOKEN_VERSION", "encode_invite", "decode_invite"]

TOKEN_PREFIX = "sdschat:"
TOKEN_VERSION = 2
MAX_ADMINS = 16
MAX_REMOVED = 1_000
SECRET_SIZE = 32
MAX_NAME_BYTES = 255
MAX_BROKER_BYTES = 1024
#: the highest key epoch a token carries (epochs count up by one per key change; the field is 4 bytes)
MAX_EPOCH = 2**31 - 1
MAX_TOKEN_CHARS = (
    4
    * (
        1
        + 1
        + MAX_NAME_BYTES
        + SECRET_SIZE
        + 2
        + MAX_BROKER_BYTES
        + 1
        + 16 * MAX_ADMINS
        + 2
        + 16 * MAX_REMOVED
        + 4
        + SECRET_SIZE
        + 4
    )
    // 3
    + len(TOKEN_PREFIX)
    + 4
)


@dataclass(frozen=True)
class Invite:
    """What a token carries."""

    channel: str
    secret: bytes
    broker: str = ""
    #: participant ids of the channel's admins (its trust root)
    admins: tuple[str, ...] = ()
    #: the current key epoch and its secret (0 and b"": the channel's first key, ``secret``)
    epoch: int = 0
    epoch_secret: bytes = b""
    #: participant ids of the members removed so far
    removed: tuple[str, ...] = ()

    def __repr__(self) -> str:  # never the secret
        return f"Invite(channel={self.channel!r}, broker={self.broker!r}, epoch={self.epoch})"


def encode_invite(invite: Invite) -> str:
    name = _channel_name(unicodedata.normalize("NFC", invite.channel)).encode("utf-8")
    broker = invite.broker.encode("utf-8")
    if not name or len(name) > MAX_NAME_BYTES:
        raise TokenError(f"a channel name must be 1 to {MAX_NAME_BYTES} bytes")
    if len(invite.secret) != SECRET_SIZE:
        raise TokenError(f"a channel secret is {SECRET_SIZE} bytes")
    if len(broker) > MAX_BROKER_BYTES:
        raise TokenError(f"a broker URL must be at most {MAX_BROKER_BYTES} bytes")
    if len(invite.admins) > MAX_ADMINS:
        raise TokenError(f"at most {MAX_ADMINS} admins in an invite")
    if len(invite.removed) > MAX_REMOVED:
        raise TokenError(f"at most {MAX_REMOVED} removed members in an invite")
    admins, removed = _ids(invite.admins), _ids(invite.removed)
    _epoch(invite.epoch)
    if (invite.epoch > 0) != (len(invite.epoch_secret) == SECRET_SIZE):
        raise TokenError("an epoch above 0 comes with its 32-byte secret")
    if any(unicodedata.category(c) == "Cc" for c in invite.broker):
        raise TokenError("a broker URL cannot hold control characters")
    body = (
        bytes([TOKEN_VERSION, len(name)])
        + name
        + bytes(invite.secret)
        + struct.pack(">H", len(broker))
        + broker
        + bytes([len(invite.admins)])
        + admins
        + struct.pack(">H", len(invite.removed))
        + removed
        + struct.pack(">I", invite.epoch)
        + bytes(invite.epoch_secret)
    )
    body += struct.pack(">I", zlib.crc32(body))
    return TOKEN_PREFIX + base64.urlsafe_b64encode(body).rstrip(b"=").decode("ascii")


def _channel_name(name: str) -> str:
    """``name`` if ``sdschat new`` would take it as a channel's name (and it is NFC), else :class:`TokenError`."""
    try:
        if valid_name(name, "channel name") != name:
            raise ProfileError("a channel name must be NFC-normalized")
    except ProfileError as exc:
        raise TokenError(f"invite token: {exc}") from None
    return name


def _epoch(number: int) -> int:
    if type(number) is not int or not 0 <= number <= MAX_EPOCH:
        raise TokenError(f"invite token: a key epoch is a number from 0 to {MAX_EPOCH}, not {number}")
    return number


def _ids(ids: Sequence[str]) -> bytes:
    try:
        raw = b"".join(bytes.fromhex(p) for p in ids)
    except ValueError:
        raise TokenError("a participant id is 32 hex digits") from None
    if len(raw) != 16 * len(ids):
        raise TokenError("a participant id is 32 hex digits")
    return raw


def _unbase64(text: str) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("not an invite token (damaged: not base64url)") from None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != text:
        raise TokenError("not an invite token (damaged)")
    return raw


def decode_invite(text: str) -> Invite:
    """The invite in ``text``; raises :class:`TokenError` (one line) for anything else. Whitespace inside is
    ignored: a token copied by hand off a screen that wrapped it comes with line breaks."""
    text = "".join(text.split())
    if not text.startswith(TOKEN_PREFIX):
        raise TokenError(f"not an invite token (it starts with {TOKEN_PREFIX!r})")
    if len(text) > MAX_TOKEN_CHARS:
        raise TokenError("not an invite token (too long)")
    body = text[len(TOKEN_PREFIX) :]
    if not body.isascii():
        raise TokenError("not an invite token (damaged)")
    raw = _unbase64(body)
    if len(raw) < 2:
        raise TokenError("invite token is truncated")
    if raw[0] not in (1, TOKEN_VERSION):
        raise TokenError(f"invite token of version {raw[0]}; this sdschat reads versions 1 and {TOKEN_VERSION}")
    if len(raw) < 4 or zlib.crc32(raw[:-4]) != struct.unpack(">I", raw[-4:])[0]:
        raise TokenError("invite token is truncated or altered (checksum mismatch)")
    return _parse(raw[:-4])


def _parse(raw: bytes) -> Invite:
    n = raw[1]
    end_name = 2 + n
    end_secret = end_name + SECRET_SIZE
    if n == 0 or len(raw) < end_secret + 2:
        raise TokenError("invite token is malformed")
    (blen,) = struct.unpack(">H", raw[end_secret : end_secret + 2])
    end_broker = end_secret + 2 + blen
    admins: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    epoch, epoch_secret = 0, b""
    if raw[0] == 1:
        if len(raw) != end_broker:
            raise TokenError("invite token is malformed")
    else:
        if len(raw) < end_broker + 1:
            raise TokenError("invite token is malformed")
        count = raw[end_broker]
        end_admins = end_broker + 1 + 16 * count
        if count > MAX_ADMINS or len(raw) < end_admins + 2:
            raise TokenError("invite token is malformed")
        admins = tuple(raw[i : i + 16].hex() for i in range(end_broker + 1, end_admins, 16))
        (n_removed,) = struct.unpack(">H", raw[end_admins : end_admins + 2])
        end_removed = end_admins + 2 + 16 * n_removed
        if n_removed > MAX_REMOVED or len(raw) < end_removed + 4:
            raise TokenError("invite token is malformed")
        removed = tuple(raw[i : i + 16].hex() for i in range(end_admins + 2, end_removed, 16))
        (epoch,) = struct.unpack(">I", raw[end_removed : end_removed + 4])
        epoch_secret = raw[end_removed + 4 :]
        if len(epoch_secret) != (SECRET_SIZE if epoch else 0):
            raise TokenError("invite token is malformed")
    try:
        name = raw[2:end_name].decode("utf-8")
        broker = raw[end_secret + 2 : end_broker].decode("utf-8")
    except UnicodeDecodeError:
        raise TokenError("invite token is malformed (not UTF-8)") from None
    if any(unicodedata.category(c) == "Cc" for c in name + broker):
        raise TokenError("invite token is malformed (control characters)")
    return Invite(
        _channel_name(name), raw[end_name:end_secret], broker, admins, _epoch(epoch), bytes(epoch_secret), removed
    )
