"""Network impairment for dogfooding: a wrapper around any Transport.

Per node and changeable at run time (``set(...)``), it models a bad link
between this node and the broker:

- ``loss_in`` / ``loss_out``: probability that an incoming / outgoing frame is
  lost (silently: a lost publish still returns True, as on a real network);
- ``delay_ms`` and ``jitter_ms``: each frame crossing the link, either way, is
  held ``delay_ms +- uniform(jitter_ms)`` milliseconds (clamped at 0), so
  jitter reorders frames;
- ``duplicate``: probability that a frame crossing the link, either way, is
  delivered twice (each copy gets its own delay);
- ``offline``: as if unplugged: publishes are dropped (``publish`` returns
  False) and incoming frames are discarded, while the underlying MQTT
  connection may stay up. The wrapper's state then reads DISCONNECTED with
  detail "offline (impairment)"; the inner transport's real state stays
  available as ``inner.state``.

All randomness comes from one ``random.Random`` (pass ``rng`` or ``seed``), so
a run with the same seed and the same frame order makes the same decisions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

from .base import ConnectionState, Endpoint, MessageHandler, StateChange, Transport

__all__ = ["Impairment", "ImpairmentCounters", "ImpairedTransport"]

OFFLINE_DETAIL = "offline (impairment)"


@dataclasses.dataclass(frozen=True)
class Impairment:
    """Current impairment settings (immutable snapshot)."""

    loss_in: float = 0.0
    loss_out: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    duplicate: float = 0.0
    offline: bool = False

    def validated(self) -> Impairment:
        for name in ("loss_in", "loss_out", "duplicate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability between 0 and 1, got {value!r}")
        for name in ("delay_ms", "jitter_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 3_600_000:
                raise ValueError(f"{name} must be a number of milliseconds >= 0, got {value!r}")
        if not isinstance(self.offline, bool):
            raise ValueError(f"offline must be True or False, got {self.offline!r}")
        return self

    @property
    def active(self) -> bool:
        return self != Impairment()


@dataclasses.dataclass
class ImpairmentCounters:
    """What the wrapper did, in frames (copies for duplicates)."""

    dropped_in: int = 0  #: incoming frames lost (loss_in or offline)
    dropped_out: int = 0  #: outgoing frames lost (loss_out or offline)
    duplicated: int = 0  #: extra copies made, either direction
    delayed: int = 0  #: frame copies held back by delay/jitter, either direction
    passed_in: int = 0  #: frames delivered to the consumer
    passed_out: int = 0  #: frames handed to the inner transport


class ImpairedTransport(Endpoint):
    """Wrap ``inner`` (e.g. an MqttTransport) and impair what crosses it.

    Same interface as the inner transport (start/stop/publish/subscribe/
    messages/state...). Other attributes (``stats``, ``raw_socket()``, ...)
    are forwarded to ``inner``.
    """

    def __init__(
        self,
        inner: Transport,
        *,
        seed: int | None = None,
        rng: random.Random | None = None,
        on_message: MessageHandler | None = None,
        max_pending: int = 100_000,
        **settings: Any,
    ) -> None:
        super().__init__(on_message=on_message, max_pending=max_pending)
        self.inner = inner
        self.rng = rng if rng is not None else random.Random(seed)
        self.counters = ImpairmentCounters()
        self._settings = Impairment()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._remove_listener: Any = None
        inner.set_message_handler(self._on_inner_message)
        self._remove_listener = inner.add_state_listener(self._on_inner_state)
        if settings:
            self.set(**settings)

    def __getattr__(self, name: str) -> Any:
        # only called for attributes not found on the wrapper itself
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -------------------------------------------------------------- settings
    @property
    def settings(self) -> Impairment:
        return self._settings

    def set(self, **changes: Any) -> Impairment:
        """Change some settings now, e.g. ``set(loss_in=0.3, offline=False)``.

        Unknown names or out-of-range values raise ValueError and change nothing.
        """
        known = {f.name for f in dataclasses.fields(Impairment)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown impairment setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
        new = dataclasses.replace(self._settings, **changes).validated()
        was_offline = self._settings.offline
        self._settings = new
        if new.offline != was_offline:
            self._refresh_state()
        return new

    def reset(self) -> Impairment:
        """Back to an unimpaired link."""
        return self.set(**dataclasses.asdict(Impairment()))

    # ------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._open_queue()
        await self.inner.start()
        self._refresh_state()

    async def stop(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.inner.stop()
        self._refresh_state()
        self._close_queue()

    async def __aenter__(self) -> ImpairedTransport:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def subscribe(self, topic: str) -> asyncio.Future[bool]:
        return self.inner.subscribe(topic)

    def unsubscribe(self, topic: str) -> None:
        self.inner.unsubscribe(topic)

    # ----------------------------------------------------------------- state
    def _on_inner_state(self, change: StateChange) -> None:
        self._refresh_state()

    def _refresh_state(self) -> None:
        inner = self.inner.last_state_change if hasattr(self.inner, "last_state_change") else None
        state = self.inner.state
        detail = inner.detail if inner is not None else ""
        if self._settings.offline and state is not ConnectionState.STOPPED:
            self._set_state(ConnectionState.DISCONNECTED, OFFLINE_DETAIL)
        else:
            self._set_state(state, detail)

    # ------------------------------------------------------------ the link
    def _delay_s(self) -> float:
        s = self._settings
        if not s.delay_ms and not s.jitter_ms:
            return 0.0
        ms = s.delay_ms + (self.rng.uniform(-s.jitter_ms, s.jitter_ms) if s.jitter_ms else 0.0)
        return max(0.0, ms) / 1000.0

    def _copies(self) -> int:
        p = self._settings.duplicate
        if p and self.rng.random() < p:
            self.counters.duplicated += 1
            return 2
        return 1

    def _later(self, delay: float, fn: Any, *args: Any) -> None:
        loop = self._loop or asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            fn(*args)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    async def publish(self, topic: str, payload: bytes) -> bool:
        """Publish through the impaired link.

        False when offline (or when the inner transport is not connected);
        True when the frame was lost or is being delayed, as on a real link.
        """
        s = self._settings
        if s.offline:
            self.counters.dropped_out += 1
            return False
        if s.loss_out and self.rng.random() < s.loss_out:
            self.counters.dropped_out += 1
            return True
        ok = True
        for _ in range(self._copies()):
            delay = self._delay_s()
            if delay > 0:
                self.counters.delayed += 1
                self._later(delay, self._publish_later, topic, payload)
            else:
                sent = await self.inner.publish(topic, payload)
                if sent:
                    self.counters.passed_out += 1
                ok = ok and sent
        return ok

    def _publish_later(self, topic: str, payload: bytes) -> None:
        if self._settings.offline:  # unplugged while the frame was held back
            self.counters.dropped_out += 1
            return
        task = asyncio.ensure_future(self.inner.publish(topic, payload))
        self._tasks.add(task)
        task.add_done_callback(self._publish_done)

    def _publish_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is None and task.result():
            self.counters.passed_out += 1

    def _on_inner_message(self, topic: str, payload: bytes) -> None:
        s = self._settings
        if s.offline or (s.loss_in and self.rng.random() < s.loss_in):
            self.counters.dropped_in += 1
            return
        for _ in range(self._copies()):
            delay = self._delay_s()
            if delay > 0:
                self.counters.delayed += 1
                self._later(delay, self._arrive, topic, payload)
            else:
                self._arrive(topic, payload)

    def _arrive(self, topic: str, payload: bytes) -> None:
        if self._settings.offline:
            self.counters.dropped_in += 1
            return
        self.counters.passed_in += 1
        self._deliver(topic, payload)
