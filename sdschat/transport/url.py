"""Broker URLs: ``mqtt://[user[:password]@]host[:port]`` and ``mqtts://...``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlsplit

from .errors import TransportError

__all__ = ["BrokerAddress", "parse_broker_url", "DEFAULT_PORTS"]

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}


@dataclasses.dataclass(frozen=True)
class BrokerAddress:
    """A parsed broker URL.

    ``str(address)`` is ``host:port`` (what error messages show); ``url`` is the
    full URL with the password masked, safe to show or log; ``full_url`` keeps it;
    ``public_url`` has neither login nor CA file (what an invite may carry).
    """

    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    ca_file: str | None = None

    @property
    def scheme(self) -> str:
        return "mqtts" if self.tls else "mqtt"

    def _url(self, password: str | None) -> str:
        auth = ""
        if self.username is not None:
            auth = quote(self.username, safe="")
            if password is not None:
                auth += ":" + password
            auth += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?ca={quote(self.ca_file)}" if self.ca_file else ""
        return f"{self.scheme}://{auth}{host}:{self.port}{query}"

    @property
    def url(self) -> str:
        """The URL with any password replaced by ``***``."""
        return self._url("***" if self.password is not None else None)

    @property
    def public_url(self) -> str:
        """The URL without the login (user, password) and the CA file: what another machine can be told."""
        return dataclasses.replace(self, username=None, password=None, ca_file=None)._url(None)

    @property
    def private(self) -> bool:
        """Whether the URL holds what belongs to this user or machine only: a login, or a CA file's path."""
        return self.username is not None or self.password is not None or self.ca_file is not None

    @property
    def full_url(self) -> str:
        """The URL including the password (do not log this)."""
        pw = quote(self.password, safe="") if self.password is not None else None
        return self._url(pw)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_broker_url(url: str, *, ca_file: str | None = None) -> BrokerAddress:
    """Parse a broker URL, raising :class:`TransportError` on anything malformed.

    Supported forms::

        mqtt://host               port 1883
        mqtt://host:1884
        mqtts://host              TLS, port 8883, system CA store
        mqtts://host?ca=/path/ca.pem   TLS with a CA file (or pass ca_file=)
        mqtt://user:pa%40ss@host  credentials; percent-escapes are decoded
        mqtt://[::1]:1883         IPv6 literal
    """
    if not isinstance(url, str):
        raise TransportError(f"invalid broker URL {url!r}: expected a string")
    text = url.strip()
    shown = _mask(text)

    def bad(reason: str) -> TransportError:
        return TransportError(f"invalid broker URL {shown!r}: {reason}")

    parts, scheme = _split(text, bad)
    host, port = _host_port(parts, scheme, bad)
    ca = _ca_file(parts, scheme, ca_file, bad)
    username, password = _credentials(parts, bad)
    return BrokerAddress(
        host=host,
        port=port,
        tls=scheme == "mqtts",
        username=username,
        password=password,
        ca_file=ca,
    )


_Bad = Callable[[str], TransportError]


def _split(text: str, bad: _Bad) -> tuple[SplitResult, str]:
    """The URL's parts and its lower-case scheme, refusing anything but ``scheme://netloc[/][?query]``."""
    if not text:
        raise TransportError("invalid broker URL '': empty")
    if any(c.isspace() for c in text):
        raise bad("contains whitespace")
    if "://" not in text:
        raise bad("expected mqtt://host[:port] or mqtts://host[:port]")
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise bad(str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise bad(f"unsupported scheme {parts.scheme + '://'!r} (use mqtt:// or mqtts://)")
    if parts.path not in ("", "/"):
        raise bad(f"unexpected path {parts.path!r}")
    if parts.fragment:
        raise bad("unexpected fragment")
    return parts, scheme


def _host_port(parts: SplitResult, scheme: str, bad: _Bad) -> tuple[str, int]:
    """The host and the port (the scheme's default when none is given)."""
    host = parts.hostname
    if not host:
        raise bad("missing host")
    try:
        port = parts.port
    except ValueError:
        raise bad("port must be a number from 1 to 65535") from None
    if port is None:
        netloc_host = parts.netloc.rpartition("@")[2]
        if netloc_host.endswith(":"):
            raise bad("empty port")
        port = DEFAULT_PORTS[scheme]
    if not 1 <= port <= 65535:
        raise bad("port must be a number from 1 to 65535")
    return host, port


def _ca_file(parts: SplitResult, scheme: str, ca_file: str | None, bad: _Bad) -> str | None:
    """The CA file from ``?ca=`` or the argument (they must agree); only for mqtts://."""
    query_ca: str | None = None
    if parts.query:
        try:
            query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise bad("malformed query string") from None
        unknown = sorted(set(query) - {"ca"})
        if unknown:
            raise bad(f"unknown parameter {unknown[0]!r} (only 'ca' is supported)")
        values = query.get("ca", [])
        if len(values) != 1 or not values[0]:
            raise bad("'ca' needs exactly one non-empty path")
        query_ca = values[0]
    if ca_file is not None and query_ca is not None and ca_file != query_ca:
        raise bad("CA file given both in the URL and as an argument")
    ca = ca_file or query_ca
    if ca and scheme != "mqtts":
        raise bad("a CA file needs mqtts://")
    return ca


def _credentials(parts: SplitResult, bad: _Bad) -> tuple[str | None, str | None]:
    """User name and password, percent-escapes decoded."""
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    if username == "" and password is None:
        raise bad("empty user name before '@'")
    return username, password


def _mask(text: str) -> str:
    """Hide a password in a URL for error messages."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        cred, _, hostpart = netloc.rpartition("@")
        if ":" in cred:
            cred = cred.split(":", 1)[0] + ":***"
        netloc = f"{cred}@{hostpart}"
    return f"{scheme}://{netloc}{slash}{tail}"
