"""mqtts:// against mosquitto with a TLS listener and a self-signed certificate."""

from __future__ import annotations

import asyncio
import socket
import ssl
import uuid
from typing import Any

import pytest

from sdschat.transport import MqttTransport, TransportError

pytestmark = pytest.mark.timeout(20)


def test_tls_round_trip_with_ca_file(mosquitto_tls: Any) -> None:
    async def main() -> None:
        url = f"mqtts://127.0.0.1:{mosquitto_tls.port}?ca={mosquitto_tls.ca_file}"
        topic = f"sdschat-test/{uuid.uuid4().hex}"
        async with MqttTransport(url) as a, MqttTransport(url) as b:
            sock = a.raw_socket()
            assert isinstance(sock, ssl.SSLSocket)
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            await b.subscribe(topic)
            await a.publish(topic, b"sealed")
            assert (await asyncio.wait_for(b.receive(), 5)).payload == b"sealed"

    asyncio.run(main())


def test_tls_untrusted_certificate_is_a_clear_error(mosquitto_tls: Any) -> None:
    async def main() -> None:
        t = MqttTransport(f"mqtts://127.0.0.1:{mosquitto_tls.port}")  # system CAs only
        with pytest.raises(TransportError, match="cannot reach MQTT broker at 127.0.0.1:.*certificate verif"):
            await t.start()

    asyncio.run(main())


def test_missing_ca_file_is_a_clear_error(mosquitto_tls: Any) -> None:
    async def main() -> None:
        t = MqttTransport(f"mqtts://127.0.0.1:{mosquitto_tls.port}", ca_file="/nonexistent/ca.pem")
        with pytest.raises(TransportError, match="cannot use CA file '/nonexistent/ca.pem'"):
            await t.start()

    asyncio.run(main())


def test_plain_mqtt_to_a_tls_port_fails_cleanly(mosquitto_tls: Any) -> None:
    async def main() -> None:
        t = MqttTransport(f"mqtt://127.0.0.1:{mosquitto_tls.port}", connect_timeout=0.5)
        with pytest.raises(TransportError, match="cannot reach MQTT broker"):
            await t.start()

    asyncio.run(main())
