"""What every transport in this package shares: messages, connection states,
and delivery to asyncio consumers.

Everything here runs on the asyncio loop thread. A transport with work on
another thread hops onto the loop with ``loop.call_soon_threadsafe`` before
touching any of it (the MQTT transport has none: paho runs on the loop).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "ConnectionState",
    "StateChange",
    "Message",
    "MessageHandler",
    "StateListener",
    "Transport",
]

log = logging.getLogger("sdschat.transport")


class ConnectionState(str, enum.Enum):
    """Connection state as the UI shows it."""

    #: not started yet, or stopped by ``stop()``
    STOPPED = "stopped"
    #: a connection attempt is under way (first or a reconnect)
    CONNECTING = "connecting"
    #: connected to the broker; publishes go out
    CONNECTED = "connected"
    #: connection lost or refused; retrying with backoff; publishes are dropped
    DISCONNECTED = "disconnected"

    def __str__(self) -> str:
        return self.value


class StateChange(NamedTuple):
    """One state transition. ``detail`` is a short human reason ('' if none)."""

    state: ConnectionState
    detail: str = ""
    at: float = 0.0  # time.monotonic() of the change


class Message(NamedTuple):
    """An incoming frame: unpack as ``topic, payload = msg``."""

    topic: str
    payload: bytes


MessageHandler = Callable[[str, bytes], None]
StateListener = Callable[[StateChange], None]


@runtime_checkable
class Transport(Protocol):
    """The interface the node programs against (MqttTransport, ImpairedTransport)."""

    @property
    def state(self) -> ConnectionState: ...

    @property
    def last_state_change(self) -> StateChange: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def publish(self, topic: str, payload: bytes) -> bool: ...

    def subscribe(self, topic: str) -> asyncio.Future[bool]: ...

    def unsubscribe(self, topic: str) -> None: ...

    def set_message_handler(self, handler: MessageHandler | None) -> None: ...

    def messages(self) -> AsyncIterator[Message]: ...

    async def receive(self) -> Message: ...

    def add_state_listener(self, listener: StateListener) -> Callable[[], None]: ...

    def state_changes(self) -> AsyncIterator[StateChange]: ...

    async def wait_for_state(self, state: ConnectionState, timeout: float | None = None) -> None: ...


_CLOSED = object()


class Endpoint:
    """Message delivery and state observation, shared by all transports.

    Incoming messages go to the handler set with :meth:`set_message_handler`
    (called on the loop thread, exceptions logged and swallowed) or, if no
    handler is set, into a queue read with ``async for topic, payload in
    t.messages()`` / ``await t.receive()``. The queue holds at most
    ``max_pending`` messages; past that, new ones are dropped and counted in
    ``queue_overflow`` (like a broker's per-client queue).
    """

    def __init__(self, *, on_message: MessageHandler | None = None, max_pending: int = 100_000) -> None:
        self._handler: MessageHandler | None = on_message
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._max_pending = max_pending
        self.queue_overflow = 0
        self._state_change = StateChange(ConnectionState.STOPPED, "", time.monotonic())
        self._listeners: list[StateListener] = []
        self._closed = False

    # ----------------------------------------------------------------- messages
    def set_message_handler(self, handler: MessageHandler | None) -> None:
        """Deliver incoming ``(topic, payload)`` to ``handler`` instead of the queue."""
        self._handler = handler

    def _deliver(self, topic: str, payload: bytes) -> None:
        handler = self._handler
        if handler is not None:
            try:
                handler(topic, payload)
            except Exception:  # a consumer bug must not kill the transport
                log.exception("message handler raised; message dropped")
            return
        if self._closed:
            return
        if self._max_pending and self._queue.qsize() >= self._max_pending:
            self.queue_overflow += 1
            return
        self._queue.put_nowait(Message(topic, payload))

    async def receive(self) -> Message:
        """Wait for the next message (only when no handler is set).

        Raises :class:`EOFError` once the transport is stopped and drained.
        """
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)  # wake any other waiter too
            raise EOFError("transport stopped")
        return item  # type: ignore[return-value]

    async def messages(self) -> AsyncIterator[Message]:
        """Iterate incoming messages until the transport is stopped."""
        while True:
            try:
                yield await self.receive()
            except EOFError:
                return

    def __aiter__(self) -> AsyncIterator[Message]:
        return self.messages()

    def _open_queue(self) -> None:
        """Accept messages again after a stop (drops the old end marker)."""
        self._closed = False
        kept = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not _CLOSED:
                kept.append(item)
        for item in kept:
            self._queue.put_nowait(item)

    def _close_queue(self) -> None:
        self._closed = True
        self._queue.put_nowait(_CLOSED)

    # ------------------------------------------------------------------- state
    @property
    def state(self) -> ConnectionState:
        return self._state_change.state

    @property
    def last_state_change(self) -> StateChange:
        return self._state_change

    def add_state_listener(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener(StateChange)`` on the loop thread on every change.

        Returns a function that removes the listener.
        """
        self._listeners.append(listener)

        def remove() -> None:
            try:
                self._listeners.remove(listener)
            except ValueError:
                pass

        return remove

    async def state_changes(self) -> AsyncIterator[StateChange]:
        """Yield the current state, then every change, until the consumer stops."""
        queue: asyncio.Queue[StateChange] = asyncio.Queue()
        remove = self.add_state_listener(queue.put_nowait)
        try:
            yield self._state_change
            while True:
                yield await queue.get()
        finally:
            remove()

    async def wait_for_state(self, state: ConnectionState, timeout: float | None = None) -> None:
        """Return once the state is ``state`` (raises TimeoutError after ``timeout``)."""
        if self.state == state:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def check(change: StateChange) -> None:
            if change.state == state and not fut.done():
                fut.set_result(None)

        remove = self.add_state_listener(check)
        try:
            await asyncio.wait_for(fut, timeout)
        finally:
            remove()

    def _set_state(self, state: ConnectionState, detail: str = "") -> None:
        if state == self._state_change.state and detail == self._state_change.detail:
            return
        self._state_change = change = StateChange(state, detail, time.monotonic())
        log.debug("transport state: %s%s", state.value, f" ({detail})" if detail else "")
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("state listener raised")
