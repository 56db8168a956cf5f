"""MQTT broadcast layer: opaque bytes (sealed envelopes) on topic strings.

Imports nothing else from ``sdschat``. Public API:

- :func:`parse_broker_url` / :class:`BrokerAddress`: ``mqtt://`` and ``mqtts://`` URLs.
- :class:`MqttTransport`: asyncio client (paho driven by the event loop), TCP_NODELAY,
  reconnect with capped exponential backoff, re-subscribe, connection states.
- :class:`SharedConnection`, :class:`TopicView`: one connection for many channels,
  each view seeing only the topics it subscribed.
- :class:`ImpairedTransport`: loss / delay+jitter / duplication / offline
  wrapper for dogfooding, seeded.
- :func:`resolve_broker`, :class:`EmbeddedBroker`, :func:`run_broker`,
  :func:`probe_mqtt`: find a broker or run one in-process (amqtt).
- :class:`TransportError`: every user-facing failure, one line.
- :class:`ConnectionState`, :class:`StateChange`, :class:`Message`, :class:`Transport`.
"""

from .base import ConnectionState, Message, MessageHandler, StateChange, StateListener, Transport
from .broker import EmbeddedBroker, probe_mqtt, quiet_broker_logging, resolve_broker, run_broker
from .errors import TransportError
from .impair import ImpairedTransport, Impairment, ImpairmentCounters
from .mqtt import MqttTransport, TransportStats, set_tcp_nodelay
from .shared import SharedConnection, TopicView
from .url import DEFAULT_PORTS, BrokerAddress, parse_broker_url

__all__ = [
    "BrokerAddress",
    "ConnectionState",
    "DEFAULT_PORTS",
    "EmbeddedBroker",
    "ImpairedTransport",
    "Impairment",
    "ImpairmentCounters",
    "Message",
    "MessageHandler",
    "MqttTransport",
    "StateChange",
    "SharedConnection",
    "StateListener",
    "Transport",
    "TransportError",
    "TopicView",
    "TransportStats",
    "parse_broker_url",
    "probe_mqtt",
    "quiet_broker_logging",
    "resolve_broker",
    "run_broker",
    "set_tcp_nodelay",
]
