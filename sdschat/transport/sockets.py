"""Socket options of the broker connection."""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["set_tcp_nodelay"]


def set_tcp_nodelay(sock: Any) -> bool:
    """Disable Nagle on a TCP socket; returns whether it could be set.

    paho-mqtt does not do this itself, and with Nagle on, a small QoS 0
    publish waits for the previous segment's ACK: ~13 ms p50 instead of ~0.25 ms
    on loopback.
    """
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return True
    except (OSError, AttributeError):
        return False
