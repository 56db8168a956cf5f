"""Real MQTT brokers for tests: mosquitto (a subprocess) and the embedded amqtt broker
(in-process, on its own event-loop thread), both restartable on the same port.

The killable mosquitto is the benches' (bench/kit/brokers.py), so a test and the long run it shortens start,
kill and restart the broker the same way; here it keeps the tests' call ``Mosquitto(binary, workdir)``."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

from kit.brokers import Broker, find_mosquitto
from kit.ports import free_port

from sdschat.transport import EmbeddedBroker, MqttTransport

__all__ = ["Amqtt", "Mosquitto", "fast_transport", "find_mosquitto", "free_port", "mosquitto_binary", "new_topic"]


def new_topic() -> str:
    """A topic no other test uses."""
    return f"sdschat-test/{uuid.uuid4().hex}"


def fast_transport(url: str, **kw: Any) -> MqttTransport:
    """An MqttTransport that reconnects and gives up on a connect quickly (tests wait on both)."""
    kw.setdefault("reconnect_min", 0.05)
    kw.setdefault("reconnect_max", 0.5)
    kw.setdefault("connect_timeout", 2.0)
    return MqttTransport(url, **kw)


class Mosquitto(Broker):
    """A mosquitto process on a fixed loopback port; can be killed and restarted."""

    def __init__(self, binary: str, workdir: Path, port: int | None = None, extra: str = "") -> None:
        super().__init__(workdir, port=port, extra=extra, binary=binary)


class Amqtt:
    """The embedded amqtt broker on its own event-loop thread (tests use asyncio.run)."""

    name = "amqtt"

    def __init__(self, port: int | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="amqtt-test-broker", daemon=True)
        self._thread.start()
        self._broker: EmbeddedBroker | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def _run(self, coro: object, timeout: float = 10.0) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def start(self) -> None:
        assert self._broker is None
        self._broker = self._run(EmbeddedBroker.start(self.host, self.port))  # type: ignore[assignment]

    def kill(self) -> None:
        if self._broker is not None:
            self._run(self._broker.close())
            self._broker = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def mosquitto_binary() -> str:
    """The mosquitto binary, or an AssertionError saying how to install it (never a skip)."""
    binary = find_mosquitto()
    assert binary is not None, (
        "mosquitto not found: install it with `apt-get install -y mosquitto` (bash .ci/setup does)"
    )
    return binary
