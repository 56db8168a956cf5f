import pytest

from sdschat.transport import BrokerAddress, TransportError, parse_broker_url

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mqtt://localhost", BrokerAddress("localhost", 1883)),
        ("mqtt://127.0.0.1:1884", BrokerAddress("127.0.0.1", 1884)),
        ("mqtt://broker.example/", BrokerAddress("broker.example", 1883)),
        ("MQTT://Broker.Example:2000", BrokerAddress("broker.example", 2000)),
        ("mqtts://broker.example", BrokerAddress("broker.example", 8883, tls=True)),
        ("mqtts://broker.example:443", BrokerAddress("broker.example", 443, tls=True)),
        ("mqtt://alice:s3cret@host", BrokerAddress("host", 1883, username="alice", password="s3cret")),
        ("mqtt://alice@host:10", BrokerAddress("host", 10, username="alice")),
        ("mqtt://al%40ce:p%3Aw%2Fd@host", BrokerAddress("host", 1883, username="al@ce", password="p:w/d")),
        ("mqtt://[::1]:1883", BrokerAddress("::1", 1883)),
        ("  mqtt://host  ", BrokerAddress("host", 1883)),
        ("mqtts://host?ca=/etc/ca.pem", BrokerAddress("host", 8883, tls=True, ca_file="/etc/ca.pem")),
    ],
)
def test_good_urls(url: str, expected: BrokerAddress) -> None:
    assert parse_broker_url(url) == expected


def test_ca_file_argument_and_display() -> None:
    addr = parse_broker_url("mqtts://bob:pw@host", ca_file="/tmp/ca.pem")
    assert addr.tls and addr.ca_file == "/tmp/ca.pem"
    assert str(addr) == "host:8883"
    assert "pw" not in addr.url and addr.url == "mqtts://bob:***@host:8883?ca=/tmp/ca.pem"
    assert "pw" not in repr(addr)
    assert parse_broker_url(addr.full_url) == addr
    assert str(parse_broker_url("mqtt://[::1]")) == "[::1]:1883"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "localhost:1883",
        "localhost",
        "http://host",
        "tcp://host:1883",
        "ws://host",
        "mqtt://",
        "mqtt://:1883",
        "mqtt://host:0",
        "mqtt://host:65536",
        "mqtt://host:abc",
        "mqtt://host:",
        "mqtt://host:1883/topic",
        "mqtt://host#frag",
        "mqtt://host?ca=/x.pem",
        "mqtts://host?verify=no",
        "mqtts://host?ca=",
        "mqtt://ho st",
        "mqtt://@host",
        "mqtt://[::1",
    ],
)
def test_bad_urls_raise_transport_error(url: str) -> None:
    with pytest.raises(TransportError) as info:
        parse_broker_url(url)
    message = str(info.value)
    assert message.startswith("invalid broker URL")
    assert "\n" not in message


def test_bad_url_message_hides_password() -> None:
    with pytest.raises(TransportError) as info:
        parse_broker_url("http://alice:hunter2@host")
    assert "hunter2" not in str(info.value)


def test_non_string_url() -> None:
    with pytest.raises(TransportError):
        parse_broker_url(None)  # type: ignore[arg-type]


def test_conflicting_ca_files() -> None:
    with pytest.raises(TransportError):
        parse_broker_url("mqtts://host?ca=/a.pem", ca_file="/b.pem")
