"""A deterministic two-participant scenario on the real engine, for the store tests.

Alice and Bob exchange messages over a lossy, delayed link (seeded) and tick
their channels. Every ``black_hole_every``-th message of Alice's does not reach
Bob in any copy (original, resend or repair) for ``black_hole_ms``, so Bob
keeps asking for it, declares it lost, and later gets it after all (a resend
slots it into its Lamport place). With a small bloom capacity the filters roll
over; ``max_resends`` evicts old own messages. Every
step returns each channel's drained journal, and the application rows a node
would write for the engine events (messages, status updates, events).

Run as a script (``python store_sim.py child DB SEED``) it is the child process
of the crash test: it persists Bob through a :class:`StoreWriter` forever and
prints ``flushed STEP`` after each awaited flush, until it is killed.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field

from sdschat.sds import (
    Acknowledged,
    ChannelConfig,
    Delivered,
    Lost,
    MessageChannel,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairConfig,
    RepairServed,
    SyncReceived,
)

CHANNEL = "room"
T0 = 1_700_000_000_000


def config() -> ChannelConfig:
    return ChannelConfig(
        causal_history_size=2,
        bloom_capacity=20,
        resend_unacknowledged_ms=400,
        resend_possibly_acknowledged_ms=900,
        resend_max_interval_ms=3_000,
        max_resends=8,
        sync_interval_ms=700,
        sync_jitter_ms=200,
        lost_after_ms=2_500,
        repair=RepairConfig(t_min_ms=150, t_max_ms=600, cache_size=15),
    )


@dataclass
class AppRows:
    """What a node would hand to ``Store.apply`` next to the journal."""

    messages: list = field(default_factory=list)
    message_updates: list = field(default_factory=list)
    events: list = field(default_factory=list)
    participants: list = field(default_factory=list)


def app_rows(me: str, events, now: int, step: int) -> AppRows:
    from sdschat.store import EventRow, MessageRow, MessageUpdate, ParticipantRow

    rows = AppRows()
    detail = {"step": step}
    for ev in events:
        if isinstance(ev, Outgoing):
            if ev.reason == "message":
                rows.events.append(EventRow("sent", now, ev.message_id, me, None, ev.lamport_timestamp, detail))
            elif ev.reason == "resend":
                rows.message_updates.append(MessageUpdate(ev.message_id, state="unacknowledged"))
                rows.events.append(EventRow("resent", now, ev.message_id, me, None, ev.lamport_timestamp, detail))
            elif ev.reason == "sync":
                rows.events.append(EventRow("sync_sent", now, ev.message_id, me, None, ev.lamport_timestamp, detail))
            if ev.repair_request:
                rows.events.append(
                    EventRow(
                        "repair_requested",
                        now,
                        ev.message_id,
                        me,
                        None,
                        None,
                        {**detail, "ids": list(ev.repair_request)},
                    )
                )
        elif isinstance(ev, Delivered):
            rows.messages.append(
                MessageRow(
                    ev.message_id,
                    ev.sender_id,
                    ev.lamport_timestamp,
                    ev.content,
                    "delivered",
                    repaired=ev.repaired,
                    after_lost=ev.after_lost,
                    received_at_ms=now,
                )
            )
            rows.events.append(
                EventRow("delivered", now, ev.message_id, ev.sender_id, None, ev.lamport_timestamp, detail)
            )
            rows.participants.append(ParticipantRow(ev.sender_id, ev.sender_id.title(), now, now))
        elif isinstance(ev, Missing):
            rows.messages.append(
                MessageRow(
                    ev.message_id, ev.sender_id, ev.lamport_timestamp, ev.content, "missing_deps", received_at_ms=now
                )
            )
            rows.events.append(
                EventRow(
                    "missing",
                    now,
                    ev.message_id,
                    ev.sender_id,
                    None,
                    ev.lamport_timestamp,
                    {**detail, "missing": [e.message_id for e in ev.missing]},
                )
            )
        elif isinstance(ev, Acknowledged):
            rows.message_updates.append(MessageUpdate(ev.message_id, state="acknowledged"))
            rows.events.append(EventRow("acked", now, ev.message_id, me, None, None, detail))
        elif isinstance(ev, PossiblyAcknowledged):
            rows.message_updates.append(
                MessageUpdate(ev.message_id, state="possibly_acknowledged", possible_ack_count=ev.count)
            )
            rows.events.append(
                EventRow("possibly_acked", now, ev.message_id, me, None, None, {**detail, "count": ev.count})
            )
        elif isinstance(ev, Lost):
            rows.events.append(EventRow("lost", now, ev.message_id, ev.sender_id, None, None, detail))
        elif isinstance(ev, RepairServed):
            rows.events.append(EventRow("repair_served", now, ev.message_id, ev.sender_id, None, None, detail))
        elif isinstance(ev, SyncReceived):
            rows.events.append(
                EventRow("sync_received", now, ev.message_id, ev.sender_id, None, ev.lamport_timestamp, detail)
            )
        elif isinstance(ev, Rejected):
            rows.events.append(
                EventRow("rejected", now, ev.message_id, ev.sender_id, None, None, {**detail, "reason": ev.reason})
            )
    return rows


class Sim:
    """Alice and Bob over a lossy link. ``step()`` advances the world by one event-loop-sized step."""

    def __init__(
        self, seed: int = 1, loss: float = 0.25, black_hole_every: int = 9, black_hole_ms: int = 5_000
    ) -> None:
        self.rng = random.Random(seed)
        self.loss = loss
        self.black_hole_every = black_hole_every
        self.black_hole_ms = black_hole_ms
        self.cfg = config()
        self.now = T0
        self.step_no = 0
        self.chans = {
            "alice": MessageChannel(CHANNEL, "alice", self.cfg, T0, journal=True),
            "bob": MessageChannel(CHANNEL, "bob", self.cfg, T0, journal=True),
        }
        self.sent = {"alice": 0, "bob": 0}
        self.black_hole: dict[str, int] = {}  # message_id -> dropped towards Bob until this time
        self.in_flight: list[tuple[int, str, bytes, str]] = []  # (due, to, frame, message_id)
        self.silent = False  # True: no new messages, only ticks (lets the scenario settle)

    def _route(self, sender: str, outs) -> None:
        to = "bob" if sender == "alice" else "alice"
        for o in outs:
            if not isinstance(o, Outgoing):
                continue
            if to == "bob" and self.black_hole.get(o.message_id, 0) > self.now:
                continue
            if self.rng.random() < self.loss:
                continue
            self.in_flight.append((self.now + self.rng.randint(5, 120), to, o.data, o.message_id))

    def step(self) -> dict[str, tuple[list[tuple], AppRows]]:
        """Advance; return ``{name: (journal_ops, app_rows)}`` for both participants."""
        self.step_no += 1
        self.now += self.rng.randint(10, 150)
        now = self.now
        evs: dict[str, list] = {"alice": [], "bob": []}
        # deliveries that are due
        due = [f for f in self.in_flight if f[0] <= now]
        self.in_flight = [f for f in self.in_flight if f[0] > now]
        for _, to, data, _mid in sorted(due, key=lambda f: (f[0], f[3])):
            out = self.chans[to].receive(data, now)
            evs[to].extend(out)
        # new messages
        if not self.silent:
            for name in ("alice", "bob"):
                if self.rng.random() < (0.45 if name == "alice" else 0.3):
                    k = self.sent[name]
                    self.sent[name] += 1
                    o = self.chans[name].send(f"{name} says {k}".encode(), now)
                    if name == "alice" and k % self.black_hole_every == self.black_hole_every - 1:
                        self.black_hole[o.message_id] = now + self.black_hole_ms
                    evs[name].append(o)
                    self._route(name, [o])
        # timers
        for name in ("alice", "bob"):
            ch = self.chans[name]
            if ch.next_deadline() <= now:
                out = ch.tick(now)
                evs[name].extend(out)
                self._route(name, out)
        # record retrieval hints of delivered messages (as the node does with envelope hashes)
        for name in ("alice", "bob"):
            ch = self.chans[name]
            for ev in evs[name]:
                if isinstance(ev, Delivered) and self.rng.random() < 0.5:
                    ch.set_retrieval_hint(ev.message_id, ev.message_id[:8].encode())
        return {
            name: (self.chans[name].drain_journal(), app_rows(name, evs[name], now, self.step_no))
            for name in ("alice", "bob")
        }


# ------------------------------------------------------------------ comparing states

#: ChannelState fields the engine does not journal (only snapshots carry them).
UNJOURNALED = ("last_activity", "sync_counter", "next_sync_at", "recent_syncs", "recent_log")
_SET_LIKE = ("outgoing", "incoming", "missing", "lost", "repair_requests", "repair_responses", "cache", "recent_syncs")


def compare_states(loaded, snap, *, skip=(), ordered: bool = True) -> list[str]:
    """Field-by-field differences between two ChannelStates (empty when equal).

    ``log`` and ``bloom_ids`` must match in order. The other lists mirror engine
    dicts; with ``ordered=False`` they are compared as sets, with ``ordered=True``
    their order (the engine's insertion order, which eviction depends on) must
    match too.
    """
    problems = []
    for name in type(snap).__dataclass_fields__:
        if name in skip:
            continue
        a, b = getattr(loaded, name), getattr(snap, name)
        if name in _SET_LIKE and not ordered:
            if len(a) != len(b) or set(a) != set(b):
                problems.append(
                    f"{name}: loaded has {sorted(set(a) - set(b), key=repr)[:3]} extra, "
                    f"misses {sorted(set(b) - set(a), key=repr)[:3]}"
                )
        elif a != b:
            if isinstance(a, list):
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                problems.append(
                    f"{name}: differs at index {first} (lengths {len(a)} vs {len(b)}): "
                    f"{a[first] if first < len(a) else None!r} vs {b[first] if first < len(b) else None!r}"
                )
            else:
                problems.append(f"{name}: {a!r} vs {b!r}")
    return problems


# ------------------------------------------------------------------ crash child


async def _child(db: str, seed: int) -> None:
    import asyncio
    import json

    from sdschat.store import Store, StoreWriter

    store = await Store.open(db)
    writer = StoreWriter(store)
    sim = Sim(seed)
    bob = sim.chans["bob"]
    await store.save_state(bob.snapshot(), json.dumps({"bloom_capacity": sim.cfg.bloom_capacity}))
    bob.drain_journal()
    print("ready", flush=True)
    while True:
        out = sim.step()
        ops, rows = out["bob"]
        writer.submit(
            CHANNEL,
            ops,
            messages=rows.messages,
            message_updates=rows.message_updates,
            events=rows.events,
            participants=rows.participants,
        )
        if sim.step_no % 7 == 0:
            await writer.flush()  # as the node does before publishing
            print(f"flushed {sim.step_no}", flush=True)
        else:
            await asyncio.sleep(0)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "child":
        import asyncio

        asyncio.run(_child(sys.argv[2], int(sys.argv[3])))
    else:
        print("usage: store_sim.py child DB SEED", file=sys.stderr)
        raise SystemExit(2)
