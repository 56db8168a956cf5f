"""Exception types of :mod:`sdschat.crypto`.

Every error this package raises on purpose is a :class:`CryptoError`, so a
caller (the node, the CLI) can catch one type.  Messages are one line and
never contain key material, plaintext or signatures.

``EnvelopeError`` and ``SignatureError`` carry a short machine-readable
``reason`` code so the node can count rejected frames by cause.
"""

from __future__ import annotations

__all__ = [
    "CryptoError",
    "KeyFileError",
    "EnvelopeError",
    "SignatureError",
]


class CryptoError(Exception):
    """Base class of every error raised on purpose by ``sdschat.crypto``."""


class KeyFileError(CryptoError):
    """A channel key file is missing, unreadable, malformed or cannot be written."""


class _ReasonError(CryptoError):
    """A :class:`CryptoError` with a short ``reason`` code from a fixed set."""

    #: reason code -> default one-line message
    REASONS: dict[str, str] = {}

    def __init__(self, reason: str, message: str | None = None) -> None:
        if reason not in self.REASONS:
            raise ValueError(f"unknown {type(self).__name__} reason {reason!r}")
        self.reason = reason
        super().__init__(message or self.REASONS[reason])


class EnvelopeError(_ReasonError):
    """An envelope could not be opened (or a plaintext could not be sealed).

    ``reason`` is one of:

    - ``"type"``: the input is not bytes-like;
    - ``"short"``: empty, or shorter than the fixed envelope overhead;
    - ``"too_large"``: longer than the documented maximum;
    - ``"version"``: the first byte is not a known envelope version;
    - ``"algorithm"``: the second byte is not a known algorithm id;
    - ``"auth"``: authentication failed (wrong key, other channel, tampering);
    - ``"padding"``: authentic, but its length field or padding is not what sdschat seals.
    """

    REASONS = {
        "type": "envelope is not bytes",
        "short": "envelope too short",
        "too_large": "envelope too large",
        "version": "unknown envelope version",
        "algorithm": "unknown envelope algorithm",
        "auth": "envelope authentication failed",
        "padding": "envelope padding is malformed",
    }


class SignatureError(_ReasonError):
    """Signed content is malformed or its signature does not verify.

    ``reason`` is one of ``"type"``, ``"short"``, ``"version"``, ``"invalid"``.
    """

    REASONS = {
        "type": "signed content is not bytes",
        "short": "signed content too short",
        "version": "unknown signed content version",
        "invalid": "signature does not verify",
    }
