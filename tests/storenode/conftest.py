"""Fixtures for store node tests: a real mosquitto broker (session), a raw request client."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from brokers import Mosquitto, mosquitto_binary

from sdschat.storenode import protocol as P
from sdschat.transport import MqttTransport


@pytest.fixture(scope="session")
def store_mosquitto(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("storenode-mosquitto"))
    broker.start()
    yield broker
    broker.close()


class RawClient:
    """Sends raw request bodies to a store node and reads the answers on its own reply topic."""

    def __init__(self, url: str) -> None:
        self.t = MqttTransport(url)
        self.reply_to = P.REPLY_PREFIX + os.urandom(6).hex()

    async def __aenter__(self):
        await self.t.start()
        await self.t.subscribe(self.reply_to)
        return self

    async def __aexit__(self, *exc):
        await self.t.stop()

    async def send(self, body, timeout: float = 3.0) -> P.Reply | None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        await self.t.publish(P.REQUEST_TOPIC, data)
        try:
            _, payload = await asyncio.wait_for(self.t.receive(), timeout)
        except TimeoutError:
            return None
        return P.decode_reply(payload)


@pytest.fixture
def raw_client():
    return RawClient
