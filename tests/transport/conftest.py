"""Real brokers for the transport tests: mosquitto (a subprocess) and the
embedded amqtt broker (in-process, on its own event loop thread).

mosquitto must be installed (``apt-get install -y mosquitto``); if the binary
is missing the fixture fails rather than skipping, so CI cannot go green
without having tested against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import Amqtt, Mosquitto, find_mosquitto, free_port


def _mosquitto_binary() -> str:
    binary = find_mosquitto()
    if binary is None:
        pytest.fail(
            "mosquitto binary not found: the transport tests need a real broker; "
            "install it with `apt-get install -y mosquitto`",
            pytrace=False,
        )
    return binary


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    """A mosquitto shared by the session (do not kill it; use mosquitto_factory)."""
    broker = Mosquitto(_mosquitto_binary(), tmp_path_factory.mktemp("mosquitto"))
    broker.start()
    yield broker
    broker.close()


def _self_signed(workdir: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA) and its key."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sdschat test broker")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = workdir / "cert.pem", workdir / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture(scope="session")
def mosquitto_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    """mosquitto with a TLS listener; ``broker.ca_file`` verifies its certificate."""
    workdir = tmp_path_factory.mktemp("mosquitto-tls")
    cert, key = _self_signed(workdir)
    # `user root`: keep root when started as root so the key stays readable (no effect otherwise)
    broker = Mosquitto(_mosquitto_binary(), workdir, extra=f"certfile {cert}\nkeyfile {key}\nuser root\n")
    broker.ca_file = str(cert)  # type: ignore[attr-defined]
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def amqtt_broker() -> Iterator[Amqtt]:
    """An embedded amqtt broker shared by the session."""
    broker = Amqtt()
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(params=["mosquitto", "amqtt"])
def broker(request: pytest.FixtureRequest) -> Mosquitto | Amqtt:
    """Each test using this runs once against each broker."""
    return request.getfixturevalue("mosquitto" if request.param == "mosquitto" else "amqtt_broker")


@pytest.fixture(params=["mosquitto", "amqtt"])
def private_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Mosquitto | Amqtt]:
    """A broker of each kind owned by one test, which may kill and restart it."""
    b: Mosquitto | Amqtt
    if request.param == "mosquitto":
        b = Mosquitto(_mosquitto_binary(), tmp_path)
    else:
        b = Amqtt()
    b.start()
    yield b
    b.close()


@pytest.fixture
def unused_port() -> int:
    """A loopback port with (very probably) nothing listening."""
    return free_port()
