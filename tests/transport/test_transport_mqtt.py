"""MqttTransport against real brokers (mosquitto and the embedded amqtt)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any

import pytest
from brokers import fast_transport, new_topic
from run_until import run, until

from sdschat.transport import ConnectionState, MqttTransport, StateChange, TransportError

pytestmark = [
    pytest.mark.timeout(20),
    # an exception escaping a thread (the embedded broker's, or one a test starts) fails the test
    pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"),
]


def test_round_trip(broker: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        async with fast_transport(broker.url) as a, fast_transport(broker.url) as b:
            assert a.state is ConnectionState.CONNECTED
            assert await b.subscribe(topic) is True
            payloads = [bytes(range(256)), b"\x00", os.urandom(19_000)] + [b"m%d" % i for i in range(50)]
            for p in payloads:
                assert await a.publish(topic, p) is True
            got = [await asyncio.wait_for(b.receive(), 5) for _ in payloads]
            assert [m.topic for m in got] == [topic] * len(payloads)
            assert [m.payload for m in got] == payloads  # exact bytes, in order
            assert a.stats.published == len(payloads)
            assert b.stats.received == len(payloads)

    run(main())


def test_message_handler_and_iterator(broker: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        seen: list[tuple[str, bytes]] = []
        async with (
            fast_transport(broker.url) as a,
            fast_transport(broker.url, on_message=lambda t, p: seen.append((t, p))) as b,
        ):
            c = fast_transport(broker.url)
            await c.start()
            await asyncio.gather(b.subscribe(topic), c.subscribe(topic))
            for i in range(3):
                await a.publish(topic, b"%d" % i)
            await until(lambda: len(seen) == 3)
            assert seen == [(topic, b"0"), (topic, b"1"), (topic, b"2")]
            out = []
            async for _t, p in c.messages():
                out.append(p)
                if len(out) == 3:
                    break
            assert out == [b"0", b"1", b"2"]

            # stop() ends a waiting iterator
            async def consume() -> list[bytes]:
                return [m.payload async for m in c]

            consumer = asyncio.ensure_future(consume())
            await asyncio.sleep(0.05)
            await c.stop()
            assert await asyncio.wait_for(consumer, 2) == []
            assert c.state is ConnectionState.STOPPED

    run(main())


def test_no_local_and_echoes(broker: Any) -> None:
    """A node never sees its own publishes: MQTT 5 no_local on mosquitto;
    on amqtt (3.1.1 only) the transport drops its own echoes by payload."""

    async def main() -> None:
        topic = new_topic()
        async with fast_transport(broker.url) as a, fast_transport(broker.url) as b:
            await asyncio.gather(a.subscribe(topic), b.subscribe(topic))
            for i in range(10):
                await a.publish(topic, b"from-a-%d" % i)
            got = [await asyncio.wait_for(b.receive(), 5) for _ in range(10)]
            assert [m.payload for m in got] == [b"from-a-%d" % i for i in range(10)]
            await b.publish(topic, b"from-b")  # a's queue must hold only this
            assert (await asyncio.wait_for(a.receive(), 5)).payload == b"from-b"
            assert a.stats.received == 1
            if broker.name == "mosquitto":
                assert a.negotiated_protocol == "5"
                assert not a.broker_echoes_own_publishes
                assert a.stats.echoes_suppressed == 0  # the broker never sent them
            else:
                assert a.negotiated_protocol == "3.1.1"  # amqtt refuses MQTT 5
                assert a.echo_filter_active
                assert a.stats.echoes_suppressed == 10

    run(main())


def test_mqtt311_without_suppression_echoes_to_self(broker: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        async with fast_transport(broker.url, protocol="3.1.1", suppress_echoes=False) as a:
            assert a.negotiated_protocol == "3.1.1" and a.broker_echoes_own_publishes
            await a.subscribe(topic)
            await a.publish(topic, b"echo")
            assert (await asyncio.wait_for(a.receive(), 5)).payload == b"echo"

    run(main())


def test_qos1_round_trip(broker: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        async with fast_transport(broker.url, qos=1) as a, fast_transport(broker.url, qos=1) as b:
            await b.subscribe(topic)
            for i in range(20):
                assert await a.publish(topic, b"q%d" % i)
            got = [(await asyncio.wait_for(b.receive(), 5)).payload for _ in range(20)]
            assert got == [b"q%d" % i for i in range(20)]

    run(main())


def test_mqtt5_only_against_amqtt_is_refused(amqtt_broker: Any) -> None:
    async def main() -> None:
        t = fast_transport(amqtt_broker.url, protocol="5")
        with pytest.raises(TransportError, match="refused the connection: unsupported protocol version"):
            await t.start()
        assert t.state is ConnectionState.STOPPED

    run(main())


def test_tcp_nodelay_is_set(broker: Any) -> None:
    async def main() -> None:
        async with fast_transport(broker.url) as t:
            sock = t.raw_socket()
            assert sock is not None
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert t.nodelay is True

    run(main())


def test_states_are_observable(broker: Any) -> None:
    async def main() -> None:
        t = fast_transport(broker.url)
        seen: list[StateChange] = []
        remove = t.add_state_listener(seen.append)
        stream: list[ConnectionState] = []

        async def watch() -> None:
            async for change in t.state_changes():
                stream.append(change.state)
                if change.state is ConnectionState.STOPPED and len(stream) > 1:
                    return

        watcher = asyncio.ensure_future(watch())
        await asyncio.sleep(0)
        await t.start()
        await t.stop()
        await asyncio.wait_for(watcher, 2)
        remove()
        states = [c.state for c in seen]
        assert states == [ConnectionState.CONNECTING, ConnectionState.CONNECTED, ConnectionState.STOPPED]
        assert stream == [ConnectionState.STOPPED, *states]
        assert all("\n" not in c.detail for c in seen)

    run(main())


def test_publish_when_not_connected_drops(broker: Any) -> None:
    async def main() -> None:
        t = fast_transport(broker.url)
        assert await t.publish("x/y", b"before start") is False
        await t.start()
        assert await t.publish("x/y", b"ok") is True
        await t.stop()
        assert await t.publish("x/y", b"after stop") is False
        assert t.stats.not_sent == 2

    run(main())


def test_reconnect_after_broker_restart(private_broker: Any, capfd: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        topic = new_topic()
        async with fast_transport(private_broker.url) as a, fast_transport(private_broker.url) as b:
            await b.subscribe(topic)
            await a.publish(topic, b"before")
            assert (await asyncio.wait_for(b.receive(), 5)).payload == b"before"
            b_states: list[ConnectionState] = []
            b.add_state_listener(lambda c: b_states.append(c.state))

            private_broker.kill()
            await a.wait_for_state(ConnectionState.DISCONNECTED, 5)
            await b.wait_for_state(ConnectionState.DISCONNECTED, 5)
            assert "lost" in b.last_state_change.detail
            # publishing while disconnected neither raises nor blocks
            t0 = time.monotonic()
            for _ in range(100):
                assert await a.publish(topic, b"lost") is False
            assert time.monotonic() - t0 < 0.5
            await asyncio.sleep(0.3)  # let a few reconnect attempts fail
            assert a.state is not ConnectionState.CONNECTED

            private_broker.start()
            await a.wait_for_state(ConnectionState.CONNECTED, 5)
            await b.wait_for_state(ConnectionState.CONNECTED, 5)
            # b re-subscribed by itself (clean session): keep publishing until
            # the SUBACK has gone through and a frame arrives
            received = None
            for i in range(100):
                await a.publish(topic, b"after-%d" % i)
                try:
                    received = await asyncio.wait_for(b.receive(), 0.1)
                    break
                except TimeoutError:
                    continue
            assert received is not None and received.payload.startswith(b"after-")
            assert b.stats.connects == 2 and b.stats.disconnects == 1
            assert ConnectionState.DISCONNECTED in b_states and ConnectionState.CONNECTING in b_states
            assert b_states[-1] is ConnectionState.CONNECTED
            sock = b.raw_socket()
            assert sock is not None and sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0

    run(main())
    err = capfd.readouterr().err
    assert "Traceback" not in err, err


def test_stop_while_broker_down_is_prompt(private_broker: Any) -> None:
    async def main() -> None:
        t = fast_transport(private_broker.url, reconnect_min=5.0, reconnect_max=5.0)
        await t.start()
        private_broker.kill()
        await t.wait_for_state(ConnectionState.DISCONNECTED, 5)
        t0 = time.monotonic()
        await t.stop()
        assert time.monotonic() - t0 < 0.5
        assert t.state is ConnectionState.STOPPED

    run(main())


def test_unreachable_broker_fails_fast(unused_port: int, capfd: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        t = MqttTransport(f"mqtt://127.0.0.1:{unused_port}")
        t0 = time.monotonic()
        with pytest.raises(TransportError) as info:
            await t.start()
        assert time.monotonic() - t0 < 1.0
        msg = str(info.value)
        assert msg.startswith(f"cannot reach MQTT broker at 127.0.0.1:{unused_port}: ")
        assert "refused" in msg.lower() and "\n" not in msg
        assert t.state is ConnectionState.STOPPED

    run(main())
    assert "Traceback" not in capfd.readouterr().err


def test_silent_server_times_out(unused_port: int) -> None:
    """Something listens but never answers the CONNECT: a clear error after connect_timeout."""

    async def main() -> None:
        writers: list[asyncio.StreamWriter] = []
        server = await asyncio.start_server(lambda r, w: writers.append(w), "127.0.0.1", unused_port)
        try:
            t = MqttTransport(f"mqtt://127.0.0.1:{unused_port}", connect_timeout=0.3)
            t0 = time.monotonic()
            with pytest.raises(TransportError, match=r"cannot reach MQTT broker at 127\.0\.0\.1:\d+: no MQTT answer"):
                await t.start()
            assert time.monotonic() - t0 < 1.5
        finally:
            for w in writers:
                w.close()
            server.close()
            await server.wait_closed()

    run(main())


def test_invalid_options() -> None:
    with pytest.raises(TransportError):
        MqttTransport("mqtt://h", qos=3)
    with pytest.raises(TransportError):
        MqttTransport("mqtt://h", protocol="4.0")
    with pytest.raises(TransportError):
        MqttTransport("mqtt://h", reconnect_min=2, reconnect_max=1)
    with pytest.raises(TransportError):
        MqttTransport("http://h")
    assert MqttTransport("mqtt://h", protocol=4).protocol == "3.1.1"
    assert MqttTransport("mqtt://h", protocol=5).protocol == "5"


def test_echo_filter_keeps_a_peers_identical_payload(broker: Any) -> None:
    """A peer re-publishing our exact bytes (e.g. an SDS-R rebroadcast) still reaches us."""

    async def main() -> None:
        ping, pong = new_topic(), new_topic()
        async with fast_transport(broker.url) as a, fast_transport(broker.url) as b:
            b.set_message_handler(lambda t, p: b.publish_nowait(pong, p))
            await asyncio.gather(a.subscribe(pong), b.subscribe(ping))
            for i in range(5):
                await a.publish(ping, b"same-bytes-%d" % i)  # a is not subscribed to ping
                assert (await asyncio.wait_for(a.receive(), 5)).payload == b"same-bytes-%d" % i
            # subscribed to the topic: own echo dropped, the peer's copy delivered
            await a.subscribe(ping)
            b.set_message_handler(None)
            await b.subscribe(pong)
            await a.publish(pong, b"twice")
            assert (await asyncio.wait_for(b.receive(), 5)).payload == b"twice"
            await b.publish(pong, b"twice")
            assert (await asyncio.wait_for(a.receive(), 5)).payload == b"twice"
            assert a.stats.received == 6

    run(main())


# ------------------------------------------------------------------ kept sessions


def test_a_kept_session_gets_what_was_sent_while_away_and_a_clean_one_does_not(mosquitto: Any) -> None:
    """mosquitto keeps the session of a client that asked for one (MQTT 5 session expiry, QoS 1): what is
    published on its subscriptions while it is away arrives, in order, when it connects again with the same
    client id; a client with clean sessions (the default) gets none of it."""

    async def main() -> None:
        topic = new_topic()
        kept_id, clean_id = f"sdschat-{os.urandom(8).hex()}", f"sdschat-{os.urandom(8).hex()}"
        kept = fast_transport(mosquitto.url, client_id=kept_id, qos=1, session_expiry_s=60)
        clean = fast_transport(mosquitto.url, client_id=clean_id, qos=1)
        for t in (kept, clean):
            await t.start()
            assert await t.subscribe(topic) is True
            assert t.session_present is False  # (a first connect: nothing to resume)
            await t.stop()
        async with fast_transport(mosquitto.url, qos=1) as sender:
            for i in range(30):
                assert await sender.publish(topic, b"while away %d" % i)
            await asyncio.sleep(0.3)
        back = fast_transport(mosquitto.url, client_id=kept_id, qos=1, session_expiry_s=60)
        again = fast_transport(mosquitto.url, client_id=clean_id, qos=1)
        async with back, again:
            assert back.session_present is True and again.session_present is False
            got = [await asyncio.wait_for(back.receive(), 5) for _ in range(30)]
            assert [m.payload for m in got] == [b"while away %d" % i for i in range(30)]
            await asyncio.sleep(0.5)
            assert again._queue.qsize() == 0  # nothing was kept for the clean one

    run(main())


def test_a_kept_session_needs_a_client_id_and_a_sane_expiry() -> None:
    with pytest.raises(TransportError, match="client id"):
        MqttTransport("mqtt://127.0.0.1:1", session_expiry_s=60)
    for bad in (-1, 2**32, 1.5):
        with pytest.raises(TransportError, match="session expiry"):
            MqttTransport("mqtt://127.0.0.1:1", client_id="sdschat-x", session_expiry_s=bad)  # type: ignore[arg-type]
