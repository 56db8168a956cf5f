"""Key epochs: a channel's later keys, and how one is handed to each member it is for.

A channel starts in epoch 0 under the secret of its invite (or key file, or
passphrase). A removal (or a rotation) starts epoch ``n`` with a fresh random
32-byte secret; its envelopes and MQTT topic are those of
``ChannelKey(secret_n, channel name)`` (:func:`epoch_key`), while the SDS
channel id and the binding signatures are scoped to stay those of epoch 0,
so the log and every signature carry on across epochs.

The new secret reaches each remaining member sealed to that member's X25519
key (:func:`seal_to_members`)::

    member key  = X25519 key whose private half is
                  HKDF-SHA256(Ed25519 seed, info = b"sdschat/v1/x25519")   (:func:`exchange_key`)
    per epoch   = one ephemeral X25519 key pair (e, E)
    per member  = AES-256-GCM(k_m, nonce = 12 zero bytes, secret, aad = context)
      k_m       = HKDF-SHA256(X25519(e, X_m),
                              info = b"sdschat/v1/epoch-key\\x00" || context || E || X_m)
      context   = channel binding (32) || epoch (8, big-endian) || member's participant id (UTF-8)

Each ``k_m`` is used once (a fresh ``e`` per epoch message), so a constant
nonce is safe. The epoch message carrying these boxes is itself signed by
its author (an admin) and sealed under the current key: only members can
read it, only an admin can have written it, and a box opens only for the
member it names, in that epoch, in that channel.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import CryptoError
from .identity import Identity
from .keyfile import KEY_SIZE
from .keys import ChannelKey

__all__ = [
    "EXCHANGE_KEY_SIZE",
    "EpochKeyError",
    "exchange_key",
    "exchange_public",
    "epoch_key",
    "new_epoch_secret",
    "seal_to_members",
    "open_for_member",
]

EXCHANGE_KEY_SIZE = 32
BOX_SIZE = KEY_SIZE + 16
_RAW = serialization.Encoding.Raw
_ZERO_NONCE = bytes(12)


class EpochKeyError(CryptoError):
    """An epoch key box that does not open for us (not ours, altered, or another epoch or channel)."""


def exchange_key(identity: Identity) -> X25519PrivateKey:
    """The member's X25519 key, derived from its Ed25519 identity (nothing more to store or lose)."""
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"sdschat/v1/x25519").derive(
        identity.private_bytes()
    )
    return X25519PrivateKey.from_private_bytes(seed)


def exchange_public(identity: Identity) -> bytes:
    """The raw 32-byte public half of :func:`exchange_key` (announced in a member's signed join)."""
    return exchange_key(identity).public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)


def epoch_key(secret: bytes, channel_name: str) -> ChannelKey:
    """The envelope key and topic of one epoch (epoch 0: the channel's own key)."""
    return ChannelKey(secret, channel_name)


def new_epoch_secret() -> bytes:
    return os.urandom(KEY_SIZE)


def _context(binding: bytes, epoch: int, participant_id: str) -> bytes:
    return bytes(binding) + epoch.to_bytes(8, "big") + participant_id.encode("utf-8")


def _box_key(shared: bytes, context: bytes, eph_pub: bytes, member_pub: bytes) -> bytes:
    info = b"sdschat/v1/epoch-key\x00" + context + eph_pub + member_pub
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


def seal_to_members(
    secret: bytes, epoch: int, binding: bytes, members: dict[str, bytes]
) -> tuple[bytes, dict[str, bytes]]:
    """``(ephemeral public key, {participant id: box})``: ``secret`` sealed to each member's X25519 key."""
    if len(secret) != KEY_SIZE:
        raise ValueError(f"an epoch secret is {KEY_SIZE} bytes")
    eph = X25519PrivateKey.generate()
    eph_pub = eph.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    boxes = {}
    for pid, member_pub in members.items():
        try:
            shared = eph.exchange(X25519PublicKey.from_public_bytes(bytes(member_pub)))
        except ValueError as exc:  # a low-order point announced as a key: that member gets no box
            raise EpochKeyError(f"member {pid[:8]} announced an unusable key ({exc})") from None
        ctx = _context(binding, epoch, pid)
        boxes[pid] = AESGCM(_box_key(shared, ctx, eph_pub, bytes(member_pub))).encrypt(_ZERO_NONCE, secret, ctx)
    return eph_pub, boxes


def open_for_member(identity: Identity, eph_pub: bytes, box: bytes, epoch: int, binding: bytes) -> bytes:
    """The epoch secret in ``box`` (sealed to ``identity``); :class:`EpochKeyError` if it does not open."""
    if len(eph_pub) != EXCHANGE_KEY_SIZE or len(box) != BOX_SIZE:
        raise EpochKeyError("malformed epoch key box")
    mine = exchange_key(identity)
    member_pub = mine.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    ctx = _context(binding, epoch, identity.participant_id)
    try:
        shared = mine.exchange(X25519PublicKey.from_public_bytes(bytes(eph_pub)))
        return AESGCM(_box_key(shared, ctx, bytes(eph_pub), member_pub)).decrypt(_ZERO_NONCE, bytes(box), ctx)
    except (InvalidTag, ValueError):
        raise EpochKeyError("the epoch key box does not open for this member") from None
