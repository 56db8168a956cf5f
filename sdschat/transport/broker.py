"""Finding a broker: a given URL, a local one on 1883, or an embedded amqtt.

amqtt notes (0.12.1):
- it speaks MQTT 3.1.1 only: an MQTT 5 CONNECT gets "unsupported protocol
  version" (MqttTransport's protocol="auto" falls back to 3.1.1), so there is
  no ``no_local`` and every publish is echoed to its sender;
- it upgrades QoS 0 publishes to QoS 1 for QoS 1 subscribers: keep publish and
  subscribe QoS equal;
- it logs a lot, at WARNING for ordinary events such as a refused protocol
  version; Python's last-resort handler would print that on stderr (over a
  TUI), so its loggers are silenced unless ``debug=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from .errors import TransportError
from .url import parse_broker_url

__all__ = [
    "EmbeddedBroker",
    "probe_mqtt",
    "resolve_broker",
    "run_broker",
    "quiet_broker_logging",
    "DEFAULT_LOCAL_HOST",
    "DEFAULT_LOCAL_PORT",
]

log = logging.getLogger("sdschat.transport.broker")

DEFAULT_LOCAL_HOST = "127.0.0.1"
DEFAULT_LOCAL_PORT = 1883
_NOISY_LOGGERS = ("amqtt", "transitions")


def quiet_broker_logging(debug: bool = False) -> None:
    """Silence amqtt's (and its state machine library's) logging unless debugging."""
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)


def _broker_config(host: str, port: int) -> dict[str, Any]:
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
        # Only anonymous auth: no $SYS publisher, no packet/event loggers.
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _quiet_dropped_clients(loop: asyncio.AbstractEventLoop) -> None:
    """A client that goes away in the middle of its CONNECT (one that tried MQTT 5 with a session expiry, which
    amqtt never answers, and moved on to 3.1.1) makes amqtt's connection callback raise ``OSError``; asyncio
    would print that traceback on stderr, over a window's screen. It is logged at debug level instead."""
    previous = loop.get_exception_handler()
    if getattr(previous, "_sdschat_quiet", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and "client_connected_cb" in str(context.get("message", "")):
            log.debug("embedded broker: a client left during its connect (%s)", exc)
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler._sdschat_quiet = True  # type: ignore[attr-defined]  # (installed once per loop)
    loop.set_exception_handler(handler)


class EmbeddedBroker:
    """An amqtt broker running in this process, on this asyncio loop.

    ``await EmbeddedBroker.start()`` binds a free loopback port (or the given
    one); ``url`` is what to give MqttTransport; ``await close()`` stops it.
    Usable as ``async with await EmbeddedBroker.start() as b:``.
    """

    def __init__(self, broker: Any, host: str, port: int) -> None:
        self._broker = broker
        self.host = host
        self.port = port
        self._closed = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"mqtt://{host}:{self.port}"

    @classmethod
    async def start(cls, host: str = DEFAULT_LOCAL_HOST, port: int = 0, *, debug: bool = False) -> EmbeddedBroker:
        """Start listening; ``port=0`` picks a free port. TransportError on failure."""
        quiet_broker_logging(debug)
        # imported lazily: ~0.2 s, only needed here
        from amqtt.broker import Broker  # type: ignore[import-untyped]  # amqtt ships no type information

        attempts = 5 if port == 0 else 1
        last: BaseException | None = None
        for _ in range(attempts):
            try:
                chosen = port or _free_port(host)
            except OSError as exc:
                raise TransportError(f"cannot start embedded MQTT broker on {host}: {exc.strerror or exc}") from None
            broker = Broker(_broker_config(host, chosen))
            try:
                await broker.start()
            except Exception as exc:  # amqtt wraps OSError in BrokerError
                last = exc
                continue
            log.debug("embedded broker listening on %s:%d", host, chosen)
            _quiet_dropped_clients(asyncio.get_running_loop())
            return cls(broker, host, chosen)
        cause = last.__cause__ if last is not None and last.__cause__ is not None else last
        reason = getattr(cause, "strerror", None) or str(cause)
        where = f"{host}:{port}" if port else host
        raise TransportError(f"cannot start embedded MQTT broker on {where}: {reason}")

    async def close(self) -> None:
        """Stop the broker (idempotent); connected clients see a disconnect."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self._broker.shutdown()

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> EmbeddedBroker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<EmbeddedBroker {self.url}{' closed' if self._closed else ''}>"


def _connect_packet(client_id: str) -> bytes:
    """A minimal MQTT 3.1.1 CONNECT (clean session, keepalive 10 s)."""
    cid = client_id.encode()
    var = b"\x00\x04MQTT\x04\x02\x00\x0a" + len(cid).to_bytes(2, "big") + cid
    assert len(var) < 128
    return bytes([0x10, len(var)]) + var


async def probe_mqtt(host: str, port: int, timeout: float = 0.3) -> bool:
    """True if an MQTT broker at host:port accepts an anonymous CONNECT within ``timeout``."""

    async def attempt() -> bool:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(_connect_packet(f"sdschat-probe-{os.urandom(4).hex()}"))
            await writer.drain()
            ack = await reader.readexactly(4)
            ok = ack[0] == 0x20 and ack[1] == 0x02 and ack[3] == 0x00
            if ok:
                writer.write(b"\xe0\x00")  # DISCONNECT
                with contextlib.suppress(OSError):
                    await writer.drain()
            return ok
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 0.1)

    try:
        return await asyncio.wait_for(attempt(), timeout)
    except (OSError, asyncio.IncompleteReadError, TimeoutError):
        return False


async def resolve_broker(
    url: str | None,
    *,
    probe_host: str = DEFAULT_LOCAL_HOST,
    probe_port: int = DEFAULT_LOCAL_PORT,
    probe_timeout: float = 0.3,
    embedded_host: str = DEFAULT_LOCAL_HOST,
    embedded_port: int = 0,
    debug: bool = False,
) -> tuple[str, EmbeddedBroker | None]:
    """Decide which broker to use: ``(url, embedded_broker_or_None)``.

    - ``url`` given: validated (TransportError if malformed) and returned as is.
    - ``url`` None: if an MQTT broker at ``probe_host:probe_port`` (default
      127.0.0.1:1883) accepts an anonymous CONNECT within ``probe_timeout``,
      use it; otherwise start an embedded amqtt broker on a free loopback port.
      The caller owns the returned broker and must ``await broker.close()``.
    """
    if url is not None:
        parse_broker_url(url)
        return url, None
    if await probe_mqtt(probe_host, probe_port, probe_timeout):
        host = f"[{probe_host}]" if ":" in probe_host else probe_host
        return f"mqtt://{host}:{probe_port}", None
    broker = await EmbeddedBroker.start(embedded_host, embedded_port, debug=debug)
    return broker.url, broker


async def run_broker(
    host: str = DEFAULT_LOCAL_HOST,
    port: int = DEFAULT_LOCAL_PORT,
    *,
    debug: bool = False,
    on_ready: Callable[[EmbeddedBroker], None] | None = None,
) -> None:
    """Serve an embedded broker until cancelled (for ``sdschat broker``).

    ``on_ready(broker)`` is called once it listens (its ``url`` tells the port
    when ``port=0``). Raises TransportError if it cannot listen.
    """
    broker = await EmbeddedBroker.start(host, port, debug=debug)
    try:
        if on_ready is not None:
            on_ready(broker)
        await asyncio.Event().wait()
    finally:
        await broker.close()
