"""MqttTransport runs paho on the asyncio loop (no network thread): reading, writing past a full socket,
flushing at stop, and the keepalive that paho's own thread used to run."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from brokers import Mosquitto, fast_transport, find_mosquitto, new_topic
from run_until import run, until

from sdschat.transport import ConnectionState

pytestmark = [pytest.mark.timeout(40)]


def paho_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("paho-mqtt-client")]


def test_messages_are_handled_on_the_loop_thread_and_paho_has_no_thread(broker: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        seen: list[tuple[int, bytes]] = []
        handler = lambda t, p: seen.append((threading.get_ident(), p))  # noqa: E731
        async with fast_transport(broker.url) as a, fast_transport(broker.url, on_message=handler) as b:
            assert await b.subscribe(topic) is True
            for i in range(20):
                assert await a.publish(topic, b"m%d" % i) is True
            await until(lambda: len(seen) == 20, 5, "20 messages")
            assert paho_threads() == []
        assert {ident for ident, _ in seen} == {threading.get_ident()}
        assert [p for _, p in seen] == [b"m%d" % i for i in range(20)]

    run(main())


def test_a_burst_bigger_than_the_socket_takes_arrives_whole_and_in_order(mosquitto: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        payloads = [i.to_bytes(4, "big") + os.urandom(200_000) for i in range(100)]  # 20 MB, published at once
        async with fast_transport(mosquitto.url) as a, fast_transport(mosquitto.url) as b:
            assert await b.subscribe(topic) is True
            for p in payloads:
                assert a.publish_nowait(topic, p) is True
            got = [(await asyncio.wait_for(b.receive(), 20)).payload for _ in payloads]
        assert got == payloads

    run(main())


def test_stop_sends_what_was_published_before_it(broker: Any) -> None:
    async def main() -> None:
        topic = new_topic()
        async with fast_transport(broker.url) as b:
            assert await b.subscribe(topic) is True
            a = fast_transport(broker.url)
            await a.start()
            for i in range(50):
                assert a.publish_nowait(topic, b"last-%d" % i) is True
            await a.stop()  # no await between the publishes and the stop
            assert a.state is ConnectionState.STOPPED
            got = [(await asyncio.wait_for(b.receive(), 5)).payload for _ in range(50)]
        assert got == [b"last-%d" % i for i in range(50)]

    run(main())


def test_keepalive_holds_an_idle_connection_and_notices_a_broker_that_stopped_answering(tmp_path: Path) -> None:
    binary = find_mosquitto()
    assert binary is not None, "mosquitto is needed"
    broker = Mosquitto(binary, tmp_path)
    broker.start()
    assert broker.proc is not None
    stopped = False

    async def main() -> None:
        nonlocal stopped
        async with fast_transport(broker.url, keepalive=1) as t:
            # the broker drops a client silent for 1.5 keepalives: pings must go out while nothing else does
            await asyncio.sleep(3.5)
            assert t.state is ConnectionState.CONNECTED and t.stats.disconnects == 0
            assert broker.proc is not None
            os.kill(broker.proc.pid, signal.SIGSTOP)  # the socket stays open; only the answers stop
            stopped = True
            await t.wait_for_state(ConnectionState.DISCONNECTED, 15)
            assert "lost" in t.last_state_change.detail
            os.kill(broker.proc.pid, signal.SIGCONT)
            stopped = False
            await t.wait_for_state(ConnectionState.CONNECTED, 15)
            assert t.stats.disconnects == 1 and t.stats.connects == 2

    try:
        run(main())
    finally:
        if stopped:
            os.kill(broker.proc.pid, signal.SIGCONT)
        broker.close()
