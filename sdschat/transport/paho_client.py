"""The paho-mqtt side of :class:`~.mqtt.MqttTransport`: building one client per connection.

paho runs no thread of its own: :func:`connect_blocking` (in a worker thread) opens the socket and sends
the CONNECT, then :func:`attach` hands the socket to the asyncio loop (a :class:`~.paho_loop.LoopDriver`)
and wires paho's callbacks, which from then on run on the loop thread and call the transport's
:class:`LoopHandlers` directly. Also here: the protocol names, the CONNACK outcome of an attempt and
one-line reasons for connection errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from .errors import TransportError
from .paho_loop import LoopDriver
from .url import BrokerAddress

__all__ = [
    "AttemptError",
    "ClientSettings",
    "Connack",
    "LoopHandlers",
    "attach",
    "close_quietly",
    "connect_blocking",
    "driver_of",
    "make_client",
    "error_reason",
    "negotiated",
    "protocol_name",
]

log = logging.getLogger("sdschat.transport.mqtt")

_PROTOCOLS = {
    "auto": "auto",
    "5": "5",
    "5.0": "5",
    "v5": "5",
    "3.1.1": "3.1.1",
    "311": "3.1.1",
    "v311": "3.1.1",
}
_PAHO_PROTOCOL = {"5": MQTTProtocolVersion.MQTTv5, "3.1.1": MQTTProtocolVersion.MQTTv311}
# CONNACK reason codes meaning "I do not speak this protocol version"
# (v5: 0x84; a v3 broker's return code 1 is mapped to 0x84 by paho as well).
_UNSUPPORTED_PROTOCOL = {0x84, 1}


def protocol_name(protocol: str | int) -> str:
    """``"auto"``, ``"5"`` or ``"3.1.1"`` for any accepted spelling; TransportError otherwise."""
    proto = {5: "5", 4: "3.1.1"}.get(protocol, protocol) if isinstance(protocol, int) else protocol
    if not isinstance(proto, str) or proto.lower() not in _PROTOCOLS:
        raise TransportError(f"invalid MQTT protocol {protocol!r}: expected 'auto', '5' or '3.1.1'")
    return _PROTOCOLS[proto.lower()]


def negotiated(client: paho.Client) -> str:
    """The protocol a connected client speaks: ``"5"`` or ``"3.1.1"``."""
    return "5" if client.protocol == MQTTProtocolVersion.MQTTv5 else "3.1.1"


class _PahoLog:
    """paho logger shim: paho logs socket errors at ERROR, which the connection
    state already reports; demote everything to DEBUG so nothing reaches a
    terminal unless debugging is on."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def log(self, level: int, msg: str, *args: Any) -> None:
        if self._logger.isEnabledFor(logging.DEBUG):
            self._logger.debug(msg, *args)


class Connack:
    """The broker's answer to one CONNECT."""

    __slots__ = ("kind", "reason", "session_present")

    def __init__(self, kind: str, reason: str, session_present: bool = False) -> None:
        self.kind = kind  # "ok" | "refused" | "unsupported" | "closed"
        self.reason = reason
        #: the broker resumed a session it kept for this client id (what was sent meanwhile follows)
        self.session_present = session_present


class AttemptError(Exception):
    """Why one connection attempt failed (kind: unreachable/refused/unsupported/closed/config)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason

    def message(self, address: BrokerAddress) -> str:
        if self.kind in ("unreachable", "closed"):
            return f"cannot reach MQTT broker at {address}: {self.reason}"
        if self.kind in ("refused", "unsupported"):
            return f"MQTT broker at {address} refused the connection: {self.reason}"
        return self.reason


def error_reason(exc: BaseException) -> str:
    """A one-line reason for a connection error."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "connection timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


@dataclasses.dataclass(frozen=True)
class LoopHandlers:
    """What the transport does for a client's events. ``socket_open`` runs in the connecting thread, the rest on
    the loop (called by paho from inside the loop's read, write and keepalive steps)."""

    socket_open: Callable[[Any], None]
    connack: Callable[[paho.Client, Connack], None]
    lost: Callable[[paho.Client, str], None]
    suback: Callable[[paho.Client, int, bool], None]
    incoming: Callable[[paho.Client, str, bytes], None]


@dataclasses.dataclass(frozen=True)
class ClientSettings:
    """What every client of one transport shares."""

    address: BrokerAddress
    client_id: str
    connect_timeout: float
    #: seconds the broker keeps the session (subscriptions, QoS 1 messages) after a disconnect; 0: clean sessions
    session_expiry_s: int = 0


def make_client(settings: ClientSettings, proto: str, handlers: LoopHandlers) -> paho.Client:
    """A fresh paho client for one connection (reconnects make a new one)."""
    address = settings.address
    client = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=settings.client_id,
        protocol=_PAHO_PROTOCOL[proto],
        clean_session=None if proto == "5" else not settings.session_expiry_s,
        # we reconnect ourselves (cancellable waits, reasons for the UI);
        # this also stops paho's own 3.1.1 -> 3.1 downgrade
        reconnect_on_failure=False,
    )
    client.suppress_exceptions = True
    client.enable_logger(_PahoLog(logging.getLogger("sdschat.transport.paho")))  # type: ignore[arg-type]
    client.connect_timeout = settings.connect_timeout
    # QoS>0 publishes wait in paho's queue while in flight; bound it.
    client.max_queued_messages_set(10_000)
    if address.username is not None:
        client.username_pw_set(address.username, address.password)
    if address.tls:
        try:
            ctx = ssl.create_default_context(cafile=address.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"cannot use CA file {address.ca_file!r}: {error_reason(exc)}") from None
        client.tls_set_context(ctx)

    # the only callback set before attach(): it runs in the connecting thread
    def on_socket_open(client: paho.Client, userdata: Any, sock: Any) -> None:
        handlers.socket_open(sock)

    client.on_socket_open = on_socket_open
    return client


def attach(
    loop: asyncio.AbstractEventLoop, client: paho.Client, address: BrokerAddress, handlers: LoopHandlers
) -> bool:
    """Run a client whose CONNECT is sent on ``loop`` (loop thread): its socket's I/O, keepalive and callbacks.

    False if paho already closed the socket (the connecting thread could not send the CONNECT).
    """
    driver = LoopDriver(loop, client, lambda exc: _unexpected(client, handlers, exc))
    client.user_data_set(driver)
    _bridge(client, address, handlers)
    return driver.attach()


def driver_of(client: paho.Client) -> LoopDriver | None:
    """The loop driver :func:`attach` gave ``client`` (None before)."""
    driver = client.user_data_get()
    return driver if isinstance(driver, LoopDriver) else None


def _unexpected(client: paho.Client, handlers: LoopHandlers, exc: Exception) -> None:
    handlers.lost(client, f"MQTT network loop failed: {error_reason(exc)}")


def _bridge(client: paho.Client, address: BrokerAddress, handlers: LoopHandlers) -> None:
    """Set the client's event callbacks: each calls its handler (paho calls them on the loop thread).

    paho swallows what a callback raises (and would log it at debug level only): a handler's bug is logged here.
    """

    def on_connect(client: paho.Client, userdata: Any, flags: Any, code: Any, props: Any) -> None:
        if not code.is_failure:
            result = Connack("ok", "", bool(getattr(flags, "session_present", False)))
        elif code.value in _UNSUPPORTED_PROTOCOL:
            result = Connack("unsupported", str(code).lower())
        else:
            result = Connack("refused", str(code).lower())
        _call(handlers.connack, client, result)

    def on_disconnect(client: paho.Client, userdata: Any, flags: Any, code: Any, props: Any) -> None:
        _call(handlers.lost, client, f"connection to {address} lost")

    def on_subscribe(client: paho.Client, userdata: Any, mid: int, reasons: Any, props: Any) -> None:
        ok = all(not getattr(rc, "is_failure", False) for rc in reasons)
        _call(handlers.suback, client, mid, ok)

    def on_message(client: paho.Client, userdata: Any, msg: paho.MQTTMessage) -> None:
        raw = msg._topic  # bytes; .topic would raise on invalid UTF-8
        topic = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        _call(handlers.incoming, client, topic, msg.payload)

    client.on_connect = on_connect
    client.on_disconnect = on_disconnect
    client.on_subscribe = on_subscribe
    client.on_message = on_message


def _call(handler: Callable[..., None], *args: Any) -> None:
    try:
        handler(*args)
    except Exception:
        log.exception("MQTT event handler %s raised", getattr(handler, "__name__", handler))


def connect_blocking(
    client: paho.Client, address: BrokerAddress, proto: str, keepalive: int, session_expiry_s: int = 0
) -> None:
    """TCP connect and send CONNECT (blocks: run it in a thread). With ``session_expiry_s`` the session is
    resumed if the broker kept it, and kept that long after we disconnect (MQTT 5: Session Expiry Interval;
    3.1.1: clean session off, which the broker keeps as long as its own settings say)."""
    if proto == "5":
        if session_expiry_s:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]  # paho's: not annotated
            props.SessionExpiryInterval = session_expiry_s
            client.connect(address.host, address.port, keepalive, clean_start=False, properties=props)
        else:
            client.connect(address.host, address.port, keepalive, clean_start=True)
    else:
        client.connect(address.host, address.port, keepalive)


def close_quietly(client: paho.Client) -> None:
    """Unwatch a client's socket and close it (whatever paho's state)."""
    driver = driver_of(client)
    if driver is not None:
        driver.detach()
        client.user_data_set(None)  # the driver holds the client: no cycle left behind
    try:
        sock = client.socket()
        if sock is not None:
            sock.close()
    except Exception:  # noqa: BLE001
        pass
