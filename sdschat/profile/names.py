"""Names of people and channels, and what an invite may say about the broker (no login, no local path)."""

from __future__ import annotations

import unicodedata
from urllib.parse import urlsplit

from .errors import ProfileError

__all__ = ["MAX_NAME", "valid_name", "public_broker"]

MAX_NAME = 40


def valid_name(name: str, what: str = "name") -> str:
    """A display or channel name: 1-40 printable characters, no leading/trailing space (NFC)."""
    name = unicodedata.normalize("NFC", name)
    if not name or name != name.strip() or len(name) > MAX_NAME:
        raise ProfileError(f"a {what} is 1 to {MAX_NAME} characters, without leading or trailing spaces")
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in name):
        raise ProfileError(f"a {what} cannot hold control or separator characters")
    return name


def public_broker(url: str) -> str:
    """``url`` without its login (user, password) and query (``?ca=`` names a file of this machine):
    ``scheme://host[:port]``, what an invite carries. ``""`` for no broker, or one that does not parse
    (an invite then names none: the joiner's profile decides)."""
    text = url.strip()
    if not text:
        return ""
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    if not parts.scheme or not host or "://" not in text:
        return ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")
