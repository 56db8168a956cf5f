"""A private key sealed under a passphrase: scrypt, then AES-256-GCM (the profile's protected identity).

Format (ASCII text)::

    sdschat-identity sealed v1
    <base64 of JSON: {"kdf": "scrypt", "n", "r", "p", "salt", "nonce", "public", "sealed"}>

``salt`` (16 random bytes) and the scrypt cost are stored with it; ``public``
is the Ed25519 public key in the clear (the participant id is its fingerprint:
commands that only need the id do not ask for the passphrase). The AEAD's
associated data is the header plus the public key, so neither can be swapped.
A wrong passphrase and a damaged file both fail authentication: one
:class:`~.errors.KeyFileError`, whose message names neither the passphrase nor
the key.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import unicodedata
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from .errors import KeyFileError
from .keys import DEFAULT_SCRYPT_PARAMS, ScryptParams

__all__ = ["SEALED_HEADER", "seal_private_key", "open_private_key", "sealed_public_key", "is_sealed"]

SEALED_HEADER = "sdschat-identity sealed v1"


def _key(passphrase: str, salt: bytes, params: ScryptParams) -> bytes:
    if not isinstance(passphrase, str) or not passphrase:
        raise ValueError("the passphrase must not be empty")
    secret = unicodedata.normalize("NFC", passphrase).encode("utf-8")
    return Scrypt(salt=salt, length=32, n=params.n, r=params.r, p=params.p).derive(secret)


def seal_private_key(
    private_key: bytes, public_key: bytes, passphrase: str, params: ScryptParams = DEFAULT_SCRYPT_PARAMS
) -> str:
    """The file text of ``private_key`` sealed under ``passphrase``."""
    salt, nonce = os.urandom(16), os.urandom(12)
    aad = SEALED_HEADER.encode("ascii") + bytes(public_key)
    sealed = AESGCM(_key(passphrase, salt, params)).encrypt(nonce, bytes(private_key), aad)
    doc = {
        "kdf": "scrypt",
        "n": params.n,
        "r": params.r,
        "p": params.p,
        "salt": _b64(salt),
        "nonce": _b64(nonce),
        "public": _b64(public_key),
        "sealed": _b64(sealed),
    }
    return f"{SEALED_HEADER}\n{_b64(json.dumps(doc, separators=(',', ':')).encode('ascii'))}\n"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def is_sealed(text: str) -> bool:
    return text.lstrip().startswith(SEALED_HEADER)


def _doc(text: str) -> dict[str, Any]:  # (JSON values: each is checked where it is read)
    try:
        header, body = text.strip().splitlines()
        if header.strip() != SEALED_HEADER:
            raise ValueError
        doc = json.loads(base64.b64decode(body, validate=True))
        if not isinstance(doc, dict) or doc.get("kdf") != "scrypt":
            raise ValueError
        return doc
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise KeyFileError("the sealed identity is damaged") from None


def _field(doc: dict[str, Any], name: str) -> bytes:
    try:
        return base64.b64decode(doc[name], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error):
        raise KeyFileError("the sealed identity is damaged") from None


def sealed_public_key(text: str) -> bytes:
    """The public key stored in the clear beside the sealed private key."""
    return _field(_doc(text), "public")


def open_private_key(text: str, passphrase: str) -> bytes:
    """The private key; :class:`KeyFileError` for a wrong passphrase or a damaged file (the same error)."""
    doc = _doc(text)
    try:
        params = ScryptParams(int(doc["n"]), int(doc["r"]), int(doc["p"]))
        if (
            params.n < 2
            or params.n & (params.n - 1)
            or params.n > 2**22
            or not 1 <= params.r <= 64
            or not 1 <= params.p <= 16
        ):
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise KeyFileError("the sealed identity is damaged") from None
    public = _field(doc, "public")
    try:
        return AESGCM(_key(passphrase, _field(doc, "salt"), params)).decrypt(
            _field(doc, "nonce"), _field(doc, "sealed"), SEALED_HEADER.encode("ascii") + public
        )
    except (InvalidTag, ValueError):
        raise KeyFileError("wrong passphrase for the identity (or the sealed identity is damaged)") from None
