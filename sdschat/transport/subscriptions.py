"""The topics a transport subscribes to, their SUBACKs and the futures waiting on them (loop thread only).

Subscriptions outlive connections: every topic is re-made after a reconnect
(sessions are clean), so a connection change forgets what was acknowledged,
never the topics themselves.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.subscribeoptions import SubscribeOptions

__all__ = ["Subscriptions"]

log = logging.getLogger("sdschat.transport.mqtt")


class Subscriptions:
    """Insertion-ordered topics, the acknowledged ones, pending SUBSCRIBE packets and waiters."""

    def __init__(self) -> None:
        self._topics: dict[str, None] = {}  # insertion-ordered set
        self._acked: set[str] = set()
        self._waiters: dict[str, list[asyncio.Future[bool]]] = {}
        self._pending_mids: dict[int, list[str]] = {}

    @property
    def topics(self) -> list[str]:
        return list(self._topics)

    def add(self, topic: str, fut: asyncio.Future[bool]) -> bool:
        """Let ``fut`` wait for ``topic``'s SUBACK; True when the topic is new (subscribe it now if connected)."""
        if topic in self._acked:
            fut.set_result(True)
            return False
        self._waiters.setdefault(topic, []).append(fut)
        if topic in self._topics:
            return False
        self._topics[topic] = None
        return True

    def remove(self, topic: str) -> bool:
        """Forget ``topic`` and cancel its waiters; False if it was not subscribed."""
        if topic not in self._topics:
            return False
        del self._topics[topic]
        self._acked.discard(topic)
        for fut in self._waiters.pop(topic, []):
            if not fut.done():
                fut.cancel()
        return True

    def request(self, topics: list[str], protocol: str | None, qos: int, no_local: bool) -> list[Any]:
        """The SUBSCRIBE arguments for ``topics`` (MQTT 5: with the ``no_local`` option)."""
        if protocol == "5":
            opts = SubscribeOptions(qos=qos, noLocal=no_local)
            return [(t, opts) for t in topics]
        return [(t, qos) for t in topics]

    def sent(self, mid: int, topics: list[str]) -> None:
        """A SUBSCRIBE packet ``mid`` for ``topics`` is on its way."""
        self._pending_mids[mid] = topics

    def refuse(self, topics: list[str]) -> None:
        """``topics`` cannot be subscribed at all (paho rejected them): forget them, waiters get False."""
        for t in topics:
            self._topics.pop(t, None)
            self._resolve(t, False)

    def suback(self, mid: int, ok: bool) -> None:
        """The broker answered SUBSCRIBE packet ``mid``."""
        for topic in self._pending_mids.pop(mid, []):
            if topic not in self._topics:
                continue
            if ok:
                self._acked.add(topic)
            else:
                log.warning("broker refused subscription to %r", topic)
            self._resolve(topic, ok)

    def connection_changed(self) -> None:
        """A new or lost connection: nothing is acknowledged and no SUBSCRIBE is pending any more."""
        self._acked.clear()
        self._pending_mids.clear()

    def stop(self) -> None:
        """The transport stops: as :meth:`connection_changed`, and every waiter is cancelled."""
        self.connection_changed()
        for futs in self._waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.cancel()
        self._waiters.clear()

    def echoes_back(self, topic: str) -> bool:
        """Will the broker send a publish on ``topic`` back to us?"""
        if topic in self._topics:
            return True
        return any(("+" in sub or "#" in sub) and paho.topic_matches_sub(sub, topic) for sub in self._topics)

    def _resolve(self, topic: str, ok: bool) -> None:
        for fut in self._waiters.pop(topic, []):
            if not fut.done():
                fut.set_result(ok)
