"""Counters of one :class:`~.mqtt.MqttTransport`."""

from __future__ import annotations

import dataclasses

__all__ = ["TransportStats"]


@dataclasses.dataclass
class TransportStats:
    """Counters of one MqttTransport (loop thread only)."""

    published: int = 0  #: handed to the broker connection
    not_sent: int = 0  #: publish() returned False (disconnected, stopped, queue full)
    received: int = 0  #: delivered to the consumer
    echoes_suppressed: int = 0  #: own publishes echoed by a 3.1.1 broker, dropped
    connects: int = 0  #: successful CONNACKs (1 + number of reconnects)
    disconnects: int = 0  #: connection losses seen
