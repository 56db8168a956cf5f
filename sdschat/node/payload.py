"""The application payload carried (signed, then encrypted) inside SDS ``content``.

A small versioned JSON object::

    {"v": 1, "k": "msg", "nick": "alice", "text": "hello", "ts": 1763769600000, "n": "9f2c01ab"}

``k`` is the kind: ``msg`` (a chat line), ``me`` (an action, ``/me``), ``typing``
(ephemeral "typing…" notice). ``ts`` is the sender's wall clock in ms at send
time (display only; ordering is SDS's Lamport order). ``n`` is a random nonce,
so two people — or one person twice — typing the same text still produce
distinct SDS message ids. Unknown keys are ignored (forward compatible);
a newer ``v`` is refused.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

__all__ = ["AppPayload", "PayloadError", "KINDS", "VERSION", "MAX_TEXT"]

VERSION = 1
KINDS = ("msg", "me", "typing")
MAX_TEXT = 16_384
MAX_NICK = 64


class PayloadError(ValueError):
    """An application payload that cannot be read."""


@dataclass(frozen=True, slots=True)
class AppPayload:
    kind: str
    nick: str
    text: str
    sent_at_ms: int
    nonce: str = ""

    @classmethod
    def new(cls, kind: str, nick: str, text: str, sent_at_ms: int) -> AppPayload:
        if kind not in KINDS:
            raise ValueError(f"unknown payload kind {kind!r}")
        if len(text) > MAX_TEXT:
            raise ValueError(f"message longer than {MAX_TEXT} characters")
        return cls(kind, nick[:MAX_NICK], text, int(sent_at_ms), os.urandom(4).hex())

    def encode(self) -> bytes:
        obj = {"v": VERSION, "k": self.kind, "nick": self.nick, "text": self.text, "ts": self.sent_at_ms, "n": self.nonce}
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> AppPayload:
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # incl. huge ints, deep nesting
            raise PayloadError(f"payload is not JSON: {exc.__class__.__name__}") from None
        if not isinstance(obj, dict):
            raise PayloadError("payload is not an object")
        v = obj.get("v")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise PayloadError("payload has no version")
        if v > VERSION:
            raise PayloadError(f"payload version {v} is newer than this sdschat understands ({VERSION})")
        kind, nick, text, ts, nonce = obj.get("k"), obj.get("nick"), obj.get("text"), obj.get("ts"), obj.get("n", "")
        if kind not in KINDS:
            raise PayloadError(f"unknown payload kind {kind!r}"[:80])
        if not isinstance(nick, str) or not isinstance(text, str) or not isinstance(nonce, str):
            raise PayloadError("payload fields have the wrong type")
        if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 2**63:
            raise PayloadError("payload timestamp is invalid")
        if len(text) > MAX_TEXT:
            raise PayloadError("payload text too long")
        try:  # lone surrogates decode from JSON escapes but cannot be stored or shown
            (nick + text + nonce).encode("utf-8")
        except UnicodeEncodeError:
            raise PayloadError("payload has invalid characters") from None
        return cls(kind, nick[:MAX_NICK], text, ts, nonce)
