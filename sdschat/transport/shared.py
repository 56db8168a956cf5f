"""One MQTT connection for many channels: each channel gets a view that sees only its own topics.

:class:`SharedConnection` owns one transport (usually an :class:`MqttTransport`)
and routes every incoming message by its exact topic to the :class:`TopicView`
that subscribed to it. A view has the whole :class:`Transport` interface, so a
node (and its impairment wrapper) uses it like a connection of its own; stopping
a view releases its topics and leaves the connection up for the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .base import ConnectionState, Endpoint, StateChange, Transport

__all__ = ["SharedConnection", "TopicView"]


#: messages held for topics no view holds yet (the oldest are dropped beyond it; SDS repairs what is lost)
HOLD_MAX = 20_000


class SharedConnection:
    def __init__(self, transport: Transport, *, keep: Callable[[str], bool] | None = None, hold: bool = False) -> None:
        self.transport = transport
        self._routes: dict[str, list[TopicView]] = {}
        #: messages on a topic no view held, dropped (a channel left, or more than HOLD_MAX waiting)
        self.unrouted = 0
        #: messages on topics no view holds yet, in arrival order, until one subscribes (see the module)
        self._held: dict[str, list[bytes]] = {}
        self._held_count = 0
        self._keep = keep
        self._holding = hold
        self._closing = False
        transport.set_message_handler(self._dispatch)

    def closing(self) -> None:
        """The connection is about to close with its views: their topics that ``keep`` names stay subscribed at
        the broker (a kept session goes on queueing for them)."""
        self._closing = True

    def held_topics(self) -> list[str]:
        """Topics with messages held for a view that has not come."""
        return list(self._held)

    def settled(self) -> None:
        """Every view that was coming has come: hold nothing more, and drop what is held for topics no view took
        (a kept session's channel that is no longer ours), unsubscribing them at the broker."""
        self._holding = False
        for topic in list(self._held):
            self.unrouted += len(self._held.pop(topic))
            if topic not in self._routes:
                self.transport.unsubscribe(topic)
        self._held_count = 0

    async def start(self) -> None:
        await self.transport.start()

    async def stop(self) -> None:
        await self.transport.stop()

    def view(self) -> TopicView:
        return TopicView(self)

    @property
    def topics(self) -> list[str]:
        return sorted(self._routes)

    def _dispatch(self, topic: str, payload: bytes) -> None:
        views = self._routes.get(topic)
        if not views:
            if not self._holding or self._closing:
                self.unrouted += 1
                return
            self._held.setdefault(topic, []).append(payload)
            self._held_count += 1
            if self._held_count > HOLD_MAX:  # the oldest topic's oldest message goes
                oldest = next(iter(self._held))
                queue = self._held[oldest]
                queue.pop(0)
                if not queue:
                    del self._held[oldest]
                self._held_count -= 1
                self.unrouted += 1
            return
        for view in views:
            view._deliver(topic, payload)

    def _route(self, topic: str, view: TopicView) -> asyncio.Future[bool]:
        views = self._routes.setdefault(topic, [])
        if view not in views:
            views.append(view)
        held = self._held.pop(topic, None)
        if held:
            self._held_count -= len(held)
            for payload in held:
                view._deliver(topic, payload)
        return self.transport.subscribe(topic)

    def _release(self, topic: str, view: TopicView) -> None:
        views = self._routes.get(topic, [])
        if view in views:
            views.remove(view)
        if not views:
            self._routes.pop(topic, None)
            if not (self._closing and self._keep is not None and self._keep(topic)):
                self.transport.unsubscribe(topic)


class TopicView(Endpoint):
    """The :class:`Transport` interface over a :class:`SharedConnection`, for the topics it subscribes."""

    def __init__(self, shared: SharedConnection) -> None:
        super().__init__()
        self.shared = shared
        self._topics: list[str] = []
        self._remove_listener: Any = None

    def __getattr__(self, name: str) -> Any:  # stats, raw_socket(), ...: the shared connection's
        if name.startswith("__") or name == "shared":
            raise AttributeError(name)
        return getattr(self.shared.transport, name)

    async def start(self) -> None:
        """Follow the shared connection's state (its owner starts and stops it)."""
        self._open_queue()
        if self._remove_listener is None:
            self._remove_listener = self.shared.transport.add_state_listener(self._follow)
        self._follow(self.shared.transport.last_state_change)

    async def stop(self) -> None:
        for topic in list(self._topics):
            self.unsubscribe(topic)
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        self._set_state(ConnectionState.STOPPED)
        self._close_queue()

    def _follow(self, change: StateChange) -> None:
        self._set_state(change.state, change.detail)

    async def publish(self, topic: str, payload: bytes) -> bool:
        return await self.shared.transport.publish(topic, payload)

    def subscribe(self, topic: str) -> asyncio.Future[bool]:
        if topic not in self._topics:
            self._topics.append(topic)
        return self.shared._route(topic, self)

    def unsubscribe(self, topic: str) -> None:
        if topic in self._topics:
            self._topics.remove(topic)
        self.shared._release(topic, self)
