"""Shared helpers for the SDS engine tests: frame builders, event filters and a
deterministic broadcast network in virtual time that drives real engines."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable

from sdschat.sds import (
    ChannelConfig,
    Event,
    HistoryEntry,
    Message,
    MessageChannel,
    Outgoing,
    RepairConfig,
    wire,
)

CHANNEL = "chan"


# --------------------------------------------------------------------- configs


def quiet_config(**overrides) -> ChannelConfig:
    """A config where nothing periodic happens unless a test asks for it."""
    repair = overrides.pop("repair", RepairConfig(t_min_ms=1_000, t_max_ms=5_000))
    base = dict(
        bloom_capacity=1_000,
        bloom_error_rate=0.001,
        resend_unacknowledged_ms=10**9,
        resend_possibly_acknowledged_ms=10**9,
        sync_interval_ms=10**9,
        sync_jitter_ms=0,
        lost_after_ms=10**9,
        repair=repair,
    )
    base.update(overrides)
    return ChannelConfig(**base)


def channel(name: str, config: ChannelConfig | None = None, now: int = 0, **kw) -> MessageChannel:
    return MessageChannel(CHANNEL, name, config or quiet_config(), now, **kw)


# ---------------------------------------------------------------------- frames


def entry(x: str | HistoryEntry, sender: str | None = None) -> HistoryEntry:
    return x if isinstance(x, HistoryEntry) else HistoryEntry(x, None, sender)


def frame(
    sender: str,
    message_id: str,
    *,
    lamport: int | None = 1,
    history: Iterable[str | HistoryEntry] = (),
    bloom: bytes | None = None,
    repair: Iterable[str | HistoryEntry] = (),
    content: bytes | None = b"payload",
    channel_id: str = CHANNEL,
) -> bytes:
    """Encode an SDS frame by hand (as a foreign implementation would)."""
    return wire.encode(
        Message(
            sender_id=sender,
            message_id=message_id,
            channel_id=channel_id,
            lamport_timestamp=lamport,
            causal_history=[entry(h) for h in history],
            bloom_filter=bloom,
            repair_request=[entry(r) for r in repair],
            content=content,
        )
    )


def decode(data: bytes) -> Message:
    return wire.decode(data)


# ---------------------------------------------------------------------- events


def of(events: Iterable, cls) -> list:
    return [e for e in events if isinstance(e, cls)]


def outgoing(events: Iterable, reason: str | None = None) -> list[Outgoing]:
    return [e for e in events if isinstance(e, Outgoing) and (reason is None or e.reason == reason)]


def mids(events: Iterable) -> list[str]:
    return [e.message_id for e in events]


# --------------------------------------------------------------------- network


class Network:
    """A broadcast medium in virtual time between real ``MessageChannel`` engines.

    Every frame a node emits goes to every other node after ``latency`` ms
    (plus random extra delay, duplicates and loss when an ``rng`` is given).
    ``drop(src, dst, outgoing, now)`` can remove chosen deliveries. Nodes are
    ticked at their ``next_deadline()``; scheduled sends happen at their time.
    ``wire`` records every frame put on the medium as ``(time, src, Outgoing)``.
    """

    def __init__(
        self,
        nodes: dict[str, MessageChannel],
        *,
        latency: int = 5,
        rng: random.Random | None = None,
        loss: float = 0.0,
        dup: float = 0.0,
        jitter: int = 0,
        drop: Callable[[str, str, Outgoing, int], bool] | None = None,
        echo: bool = False,
    ) -> None:
        self.nodes = nodes
        self.latency = latency
        self.rng = rng
        self.loss = loss
        self.dup = dup
        self.jitter = jitter
        self.drop = drop
        self.echo = echo
        self.now = 0
        self._queue: list[tuple[int, int, str, bytes]] = []
        self._sends: list[tuple[int, int, str, bytes]] = []
        self._seq = 0
        self._spins = 0
        self.wire: list[tuple[int, str, Outgoing]] = []
        self.events: dict[str, list[tuple[int, Event]]] = {n: [] for n in nodes}
        self.sent: dict[str, str] = {}  # message_id -> sender, every content message sent

    # scheduling ------------------------------------------------------------
    def schedule_send(self, t: int, node: str, content: bytes) -> None:
        self._seq += 1
        heapq.heappush(self._sends, (t, self._seq, node, content))

    def send(self, node: str, content: bytes, t: int | None = None) -> Outgoing:
        """Send now (or at ``t``, which must not be in the past) and broadcast."""
        if t is not None:
            assert t >= self.now
            self.now = t
        out = self.nodes[node].send(content, self.now)
        self.sent[out.message_id] = node
        self.broadcast(node, out)
        return out

    def broadcast(self, src: str, out: Outgoing) -> None:
        self.wire.append((self.now, src, out))
        rng = self.rng
        for dst in self.nodes:
            if dst == src and not self.echo:
                continue
            if self.drop is not None and self.drop(src, dst, out, self.now):
                continue
            copies = 1
            if rng is not None:
                if self.loss and rng.random() < self.loss:
                    continue
                if self.dup and rng.random() < self.dup:
                    copies = 2
            for _ in range(copies):
                delay = self.latency + (rng.randint(0, self.jitter) if rng is not None and self.jitter else 0)
                self._seq += 1
                heapq.heappush(self._queue, (self.now + delay, self._seq, dst, out.data))

    def _handle(self, node: str, events: list[Event]) -> None:
        log = self.events[node]
        for e in events:
            log.append((self.now, e))
            if isinstance(e, Outgoing):
                self.broadcast(node, e)

    # running ---------------------------------------------------------------
    def step(self, t_end: int) -> bool:
        """Advance to the next thing that happens (at most ``t_end``). False when nothing is left before it."""
        t = min(n.next_deadline() for n in self.nodes.values())
        if self._queue:
            t = min(t, self._queue[0][0])
        if self._sends:
            t = min(t, self._sends[0][0])
        if t > t_end:
            self.now = max(self.now, t_end)
            return False
        if t <= self.now:
            self._spins += 1
            # an engine whose next_deadline() stays in the past after tick() would hang the run
            assert self._spins < 10_000, f"no progress at t={self.now}: next_deadline() stays due"
        else:
            self._spins = 0
        self.now = max(self.now, t)
        while self._queue and self._queue[0][0] <= self.now:
            _, _, dst, data = heapq.heappop(self._queue)
            self._handle(dst, self.nodes[dst].receive(data, self.now))
        while self._sends and self._sends[0][0] <= self.now:
            _, _, node, content = heapq.heappop(self._sends)
            self.send(node, content)
        for name, node in self.nodes.items():
            if node.next_deadline() <= self.now:
                self._handle(name, node.tick(self.now))
        return True

    def run_until(self, t_end: int, until: Callable[[], bool] | None = None) -> None:
        while self.step(t_end):
            if until is not None and until():
                return

    def flush(self) -> None:
        """Deliver every frame in flight (without ticking anybody)."""
        while self._queue:
            t, _, dst, data = heapq.heappop(self._queue)
            self.now = max(self.now, t)
            self._handle(dst, self.nodes[dst].receive(data, self.now))

    # views -----------------------------------------------------------------
    def frames_for(self, message_id: str, reasons: tuple[str, ...] = ("message", "resend", "repair")) -> list:
        return [(t, src, o) for t, src, o in self.wire if o.message_id == message_id and o.reason in reasons]

    def node_events(self, node: str, cls=None) -> list:
        return [e for _, e in self.events[node] if cls is None or isinstance(e, cls)]


# ------------------------------------------------------------- a lossy scenario


def lossy_config(**kw) -> ChannelConfig:
    """Fast timings for a lossy three-member run (:func:`lossy_three`): resends, syncs, SDS-R, gap hints."""
    base = dict(
        causal_history_size=4,
        bloom_capacity=64,
        bloom_error_rate=0.01,
        resend_unacknowledged_ms=400,
        resend_possibly_acknowledged_ms=1_200,
        resend_backoff=1.5,
        resend_max_interval_ms=3_000,
        sync_interval_ms=700,
        sync_jitter_ms=300,
        lost_after_ms=6_000,
        repair=RepairConfig(t_min_ms=200, t_max_ms=1_500, cache_size=40),
        gap_hints=3,
        gap_hint_margin_ms=300,
    )
    base.update(kw)
    return quiet_config(**base)


def lossy_three(seed: int, **config) -> tuple[Network, dict[str, list[str]]]:
    """Three members send 60 messages each over 8 s through 25% loss, 10% duplicates and up to 400 ms of
    jitter, then the loss stops and they settle; returns the network and each member's events as text."""
    cfg = lossy_config(**config)
    names = ["alice", "bob", "carol"]
    nodes = {n: MessageChannel(CHANNEL, n, cfg, 0) for n in names}
    net = Network(nodes, latency=20, rng=random.Random(seed), loss=0.25, dup=0.1, jitter=400)
    rng = random.Random(seed + 1)
    for n in names:
        for i in range(60):
            net.schedule_send(rng.randint(0, 8_000), n, f"{n}:{i}:{seed}".encode())
    net.run_until(8_500)
    net.loss = 0.0
    net.run_until(40_000)
    seen = {n: [f"{t} {e!r}" for t, e in net.events[n]] for n in names}
    return net, seen
