"""The store node's request/response convention over MQTT (no channel key needed).

Topics
------
- Requests: ``sdschat-store/req`` (``REQUEST_TOPIC``), one JSON object per MQTT message (UTF-8, at most
  ``MAX_REQUEST_BYTES``).
- Answers: on the request's ``reply_to`` topic, which must be ``sdschat-store/reply/<token>`` where the
  token is 1..64 of ``[A-Za-z0-9_-]`` (a node picks a random one per run). Requests naming any other
  reply topic are dropped unanswered, so the store cannot be made to publish on channel topics.

Request (JSON)::

    {"v": 1, "id": "<1..64 chars>", "reply_to": "sdschat-store/reply/<token>",
     "topic": "sdschat/<32 hex>",
     "hashes": ["<64 hex: SHA-256 of an envelope>", ...]}          # by hash: at most 100
  or
     "since_ms": <int >= 0>, "cursor": <int >= 0, 0 first>, "limit": <1..500, default 500>   # by time

Answer (binary, big-endian)::

    b"SDSS" | u8 version (1) | u8 id length | id (UTF-8) | u16 error length | error (UTF-8, empty = ok)
    | u64 next_cursor (0 = nothing more) | u32 count | count x (u32 length | envelope bytes)

Envelopes come exactly as they crossed the broker, oldest first (arrival order). Unknown hashes are
simply absent. A by-time page stops at ``limit`` envelopes or ``MAX_REPLY_BYTES``, whichever comes
first; ``next_cursor`` then continues it (send the same request with ``cursor`` set). Malformed or
out-of-bounds requests with a usable ``reply_to`` get an empty answer with an error string.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from typing import TypeGuard, overload

__all__ = [
    "REQUEST_TOPIC",
    "REPLY_PREFIX",
    "CHANNEL_TOPICS",
    "MAX_HASHES",
    "MAX_PAGE",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "Request",
    "Reply",
    "RequestError",
    "encode_request",
    "parse_request",
    "encode_reply",
    "decode_reply",
    "reply_topic_ok",
    "channel_topic_ok",
]

REQUEST_TOPIC = "sdschat-store/req"
REPLY_PREFIX = "sdschat-store/reply/"
CHANNEL_TOPICS = "sdschat/+"
MAX_HASHES = 100
MAX_PAGE = 500
MAX_REPLY_BYTES = 2 * 1024 * 1024
MAX_REQUEST_BYTES = 16 * 1024
MAGIC = b"SDSS"
VERSION = 1

_REPLY_RE = re.compile(r"^sdschat-store/reply/[A-Za-z0-9_-]{1,64}$")
_TOPIC_RE = re.compile(r"^sdschat/[0-9a-f]{32}$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")


class RequestError(ValueError):
    """A request the store cannot serve; ``reply_to`` is set when an error answer can be sent."""

    def __init__(self, reason: str, reply_to: str | None = None, request_id: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.reply_to = reply_to
        self.request_id = request_id


@dataclass(slots=True)
class Request:
    id: str
    reply_to: str
    topic: str
    hashes: list[bytes] | None = None
    since_ms: int | None = None
    cursor: int = 0
    limit: int = MAX_PAGE


@dataclass(slots=True)
class Reply:
    id: str
    envelopes: list[bytes] = field(default_factory=list)
    next_cursor: int = 0
    error: str = ""


def reply_topic_ok(topic: object) -> TypeGuard[str]:
    return isinstance(topic, str) and _REPLY_RE.match(topic) is not None


def channel_topic_ok(topic: object) -> TypeGuard[str]:
    return isinstance(topic, str) and _TOPIC_RE.match(topic) is not None


def encode_request(req: Request) -> bytes:
    body: dict = {"v": VERSION, "id": req.id, "reply_to": req.reply_to, "topic": req.topic}
    if req.hashes is not None:
        body["hashes"] = [h.hex() for h in req.hashes]
    else:
        body.update(since_ms=int(req.since_ms or 0), cursor=int(req.cursor), limit=int(req.limit))
    return json.dumps(body, separators=(",", ":")).encode()


@overload
def _int(body: dict[str, object], name: str, default: int, lo: int, hi: int | None, reply_to: str, rid: str) -> int: ...
@overload
def _int(
    body: dict[str, object], name: str, default: None, lo: int, hi: int | None, reply_to: str, rid: str
) -> int | None: ...
def _int(
    body: dict[str, object], name: str, default: int | None, lo: int, hi: int | None, reply_to: str, rid: str
) -> int | None:
    v = body.get(name, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        raise RequestError(f"bad {name}", reply_to, rid)
    return v


def parse_request(data: bytes) -> Request:
    """Validate a request. Raises RequestError (with ``reply_to`` when an error answer is possible)."""
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestError("request too large")
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RequestError("not JSON") from None
    if not isinstance(body, dict):
        raise RequestError("not a JSON object")
    reply_to = body.get("reply_to")
    if not reply_topic_ok(reply_to):
        raise RequestError("bad reply_to")
    rid = body.get("id")
    if not isinstance(rid, str) or not 1 <= len(rid) <= 64 or len(rid.encode()) > 255:
        raise RequestError("bad id", reply_to, "")
    if body.get("v", VERSION) != VERSION:
        raise RequestError("unsupported version", reply_to, rid)
    topic = body.get("topic")
    if not channel_topic_ok(topic):
        raise RequestError("bad topic", reply_to, rid)
    hashes = body.get("hashes")
    if hashes is not None:
        if "since_ms" in body:
            raise RequestError("hashes and since_ms are exclusive", reply_to, rid)
        if not isinstance(hashes, list):
            raise RequestError("bad hashes", reply_to, rid)
        if len(hashes) > MAX_HASHES:
            raise RequestError(f"too many hashes (max {MAX_HASHES})", reply_to, rid)
        if not all(isinstance(h, str) and _HASH_RE.match(h) for h in hashes):
            raise RequestError("bad hash (64 lowercase hex expected)", reply_to, rid)
        return Request(rid, reply_to, topic, hashes=[bytes.fromhex(h) for h in dict.fromkeys(hashes)])
    since = _int(body, "since_ms", None, 0, 2**62, reply_to, rid)
    if since is None:
        raise RequestError("need hashes or since_ms", reply_to, rid)
    cursor = _int(body, "cursor", 0, 0, 2**62, reply_to, rid)
    limit = _int(body, "limit", MAX_PAGE, 1, None, reply_to, rid)
    return Request(rid, reply_to, topic, since_ms=since, cursor=cursor, limit=min(limit, MAX_PAGE))


def encode_reply(reply: Reply) -> bytes:
    rid = reply.id.encode()[:255]
    err = reply.error.encode()[:1000]
    parts = [
        MAGIC,
        bytes((VERSION, len(rid))),
        rid,
        struct.pack(">H", len(err)),
        err,
        struct.pack(">QI", reply.next_cursor, len(reply.envelopes)),
    ]
    for env in reply.envelopes:
        parts.append(struct.pack(">I", len(env)))
        parts.append(env)
    return b"".join(parts)


def decode_reply(data: bytes) -> Reply:
    """Parse an answer; raises ValueError on anything malformed."""
    mv = memoryview(data)
    if len(mv) < 6 or bytes(mv[:4]) != MAGIC or mv[4] != VERSION:
        raise ValueError("not a store reply")
    n = mv[5]
    pos = 6
    rid = bytes(mv[pos : pos + n]).decode()
    pos += n
    (elen,) = struct.unpack_from(">H", mv, pos)
    pos += 2
    err = bytes(mv[pos : pos + elen]).decode()
    pos += elen
    cursor, count = struct.unpack_from(">QI", mv, pos)
    pos += 12
    envs = []
    for _ in range(count):
        (ln,) = struct.unpack_from(">I", mv, pos)
        pos += 4
        if pos + ln > len(mv):
            raise ValueError("truncated reply")
        envs.append(bytes(mv[pos : pos + ln]))
        pos += ln
    if pos != len(mv):
        raise ValueError("trailing bytes in reply")
    return Reply(rid, envs, cursor, err)
