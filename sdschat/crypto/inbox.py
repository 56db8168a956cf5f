"""Inbox requests: a channel's key handed to one member, sealed to that member's announced X25519 key.

A member's *inbox* is an MQTT topic only those who know its X25519 public key (announced, sealed, in its
signed join: the members of a channel it shares with them) can compute::

    inbox topic = "sdschat/" + hex(HKDF-SHA256(X25519 public key, salt = none,
                                               info = b"sdschat/v1/inbox-topic\\x00", length = 16))

The input is a public key that never travels in the clear, and the HKDF is domain-separated from every channel
value (those are HKDFs of a channel secret with other infos, :mod:`.keys`), so the broker cannot link an inbox
topic to a channel topic, a participant id or another inbox: to it, one more ``sdschat/`` + 32 hex digits.

A request (:class:`InboxRequest`: "talk to me in this new channel", or "come into this channel") carries what an
invite token carries (the channel's name, secret, broker, admins, key epoch, removed members), plus a random
request id, when it was made, the asker's nick and the participant id it is for. Its JSON is signed by the
asker's Ed25519 identity (signed content, domain ``b"sdschat/v1/inbox-request\\x00"``, scoped to the
recipient's X25519 key), then sealed to the recipient (:func:`seal_request`)::

    offset  size   field
    0       1      version               0x01
    1       32     E                     a fresh ephemeral X25519 public key
    33      p+16   AES-256-GCM(k, nonce = 12 zero bytes, padded, aad = version || E || X_r)

    k        = HKDF-SHA256(X25519(e, X_r), info = b"sdschat/v1/inbox-seal\\x00" || E || X_r)
    padded   = length (4, big-endian) || signed request || zero bytes

as epoch keys are sealed (:mod:`.epochs`): each ``k`` is used once, so a constant nonce is safe. The padding
brings the whole blob to the envelopes' size buckets (:func:`~.envelope.padded_size`): at least 1 KB, so every
request looks alike. :func:`open_request` undoes it all and checks everything; it raises only
:class:`InboxError`, whose ``reason`` says why (the receiver counts by it).
"""

from __future__ import annotations

import json
import os
import unicodedata
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .envelope import padded_size
from .epochs import EXCHANGE_KEY_SIZE, exchange_key
from .errors import CryptoError, SignatureError
from .identity import Identity
from .keys import TOPIC_PREFIX
from .signed import open_signed_content, signed_content

__all__ = [
    "INBOX_VERSION",
    "MAX_REQUEST_SIZE",
    "REQUEST_KINDS",
    "InboxError",
    "InboxRequest",
    "OpenedRequest",
    "inbox_topic",
    "open_request",
    "seal_request",
]

INBOX_VERSION = 0x01
#: what a request asks: ``"dm"`` talk in a new two-member channel, ``"invite"`` come into an existing channel
REQUEST_KINDS = ("dm", "invite")
#: the largest sealed request opened (an invite names at most 16 admins and 1,000 removed members: ~70 KB)
MAX_REQUEST_SIZE = 128 * 1024
_TOPIC_INFO = b"sdschat/v1/inbox-topic\x00"
_SEAL_INFO = b"sdschat/v1/inbox-seal\x00"
_SIGN_DOMAIN = b"sdschat/v1/inbox-request\x00"
_HEADER = 1 + EXCHANGE_KEY_SIZE
_LENGTH = 4
_TAG = 16
_ZERO_NONCE = bytes(12)
_RAW = serialization.Encoding.Raw
_PUB = serialization.PublicFormat.Raw


class InboxError(CryptoError):
    """An inbox blob that is not a request for us: ``reason`` is ``"short"``, ``"too_large"``, ``"version"``,
    ``"auth"`` (does not open for our key), ``"padding"``, ``"signature"``, ``"format"`` or ``"recipient"`` (a
    request signed for someone else, sealed on to us)."""

    REASONS = ("short", "too_large", "version", "auth", "padding", "signature", "format", "recipient")

    def __init__(self, reason: str, message: str = "") -> None:
        if reason not in self.REASONS:
            raise ValueError(f"unknown inbox error reason {reason!r}")
        self.reason = reason
        super().__init__(message or f"inbox request refused ({reason})")


@dataclass(frozen=True)
class InboxRequest:
    """What a request carries (the invite's fields, and who asks whom, when)."""

    kind: str
    channel: str
    secret: bytes
    #: the participant id the request is for
    recipient: str
    #: the asker's nick (shown; its participant id comes from the signature)
    nick: str
    sent_ms: int
    broker: str = ""
    admins: tuple[str, ...] = ()
    epoch: int = 0
    epoch_secret: bytes = b""
    removed: tuple[str, ...] = ()
    #: 16 random bytes (hex): a request is shown once, however often it arrives
    request_id: str = field(default_factory=lambda: os.urandom(16).hex())

    def __repr__(self) -> str:  # never the secrets
        return f"InboxRequest(kind={self.kind!r}, channel={self.channel!r}, request_id={self.request_id!r})"

    def to_json(self) -> bytes:
        doc = {
            "v": INBOX_VERSION,
            "kind": self.kind,
            "id": self.request_id,
            "at": self.sent_ms,
            "to": self.recipient,
            "nick": self.nick,
            "channel": self.channel,
            "secret": self.secret.hex(),
            "broker": self.broker,
            "admins": list(self.admins),
            "epoch": self.epoch,
            "epoch_secret": self.epoch_secret.hex(),
            "removed": list(self.removed),
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> InboxRequest:
        """The request in ``data``; :class:`InboxError` ("format") for anything not made by :meth:`to_json`."""
        try:
            doc = json.loads(data.decode("utf-8"))
            request = cls(
                kind=_choice(doc["kind"]),
                channel=_text(doc["channel"], 255),
                secret=_hexbytes(doc["secret"], (32,)),
                recipient=_pid(doc["to"]),
                nick=_text(doc["nick"], 255),
                sent_ms=_count(doc["at"]),
                broker=_text(doc["broker"], 1024, empty=True),
                admins=tuple(_pid(p) for p in _list(doc["admins"], 16)),
                epoch=_count(doc["epoch"], 2**31 - 1),
                epoch_secret=_hexbytes(doc["epoch_secret"], (0, 32)),
                removed=tuple(_pid(p) for p in _list(doc["removed"], 1_000)),
                request_id=_hexbytes(doc["id"], (16,)).hex(),
            )
            if doc["v"] != INBOX_VERSION or (request.epoch > 0) != bool(request.epoch_secret):
                raise ValueError("version or epoch")
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            raise InboxError("format") from None
        return request


@dataclass(frozen=True)
class OpenedRequest:
    """A request that opened for us and verified: the request, and who signed it."""

    request: InboxRequest
    #: the asker's participant id (the fingerprint of the key that signed the request)
    sender: str


def inbox_topic(exchange_public: bytes) -> str:
    """The inbox topic of the member whose X25519 public key is ``exchange_public`` (see the module)."""
    if len(exchange_public) != EXCHANGE_KEY_SIZE:
        raise ValueError(f"an X25519 public key is {EXCHANGE_KEY_SIZE} bytes")
    digest = HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=_TOPIC_INFO).derive(bytes(exchange_public))
    return TOPIC_PREFIX + digest.hex()


def _seal_key(shared: bytes, eph_pub: bytes, recipient_pub: bytes) -> bytes:
    info = _SEAL_INFO + eph_pub + recipient_pub
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


def seal_request(identity: Identity, request: InboxRequest, recipient_pub: bytes) -> bytes:
    """``request`` signed by ``identity`` and sealed to the X25519 key ``recipient_pub`` (padded to a bucket);
    :class:`InboxError` ("auth") for a key nothing can be sealed to (a low-order point)."""
    recipient_pub = bytes(recipient_pub)
    if len(recipient_pub) != EXCHANGE_KEY_SIZE:
        raise ValueError(f"an X25519 public key is {EXCHANGE_KEY_SIZE} bytes")
    signed = signed_content(identity, recipient_pub, request.to_json(), domain=_SIGN_DOMAIN)
    eph = X25519PrivateKey.generate()
    eph_pub = eph.public_key().public_bytes(_RAW, _PUB)
    try:
        shared = eph.exchange(X25519PublicKey.from_public_bytes(recipient_pub))
    except ValueError:
        raise InboxError("auth", "that member announced an unusable key") from None
    n = len(signed)
    target = padded_size(_HEADER + _LENGTH + n + _TAG) - _HEADER - _TAG
    padded = n.to_bytes(_LENGTH, "big") + signed + bytes(target - n - _LENGTH)
    header = bytes((INBOX_VERSION,)) + eph_pub
    return header + AESGCM(_seal_key(shared, eph_pub, recipient_pub)).encrypt(
        _ZERO_NONCE, padded, header + recipient_pub
    )


def open_request(identity: Identity, blob: bytes) -> OpenedRequest:
    """The request sealed to ``identity`` in ``blob``, its signature checked and addressed to us; raises only
    :class:`InboxError`."""
    data = bytes(blob)
    if len(data) > MAX_REQUEST_SIZE:
        raise InboxError("too_large")
    if len(data) < _HEADER + _LENGTH + _TAG:
        raise InboxError("short")
    if data[0] != INBOX_VERSION:
        raise InboxError("version")
    mine = exchange_key(identity)
    my_pub = mine.public_key().public_bytes(_RAW, _PUB)
    eph_pub, header = data[1:_HEADER], data[:_HEADER]
    try:
        shared = mine.exchange(X25519PublicKey.from_public_bytes(eph_pub))
        plain = AESGCM(_seal_key(shared, eph_pub, my_pub)).decrypt(_ZERO_NONCE, data[_HEADER:], header + my_pub)
    except (InvalidTag, ValueError):
        raise InboxError("auth") from None
    n = int.from_bytes(plain[:_LENGTH], "big")
    end = _LENGTH + n
    if end > len(plain) or plain.count(0, end) != len(plain) - end:
        raise InboxError("padding")
    try:
        signed = open_signed_content(plain[_LENGTH:end], my_pub, domain=_SIGN_DOMAIN)
    except SignatureError:
        raise InboxError("signature") from None
    request = InboxRequest.from_json(signed.message)
    if request.recipient != identity.participant_id:
        raise InboxError("recipient")
    return OpenedRequest(request, signed.participant_id)


# -- field checks (anything else in a signed request is refused as "format") ---------------------------------


def _choice(value: object) -> str:
    if value not in REQUEST_KINDS:
        raise ValueError("kind")
    return str(value)


def _text(value: object, max_bytes: int, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty) or len(value.encode("utf-8")) > max_bytes:
        raise ValueError("text")
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise ValueError("control characters")
    return value


def _hexbytes(value: object, sizes: tuple[int, ...]) -> bytes:
    if not isinstance(value, str):
        raise ValueError("hex")
    raw = bytes.fromhex(value)
    if len(raw) not in sizes or raw.hex() != value:
        raise ValueError("hex size")
    return raw


def _pid(value: object) -> str:
    return _hexbytes(value, (16,)).hex()


def _count(value: object, top: int = 2**63 - 1) -> int:
    if type(value) is not int or not 0 <= value <= top:
        raise ValueError("count")
    return value


def _list(value: object, top: int) -> list[object]:
    if not isinstance(value, list) or len(value) > top:
        raise ValueError("list")
    return value
