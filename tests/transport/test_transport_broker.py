"""Broker discovery: resolve_broker, probe_mqtt, EmbeddedBroker, run_broker."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
from run_until import run

from sdschat.transport import (
    EmbeddedBroker,
    MqttTransport,
    TransportError,
    probe_mqtt,
    resolve_broker,
    run_broker,
)

pytestmark = pytest.mark.timeout(20)


async def round_trip(url: str) -> None:
    topic = f"sdschat-test/{uuid.uuid4().hex}"
    async with MqttTransport(url) as a, MqttTransport(url) as b:
        await b.subscribe(topic)
        assert await a.publish(topic, b"hello")
        assert (await asyncio.wait_for(b.receive(), 5)).payload == b"hello"


def test_explicit_url_is_used_as_is(unused_port: int) -> None:
    async def main() -> None:
        url, embedded = await resolve_broker("mqtt://example.invalid:1999", probe_port=unused_port)
        assert (url, embedded) == ("mqtt://example.invalid:1999", None)
        with pytest.raises(TransportError):
            await resolve_broker("http://nope")

    run(main())


def test_uses_a_local_broker_when_one_answers(mosquitto: Any) -> None:
    async def main() -> None:
        url, embedded = await resolve_broker(None, probe_port=mosquitto.port)
        assert embedded is None
        assert url == f"mqtt://127.0.0.1:{mosquitto.port}"

    run(main())


def test_falls_back_to_embedded_when_nothing_listens(unused_port: int) -> None:
    async def main() -> None:
        t0 = time.monotonic()
        url, embedded = await resolve_broker(None, probe_port=unused_port)
        assert time.monotonic() - t0 < 1.0
        assert embedded is not None
        assert embedded.host == "127.0.0.1" and embedded.port != unused_port
        assert url == embedded.url == f"mqtt://127.0.0.1:{embedded.port}"
        try:
            assert await probe_mqtt("127.0.0.1", embedded.port)
            await round_trip(url)
        finally:
            await embedded.close()
        await embedded.close()  # idempotent
        assert not await probe_mqtt("127.0.0.1", embedded.port)

    run(main())


def test_falls_back_when_the_local_port_is_not_mqtt(unused_port: int) -> None:
    """Something on the probe port that never answers CONNECT: give up after ~300 ms."""

    async def main() -> None:
        writers: list[asyncio.StreamWriter] = []
        server = await asyncio.start_server(lambda r, w: writers.append(w), "127.0.0.1", unused_port)
        try:
            t0 = time.monotonic()
            url, embedded = await resolve_broker(None, probe_port=unused_port, probe_timeout=0.3)
            elapsed = time.monotonic() - t0
            assert embedded is not None
            await embedded.close()
            assert 0.25 < elapsed < 1.5
        finally:
            for w in writers:
                w.close()
            server.close()
            await server.wait_closed()

    run(main())


def test_probe_recognises_both_brokers(broker: Any, unused_port: int) -> None:
    async def main() -> None:
        assert await probe_mqtt("127.0.0.1", broker.port)
        assert not await probe_mqtt("127.0.0.1", unused_port)

    run(main())


def test_embedded_broker_on_a_taken_port_raises(mosquitto: Any) -> None:
    async def main() -> None:
        with pytest.raises(TransportError, match=f"cannot start embedded MQTT broker on 127.0.0.1:{mosquitto.port}"):
            await EmbeddedBroker.start("127.0.0.1", mosquitto.port)

    run(main())


def test_embedded_broker_is_quiet(unused_port: int, capfd: pytest.CaptureFixture[str]) -> None:
    """amqtt logs WARNINGs for ordinary events (e.g. an MQTT 5 CONNECT); none may reach stderr."""

    async def main() -> None:
        async with await EmbeddedBroker.start() as b:
            await round_trip(b.url)  # protocol auto: MQTT 5 refused, then 3.1.1

    run(main())
    assert capfd.readouterr().err == ""
    assert logging.getLogger("amqtt").getEffectiveLevel() > logging.CRITICAL


def test_run_broker_serves_until_cancelled() -> None:
    async def main() -> None:
        ready: asyncio.Future[EmbeddedBroker] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(run_broker("127.0.0.1", 0, on_ready=ready.set_result))
        broker = await asyncio.wait_for(ready, 5)
        await round_trip(broker.url)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert broker.closed
        assert not await probe_mqtt("127.0.0.1", broker.port)

    run(main())
