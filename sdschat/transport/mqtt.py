"""An asyncio MQTT client on top of paho-mqtt's threaded network loop.

Threads: paho runs its network loop in its own thread (``loop_start``). Every
paho callback does nothing but hop onto the asyncio loop with
``loop.call_soon_threadsafe``; all state (subscriptions, connection state,
counters, the echo filter, message delivery) lives on the loop thread.
``client.publish`` / ``client.subscribe`` are called from the loop thread,
which paho supports (it queues the packet and wakes its thread).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import ssl
from collections import Counter, deque
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.subscribeoptions import SubscribeOptions

from .base import ConnectionState, Endpoint, MessageHandler
from .errors import TransportError
from .url import BrokerAddress, parse_broker_url

__all__ = ["MqttTransport", "TransportStats", "set_tcp_nodelay"]

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


def set_tcp_nodelay(sock: Any) -> bool:
    """Disable Nagle on a TCP socket; returns whether it could be set.

    paho-mqtt does not do this itself, and with Nagle on, a small QoS 0
    publish waits for the previous segment's ACK: ~13 ms p50 instead of ~0.25 ms
    on loopback.
    """
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return True
    except (OSError, AttributeError):
        return False


@dataclasses.dataclass
class TransportStats:
    """Counters of one MqttTransport (loop thread only)."""

    published: int = 0  #: handed to the broker connection
    not_sent: int = 0  #: publish() returned False (disconnected, stopped, queue full)
    received: int = 0  #: delivered to the consumer
    echoes_suppressed: int = 0  #: own publishes echoed by a 3.1.1 broker, dropped
    connects: int = 0  #: successful CONNACKs (1 + number of reconnects)
    disconnects: int = 0  #: connection losses seen


class _EchoFilter:
    """Recognise our own publishes when the broker echoes them (MQTT 3.1.1).

    Remembers a hash of (topic, payload) of each recent publish on a topic we
    are subscribed to (only those come back), with multiplicity; an incoming
    frame that matches one consumes it. Payloads are sealed envelopes with
    random nonces, so another participant sending the very same bytes only
    happens when it re-broadcasts *our* frame, which we already have; and as
    each publish consumes at most one match, the peer's copy still arrives.
    Bounded: the oldest entries are forgotten first (e.g. echoes lost by QoS 0).
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._counts: Counter[int] = Counter()
        self._order: deque[int] = deque()

    def add(self, topic: str, payload: bytes) -> int:
        key = hash((topic, payload))
        self._counts[key] += 1
        self._order.append(key)
        if len(self._order) > self._capacity:
            self._discard(self._order.popleft())
        return key

    def _discard(self, key: int) -> None:
        n = self._counts[key] - 1
        if n > 0:
            self._counts[key] = n
        else:
            self._counts.pop(key, None)

    def forget(self, key: int) -> None:
        try:
            self._order.remove(key)
        except ValueError:
            return
        self._discard(key)

    def consume(self, topic: str, payload: bytes) -> bool:
        key = hash((topic, payload))
        if key not in self._counts:
            return False
        self.forget(key)
        return True

    def clear(self) -> None:
        self._counts.clear()
        self._order.clear()


class _PahoLog:
    """paho logger shim: paho logs socket errors at ERROR, which the connection
    state already reports; demote everything to DEBUG so nothing reaches a
    terminal unless debugging is on."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def log(self, level: int, msg: str, *args: Any) -> None:
        if self._logger.isEnabledFor(logging.DEBUG):
            self._logger.debug(msg, *args)


class _Connack:
    __slots__ = ("kind", "reason")

    def __init__(self, kind: str, reason: str) -> None:
        self.kind = kind  # "ok" | "refused" | "unsupported" | "closed"
        self.reason = reason


class _AttemptError(Exception):
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


def _reason(exc: BaseException) -> str:
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
    ) -> None:
        super().__init__(on_message=on_message, max_pending=max_pending)
        self.address = url if isinstance(url, BrokerAddress) else parse_broker_url(url, ca_file=ca_file)
        if qos not in (0, 1, 2):
            raise TransportError(f"invalid QoS {qos!r}: expected 0, 1 or 2")
        proto = {5: "5", 4: "3.1.1"}.get(protocol, protocol) if isinstance(protocol, int) else protocol
        if not isinstance(proto, str) or proto.lower() not in _PROTOCOLS:
            raise TransportError(f"invalid MQTT protocol {protocol!r}: expected 'auto', '5' or '3.1.1'")
        if not 0 < reconnect_min <= reconnect_max:
            raise TransportError("reconnect backoff needs 0 < reconnect_min <= reconnect_max")
        if connect_timeout <= 0:
            raise TransportError("connect_timeout must be positive")
        self.protocol = _PROTOCOLS[proto.lower()]
        self.client_id = client_id or f"sdschat-{os.urandom(6).hex()}"
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
        self._connack: asyncio.Future[_Connack] | None = None
        self._topics: dict[str, None] = {}  # insertion-ordered set
        self._acked: set[str] = set()
        self._waiters: dict[str, list[asyncio.Future[bool]]] = {}
        self._pending_mids: dict[int, list[str]] = {}
        self._echoes = _EchoFilter()
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
        return list(self._topics)

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
                try:
                    await self._attempt(proto)
                    break
                except _AttemptError as exc:
                    if exc.kind in ("unsupported", "closed") and i + 1 < len(candidates):
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

    async def _attempt(self, proto: str) -> None:
        """One connection attempt: TCP connect, CONNECT, wait for CONNACK.

        On success the new client is live (its network thread running). On
        failure everything is torn down and _AttemptError says why.
        """
        assert self._loop is not None
        try:
            client = self._make_client(proto)
        except TransportError as exc:
            raise _AttemptError("config", str(exc)) from None
        self._client = client
        self._live = False
        self._connack = self._loop.create_future()
        connecting = asyncio.ensure_future(asyncio.to_thread(self._blocking_connect, client, proto))
        try:
            await asyncio.shield(connecting)
        except (OSError, ValueError) as exc:
            await self._teardown(client)
            raise _AttemptError("unreachable", _reason(exc)) from None
        except BaseException:
            # cancelled (stop) while the blocking connect runs in its thread:
            # close whatever it opens once it returns
            connecting.add_done_callback(lambda _f: _close_quietly(client))
            self._client = None
            raise
        client.loop_start()
        try:
            result = await asyncio.wait_for(asyncio.shield(self._connack), self.connect_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            await self._teardown(client)
            raise _AttemptError("unreachable", f"no MQTT answer within {self.connect_timeout:g} s") from None
        except BaseException:
            await self._teardown(client)
            raise
        if result.kind != "ok":
            await self._teardown(client)
            raise _AttemptError(result.kind, result.reason)

    def _blocking_connect(self, client: paho.Client, proto: str) -> None:
        if proto == "5":
            client.connect(self.address.host, self.address.port, self.keepalive, clean_start=True)
        else:
            client.connect(self.address.host, self.address.port, self.keepalive)

    def _backoff(self, failures: int) -> float:
        return min(self.reconnect_max, self.reconnect_min * (2 ** min(failures, 30)))

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
                except _AttemptError as exc:
                    failures += 1
                    if exc.kind == "unsupported" and self.protocol == "auto":
                        proto = "3.1.1" if proto == "5" else "5"
                    reason = exc.message(self.address)

    async def _teardown(self, client: paho.Client) -> None:
        if self._client is client:
            self._client = None
            self._live = False
        try:
            client.disconnect()
        except Exception:  # noqa: BLE001 - best effort
            pass
        await asyncio.to_thread(client.loop_stop)
        _close_quietly(client)

    async def stop(self) -> None:
        """Disconnect and stop the network thread; ends ``messages()`` iterators."""
        self._stopping = True
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
        client = self._client
        if client is not None:
            await self._teardown(client)
        self._lost.clear()
        self._acked.clear()
        self._pending_mids.clear()
        for futs in self._waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.cancel()
        self._waiters.clear()
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
        key = self._echoes.add(topic, data) if self.echo_filter_active and self._echoes_back(topic) else None
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

    def _echoes_back(self, topic: str) -> bool:
        """Will the broker send a publish on ``topic`` back to us?"""
        if topic in self._topics:
            return True
        return any(("+" in sub or "#" in sub) and paho.topic_matches_sub(sub, topic) for sub in self._topics)

    def subscribe(self, topic: str) -> asyncio.Future[bool]:
        """Subscribe to ``topic`` now and after every reconnect.

        Returns a future resolving to True on the broker's SUBACK (False if
        the broker refused); awaiting it is optional. Call from the loop.
        """
        if not isinstance(topic, str) or not topic:
            raise TransportError(f"invalid topic {topic!r}")
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if topic in self._acked:
            fut.set_result(True)
            return fut
        self._waiters.setdefault(topic, []).append(fut)
        if topic not in self._topics:
            self._topics[topic] = None
            if self.state is ConnectionState.CONNECTED:
                self._send_subscribe([topic])
        return fut

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic`` (no-op if not subscribed)."""
        if topic not in self._topics:
            return
        del self._topics[topic]
        self._acked.discard(topic)
        for fut in self._waiters.pop(topic, []):
            if not fut.done():
                fut.cancel()
        client = self._client
        if client is not None and self.state is ConnectionState.CONNECTED:
            client.unsubscribe(topic)

    def _send_subscribe(self, topics: list[str]) -> None:
        client = self._client
        if client is None or not topics:
            return
        if self.negotiated_protocol == "5":
            opts = SubscribeOptions(qos=self.qos, noLocal=self.suppress_echoes)
            req: list[Any] = [(t, opts) for t in topics]
        else:
            req = [(t, self.qos) for t in topics]
        try:
            rc, mid = client.subscribe(req)
        except ValueError as exc:
            log.warning("cannot subscribe to %s: %s", topics, exc)
            for t in topics:
                self._topics.pop(t, None)
                self._resolve(t, False)
            return
        if rc == MQTTErrorCode.MQTT_ERR_SUCCESS and mid is not None:
            self._pending_mids[mid] = topics
        # else: not connected any more; re-sent on the next CONNACK

    def _resolve(self, topic: str, ok: bool) -> None:
        for fut in self._waiters.pop(topic, []):
            if not fut.done():
                fut.set_result(ok)

    # ---------------------------------------------------- paho (its thread)
    def _make_client(self, proto: str) -> paho.Client:
        """A fresh paho client for one connection (reconnects make a new one)."""
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=_PAHO_PROTOCOL[proto],
            clean_session=None if proto == "5" else True,
            # we reconnect ourselves (cancellable waits, reasons for the UI);
            # this also stops paho's own 3.1.1 -> 3.1 downgrade
            reconnect_on_failure=False,
        )
        client.suppress_exceptions = True
        client.enable_logger(_PahoLog(logging.getLogger("sdschat.transport.paho")))  # type: ignore[arg-type]
        client.connect_timeout = self.connect_timeout
        # QoS>0 publishes wait in paho's queue while in flight; bound it.
        client.max_queued_messages_set(10_000)
        if self.address.username is not None:
            client.username_pw_set(self.address.username, self.address.password)
        if self.address.tls:
            try:
                ctx = ssl.create_default_context(cafile=self.address.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise TransportError(f"cannot use CA file {self.address.ca_file!r}: {_reason(exc)}") from None
            client.tls_set_context(ctx)
        client.on_socket_open = self._cb_socket_open
        client.on_connect = self._cb_connect
        client.on_disconnect = self._cb_disconnect
        client.on_subscribe = self._cb_subscribe
        client.on_message = self._cb_message
        # Nothing may escape paho's thread as a traceback on stderr.
        loop_forever = client.loop_forever

        def guarded_loop_forever(*args: Any, **kwargs: Any) -> Any:
            try:
                return loop_forever(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001
                log.debug("MQTT network thread failed", exc_info=True)
                self._post(self._on_connection_lost, client, f"network thread failed: {_reason(exc)}")
                return MQTTErrorCode.MQTT_ERR_UNKNOWN

        client.loop_forever = guarded_loop_forever  # type: ignore[method-assign]
        return client

    def _post(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the asyncio loop (from any thread)."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closed: the application is gone
            pass

    def _cb_socket_open(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        self.nodelay = set_tcp_nodelay(sock)

    def _cb_connect(self, client: paho.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if not reason.is_failure:
            result = _Connack("ok", "")
        elif reason.value in _UNSUPPORTED_PROTOCOL:
            result = _Connack("unsupported", str(reason).lower())
        else:
            result = _Connack("refused", str(reason).lower())
        self._post(self._on_connack, client, result)

    def _cb_disconnect(self, client: paho.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self._post(self._on_connection_lost, client, f"connection to {self.address} lost")

    def _cb_subscribe(self, client: paho.Client, userdata: Any, mid: int, reasons: Any, props: Any) -> None:
        ok = all(not getattr(rc, "is_failure", False) for rc in reasons)
        self._post(self._on_suback, client, mid, ok)

    def _cb_message(self, client: paho.Client, userdata: Any, msg: paho.MQTTMessage) -> None:
        raw = msg._topic  # bytes; .topic would raise on invalid UTF-8
        topic = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        self._post(self._on_incoming, client, topic, msg.payload)

    # ------------------------------------------------ loop-thread handlers
    def _current(self, client: paho.Client) -> bool:
        return client is self._client and not self._stopping

    def _on_connack(self, client: paho.Client, result: _Connack) -> None:
        if not self._current(client):
            return
        first = self._connack
        if first is not None and not first.done():
            first.set_result(result)
        if result.kind != "ok":
            return
        self._live = True
        self.negotiated_protocol = "5" if client.protocol == MQTTProtocolVersion.MQTTv5 else "3.1.1"
        self.stats.connects += 1
        self._acked.clear()
        self._pending_mids.clear()
        self._set_state(ConnectionState.CONNECTED, f"connected to {self.address} (MQTT {self.negotiated_protocol})")
        self._send_subscribe(list(self._topics))

    def _on_connection_lost(self, client: paho.Client, reason: str) -> None:
        if not self._current(client):
            return
        first = self._connack
        if first is not None and not first.done():
            first.set_result(_Connack("closed", "connection closed before the broker answered"))
        if not self._live:
            return
        self._live = False
        self._acked.clear()
        self._pending_mids.clear()
        self.stats.disconnects += 1
        self._set_state(ConnectionState.DISCONNECTED, reason)
        self._lost.set()

    def _on_suback(self, client: paho.Client, mid: int, ok: bool) -> None:
        if not self._current(client):
            return
        for topic in self._pending_mids.pop(mid, []):
            if topic not in self._topics:
                continue
            if ok:
                self._acked.add(topic)
            else:
                log.warning("broker refused subscription to %r", topic)
            self._resolve(topic, ok)

    def _on_incoming(self, client: paho.Client, topic: str, payload: bytes) -> None:
        if not self._current(client):
            return
        if self.echo_filter_active and self._echoes.consume(topic, payload):
            self.stats.echoes_suppressed += 1
            return
        self.stats.received += 1
        self._deliver(topic, payload)


def _close_quietly(client: paho.Client) -> None:
    """Close a client's sockets and break the loop_forever reference cycle."""
    client.__dict__.pop("loop_forever", None)
    try:
        sock = client.socket()
        if sock is not None:
            sock.close()
    except Exception:  # noqa: BLE001
        pass
