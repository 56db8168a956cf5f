"""An asyncio MQTT client on top of paho-mqtt, driven by the event loop itself.

Threads: none of paho's. A connection attempt opens the socket and sends the
CONNECT in a worker thread (``asyncio.to_thread``: DNS, TCP and TLS handshakes
block); from then on the loop's selector watches the socket and calls paho's
``loop_read`` / ``loop_write`` / ``loop_misc`` (:mod:`.paho_loop`), so paho's
callbacks run on the loop thread and every message goes from the socket to the
handler, and from ``publish`` to the socket, without crossing threads. All
state (subscriptions, connection state, counters, the echo filter, message
delivery) lives on the loop thread.

Parts: :mod:`.paho_client` (one paho client per connection and its callbacks),
:mod:`.paho_loop` (its socket on the event loop), :mod:`.subscriptions`,
:mod:`.echo` (3.1.1 echo filter), :mod:`.stats`, :mod:`.sockets` (TCP_NODELAY).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import MQTTErrorCode

from .base import ConnectionState, Endpoint, MessageHandler
from .echo import EchoFilter
from .errors import TransportError
from .paho_client import (
    AttemptError,
    ClientSettings,
    Connack,
    LoopHandlers,
    attach,
    close_quietly,
    connect_blocking,
    driver_of,
    error_reason,
    make_client,
    negotiated,
    protocol_name,
)
from .sockets import set_tcp_nodelay
from .stats import TransportStats
from .subscriptions import Subscriptions
from .url import BrokerAddress, parse_broker_url

__all__ = ["MqttTransport", "TransportStats", "set_tcp_nodelay"]

log = logging.getLogger("sdschat.transport.mqtt")


class MqttTransport(Endpoint):
    """Publish and receive opaque bytes on MQTT topics, for asyncio code.

    ::

        t = MqttTransport("mqtt://127.0.0.1:1883")
        await t.start()                       # TransportError if unreachable
        await t.subscribe("sds/chan")         # the future resolves on SUBACK
        await t.publish("sds/chan", b"...")   # False if not connected (dropped)
        async for topic, payload in t.messages(): ...
        await t.stop()

    Parameters:
        url: ``mqtt://[user:pass@]host[:port]`` or ``mqtts://...`` (or a BrokerAddress).
        client_id: MQTT client id; random ``sdschat-<hex>`` if None.
        qos: QoS used for both publish and subscribe (keep them equal: amqtt
            upgrades QoS 0 publishes to QoS 1 for QoS 1 subscribers).
        protocol: ``"auto"`` (default: MQTT 5, falling back to 3.1.1 when the
            broker answers "unsupported protocol version", as amqtt does),
            ``"5"`` or ``"3.1.1"``.
        reconnect_min, reconnect_max: reconnect backoff in seconds; the wait
            doubles after each failed attempt up to the cap, and resets once
            connected.
        connect_timeout: seconds for TCP connect and for the CONNACK.
        keepalive: MQTT keepalive in seconds.
        suppress_echoes: do not deliver our own publishes back to us. With
            MQTT 5 this is the subscription's ``no_local`` flag (the broker
            never sends them). MQTT 3.1.1 has no such flag and the broker
            echoes every publish to its sender: the transport then drops an
            incoming frame whose topic and bytes equal one of its own recent
            publishes on a subscribed topic, once per publish (see
            ``echo_filter_active``). With ``suppress_echoes=False`` on 3.1.1
            the caller must filter its own echoes (``broker_echoes_own_publishes``).
        on_message: handler ``(topic, payload)`` called on the loop thread;
            if None, read messages with ``messages()`` / ``receive()``.
        ca_file: CA bundle for mqtts:// (alternatively ``?ca=`` in the URL).
        session_expiry_s: 0 (default): clean sessions, the broker forgets us on
            disconnect. Otherwise the broker keeps our session -- subscriptions,
            and with ``qos`` >= 1 what is published on them meanwhile -- this
            many seconds after we disconnect, and a connect with the same
            ``client_id`` (required) resumes it: what was sent while we were
            away arrives right after the CONNACK (``session_present`` says
            whether the broker had kept it). Brokers bound what they queue per
            session (mosquitto: ``max_queued_messages``, 1,000 by default).

    Connection state (``state``, ``add_state_listener``, ``state_changes()``):
    STOPPED -> CONNECTING -> CONNECTED; on loss DISCONNECTED, then CONNECTING
    for each retry, CONNECTED again (with all subscriptions re-made: sessions
    are clean). While not CONNECTED, ``publish`` drops and returns False.
    """

    def __init__(
        self,
        url: str | BrokerAddress,
        *,
        client_id: str | None = None,
        qos: int = 0,
        protocol: str | int = "auto",
        reconnect_min: float = 0.5,
        reconnect_max: float = 30.0,
        connect_timeout: float = 3.0,
        keepalive: int = 30,
        suppress_echoes: bool = True,
        on_message: MessageHandler | None = None,
        max_pending: int = 100_000,
        ca_file: str | None = None,
        session_expiry_s: int = 0,
    ) -> None:
        super().__init__(on_message=on_message, max_pending=max_pending)
        self.address = url if isinstance(url, BrokerAddress) else parse_broker_url(url, ca_file=ca_file)
        if qos not in (0, 1, 2):
            raise TransportError(f"invalid QoS {qos!r}: expected 0, 1 or 2")
        proto = protocol_name(protocol)
        if not 0 < reconnect_min <= reconnect_max:
            raise TransportError("reconnect backoff needs 0 < reconnect_min <= reconnect_max")
        if connect_timeout <= 0:
            raise TransportError("connect_timeout must be positive")
        if type(session_expiry_s) is not int or not 0 <= session_expiry_s < 2**32:
            raise TransportError(f"invalid session expiry {session_expiry_s!r}: whole seconds from 0 to 2^32 - 1")
        if session_expiry_s and not client_id:
            raise TransportError("a kept session needs a client id of its own (the broker finds the session by it)")
        self.protocol = proto
        self.client_id = client_id or f"sdschat-{os.urandom(6).hex()}"
        self.session_expiry_s = session_expiry_s
        #: whether the broker resumed a session it had kept for us, at the last connect
        self.session_present = False
        self.qos = qos
        self.reconnect_min = float(reconnect_min)
        self.reconnect_max = float(reconnect_max)
        self.connect_timeout = float(connect_timeout)
        self.keepalive = int(keepalive)
        self.suppress_echoes = suppress_echoes
        self.stats = TransportStats()
        #: protocol of the current/last connection: "5" or "3.1.1" (None before)
        self.negotiated_protocol: str | None = None

        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: paho.Client | None = None
        self._stopping = False
        self._connack: asyncio.Future[Connack] | None = None
        self._subs = Subscriptions()
        self._echoes = EchoFilter()
        self._supervisor: asyncio.Future[None] | None = None
        self._live = False  # current client has a successful CONNACK and no loss since
        self._lost = asyncio.Event()
        #: whether TCP_NODELAY could be set on the last socket (None before connecting)
        self.nodelay: bool | None = None

    # ------------------------------------------------------------ properties
    @property
    def echo_filter_active(self) -> bool:
        """True when own echoes are filtered by payload (3.1.1 + suppress_echoes)."""
        return self.suppress_echoes and self.negotiated_protocol == "3.1.1"

    @property
    def broker_echoes_own_publishes(self) -> bool:
        """True when the broker sends our own publishes back (no no_local)."""
        return self.negotiated_protocol == "3.1.1" or not self.suppress_echoes

    @property
    def topics(self) -> list[str]:
        return self._subs.topics

    def raw_socket(self) -> socket.socket | None:
        """The current TCP socket (for diagnostics and tests), or None."""
        client = self._client
        if client is None:
            return None
        sock = client.socket()
        return sock if isinstance(sock, socket.socket) else None

    # ------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Connect; raises TransportError if the broker is unreachable or refuses.

        After a successful start the transport reconnects by itself, with
        capped exponential backoff, until ``stop``.
        """
        if self._supervisor is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._open_queue()
        self._set_state(ConnectionState.CONNECTING, f"connecting to {self.address}")
        candidates = ["5", "3.1.1"] if self.protocol == "auto" else [self.protocol]
        try:
            for i, proto in enumerate(candidates):
                # an MQTT 3.1.1-only broker may not answer an MQTT 5 CONNECT that carries properties (amqtt
                # keeps silent on a session expiry): with a fallback left, wait half a second, not the whole
                # timeout (a slow broker then gets 3.1.1, whose kept session lasts as long as the broker says)
                probe = 0.5 if proto == "5" and self.session_expiry_s and i + 1 < len(candidates) else None
                try:
                    await self._attempt(proto, connack_timeout=probe)
                    break
                except AttemptError as exc:
                    if exc.kind in ("unsupported", "closed", "silent") and i + 1 < len(candidates):
                        log.debug("broker %s does not speak MQTT %s; trying %s", self.address, proto, candidates[i + 1])
                        continue
                    raise TransportError(exc.message(self.address)) from None
        except TransportError as exc:
            self._set_state(ConnectionState.STOPPED, str(exc))
            self._close_queue()
            raise
        except BaseException:
            self._set_state(ConnectionState.STOPPED, "start cancelled")
            self._close_queue()
            raise
        self._supervisor = asyncio.ensure_future(self._supervise())

    async def _attempt(self, proto: str, connack_timeout: float | None = None) -> None:
        """One connection attempt: TCP connect, CONNECT, wait for CONNACK.

        On success the new client is live (its socket watched by the loop). On
        failure everything is torn down and AttemptError says why.
        """
        assert self._loop is not None
        try:
            settings = ClientSettings(self.address, self.client_id, self.connect_timeout, self.session_expiry_s)
            client = make_client(settings, proto, self._loop_handlers())
        except TransportError as exc:
            raise AttemptError("config", str(exc)) from None
        self._client = client
        self._live = False
        self._connack = self._loop.create_future()
        connect = asyncio.to_thread(
            connect_blocking, client, self.address, proto, self.keepalive, self.session_expiry_s
        )
        connecting = asyncio.ensure_future(connect)
        try:
            await asyncio.shield(connecting)
        except (OSError, ValueError) as exc:
            await self._teardown(client)
            raise AttemptError("unreachable", error_reason(exc)) from None
        except BaseException:
            # cancelled (stop) while the blocking connect runs in its thread:
            # close whatever it opens once it returns
            connecting.add_done_callback(lambda _f: close_quietly(client))
            self._client = None
            raise
        if not attach(self._loop, client, self.address, self._loop_handlers()):
            await self._teardown(client)
            raise AttemptError("closed", "connection closed before the broker answered")
        try:
            result = await asyncio.wait_for(asyncio.shield(self._connack), connack_timeout or self.connect_timeout)
        except TimeoutError:
            await self._teardown(client)
            wait = connack_timeout or self.connect_timeout
            raise AttemptError(
                "silent" if connack_timeout else "unreachable", f"no MQTT answer within {wait:g} s"
            ) from None
        except BaseException:
            await self._teardown(client)
            raise
        if result.kind != "ok":
            await self._teardown(client)
            raise AttemptError(result.kind, result.reason)

    def _backoff(self, failures: int) -> float:
        wait: float = min(
            self.reconnect_max, self.reconnect_min * (2 ** min(failures, 30))
        )  # (int ** int is not typed)
        return wait

    async def _supervise(self) -> None:
        """Reconnect forever after a connection loss (runs until stop)."""
        proto = self.negotiated_protocol or ("5" if self.protocol == "auto" else self.protocol)
        while not self._stopping:
            await self._lost.wait()
            self._lost.clear()
            old = self._client
            if old is not None:
                await self._teardown(old)
            reason = self.last_state_change.detail or "connection lost"
            failures = 0
            while not self._stopping:
                delay = self._backoff(failures)
                self._set_state(ConnectionState.DISCONNECTED, f"{reason}; retrying in {delay:.1f} s")
                await asyncio.sleep(delay)
                self._set_state(ConnectionState.CONNECTING, f"reconnecting to {self.address}")
                try:
                    await self._attempt(proto)
                    break
                except AttemptError as exc:
                    failures += 1
                    if exc.kind == "unsupported" and self.protocol == "auto":
                        proto = "3.1.1" if proto == "5" else "5"
                    reason = exc.message(self.address)

    async def _teardown(self, client: paho.Client) -> None:
        if self._client is client:
            self._client = None
            self._live = False
        try:
            client.disconnect()  # queued: the loop writes it (and what was queued before), then paho closes
        except Exception:  # noqa: BLE001 - best effort
            pass
        driver = driver_of(client)
        try:
            if driver is not None and client.socket() is not None:
                await asyncio.wait_for(asyncio.shield(driver.closed), self.connect_timeout)
        except TimeoutError:  # the broker takes nothing more: close without the DISCONNECT
            pass
        finally:
            close_quietly(client)

    async def stop(self) -> None:
        """Disconnect (sending what is queued, then DISCONNECT); ends ``messages()`` iterators."""
        self._stopping = True
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
        client = self._client
        if client is not None:
            await self._teardown(client)
        self._lost.clear()
        self._subs.stop()
        self._echoes.clear()
        self._set_state(ConnectionState.STOPPED, "stopped")
        self._close_queue()

    async def __aenter__(self) -> MqttTransport:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --------------------------------------------------------- publish / sub
    async def publish(self, topic: str, payload: bytes) -> bool:
        """Publish ``payload`` on ``topic`` with the transport's QoS.

        Never blocks and never raises for connection problems: while not
        connected the frame is dropped and False is returned (the SDS layer
        above resends). True means handed to the connection, not delivered.
        """
        return self.publish_nowait(topic, payload)

    def publish_nowait(self, topic: str, payload: bytes) -> bool:
        """Synchronous form of :meth:`publish` (loop thread only)."""
        client = self._client
        if client is None or self.state is not ConnectionState.CONNECTED:
            self.stats.not_sent += 1
            return False
        data = bytes(payload)
        key = self._echoes.add(topic, data) if self.echo_filter_active and self._subs.echoes_back(topic) else None
        try:
            info = client.publish(topic, data, qos=self.qos)
        except ValueError as exc:  # bad topic / oversized payload: caller bug
            if key is not None:
                self._echoes.forget(key)
            raise TransportError(f"cannot publish on {topic!r}: {exc}") from None
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            if key is not None:
                self._echoes.forget(key)
            self.stats.not_sent += 1
            return False
        self.stats.published += 1
        return True

    def subscribe(self, topic: str) -> asyncio.Future[bool]:
        """Subscribe to ``topic`` now and after every reconnect.

        Returns a future resolving to True on the broker's SUBACK (False if
        the broker refused); awaiting it is optional. Call from the loop.
        """
        if not isinstance(topic, str) or not topic:
            raise TransportError(f"invalid topic {topic!r}")
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self._subs.add(topic, fut) and self.state is ConnectionState.CONNECTED:
            self._send_subscribe([topic])
        return fut

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic`` (no-op if not subscribed)."""
        if not self._subs.remove(topic):
            return
        client = self._client
        if client is not None and self.state is ConnectionState.CONNECTED:
            client.unsubscribe(topic)

    def _send_subscribe(self, topics: list[str]) -> None:
        client = self._client
        if client is None or not topics:
            return
        req = self._subs.request(topics, self.negotiated_protocol, self.qos, self.suppress_echoes)
        try:
            rc, mid = client.subscribe(req)
        except ValueError as exc:
            log.warning("cannot subscribe to %s: %s", topics, exc)
            self._subs.refuse(topics)
            return
        if rc == MQTTErrorCode.MQTT_ERR_SUCCESS and mid is not None:
            self._subs.sent(mid, topics)
        # else: not connected any more; re-sent on the next CONNACK

    # ----------------------------------------------------------- paho events
    def _loop_handlers(self) -> LoopHandlers:
        """This transport's handlers for the events of its paho clients."""
        return LoopHandlers(
            socket_open=self._socket_opened,
            connack=self._on_connack,
            lost=self._on_connection_lost,
            suback=self._on_suback,
            incoming=self._on_incoming,
        )

    def _socket_opened(self, sock: Any) -> None:
        """In the connecting thread, before the CONNECT is written."""
        self.nodelay = set_tcp_nodelay(sock)

    # ------------------------------------------------ loop-thread handlers
    def _current(self, client: paho.Client) -> bool:
        return client is self._client and not self._stopping

    def _on_connack(self, client: paho.Client, result: Connack) -> None:
        if not self._current(client):
            return
        first = self._connack
        if first is not None and not first.done():
            first.set_result(result)
        if result.kind != "ok":
            return
        self._live = True
        self.session_present = result.session_present
        self.negotiated_protocol = negotiated(client)
        self.stats.connects += 1
        self._subs.connection_changed()
        self._set_state(ConnectionState.CONNECTED, f"connected to {self.address} (MQTT {self.negotiated_protocol})")
        self._send_subscribe(self._subs.topics)

    def _on_connection_lost(self, client: paho.Client, reason: str) -> None:
        if not self._current(client):
            return
        first = self._connack
        if first is not None and not first.done():
            first.set_result(Connack("closed", "connection closed before the broker answered"))
        if not self._live:
            return
        self._live = False
        self._subs.connection_changed()
        self.stats.disconnects += 1
        self._set_state(ConnectionState.DISCONNECTED, reason)
        self._lost.set()

    def _on_suback(self, client: paho.Client, mid: int, ok: bool) -> None:
        if not self._current(client):
            return
        self._subs.suback(mid, ok)

    def _on_incoming(self, client: paho.Client, topic: str, payload: bytes) -> None:
        if not self._current(client):
            return
        if self.echo_filter_active and self._echoes.consume(topic, payload):
            self.stats.echoes_suppressed += 1
            return
        self.stats.received += 1
        self._deliver(topic, payload)
