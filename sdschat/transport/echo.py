"""Recognising our own publishes when an MQTT 3.1.1 broker echoes them back."""

from __future__ import annotations

from collections import Counter, deque

__all__ = ["EchoFilter"]


class EchoFilter:
    """Recognise our own publishes when the broker echoes them (MQTT 3.1.1).

    Remembers a hash of (topic, payload) of each recent publish on a topic we
    are subscribed to (only those come back), with multiplicity; an incoming
    frame that matches one consumes it. Payloads are sealed envelopes with
    random nonces, so another participant sending the very same bytes only
    happens when it re-broadcasts *our* frame, which we already have; and as
    each publish consumes at most one match, the peer's copy still arrives.
    Bounded: the oldest entries are forgotten first (e.g. echoes lost by QoS 0).
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._counts: Counter[int] = Counter()
        self._order: deque[int] = deque()

    def add(self, topic: str, payload: bytes) -> int:
        key = hash((topic, payload))
        self._counts[key] += 1
        self._order.append(key)
        if len(self._order) > self._capacity:
            self._discard(self._order.popleft())
        return key

    def _discard(self, key: int) -> None:
        n = self._counts[key] - 1
        if n > 0:
            self._counts[key] = n
        else:
            self._counts.pop(key, None)

    def forget(self, key: int) -> None:
        try:
            self._order.remove(key)
        except ValueError:
            return
        self._discard(key)

    def consume(self, topic: str, payload: bytes) -> bool:
        key = hash((topic, payload))
        if key not in self._counts:
            return False
        self.forget(key)
        return True

    def clear(self) -> None:
        self._counts.clear()
        self._order.clear()
