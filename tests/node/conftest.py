"""Fixtures for node tests: real brokers (mosquitto and the embedded amqtt), node factories."""

from __future__ import annotations

import pytest
from brokers import Amqtt, Mosquitto, mosquitto_binary


@pytest.fixture(scope="session")
def node_mosquitto(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("node-mosquitto"))
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def node_amqtt():
    broker = Amqtt()
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(params=["mosquitto", "amqtt"])
def broker(request):
    """Each test using it runs against both brokers."""
    return request.getfixturevalue(f"node_{request.param}")
