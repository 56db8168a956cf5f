"""A hostile member, for dogfooding the attacks SECURITY.md lists: ``sdschat bot --hostile MOVE``.

It is what a real attacker inside the group is: a member with the channel key and an identity of its own,
running an ordinary node, plus a second broker connection on which it hears every frame (opening them with
the key) and publishes frames of its own making. For ``forge-acks``, ``reorder`` and ``flood`` its node only
listens (it publishes nothing of its own: no acknowledgement of its own to make up for the forged ones). Each
move plays one attack against everyone else in the channel; their nodes refuse and count it (the wire view,
``F5``, shows each refusal and why), or -- for the attacks SECURITY.md lists as not protected -- show its
effect:

``forge-acks``
    For each message a member publishes, a sync frame in another member's name acknowledging it (the
    acknowledgement a sender would believe), the same dressed as a repair answer, and the other member's last
    genuine message rebroadcast with the message added to its causal history. Refused: *impersonation*,
    *impersonation*, *bad_signature*; the sender keeps resending to whoever really lacks it.
``reorder``
    Each message a member publishes, relayed at once as a repair answer an hour ahead, with its causal
    history emptied, and with a made-up history entry. Refused: *bad_signature* (the author signed its
    Lamport time and history); every honest log keeps one order.
``withhold``
    Sends its ``count`` chat lines but publishes only every other one, never resends and never answers a
    repair request: the lines it published name the withheld ones in their causal history, so the others
    see them missing, ask, and after ``lost_after_ms`` declare them lost (not protected: a member can always
    withhold its own messages).
``flood``
    ``rate`` frames a second: random bytes (*undecryptable*) and sealed junk (*malformed*). Counted, not
    prevented (not protected: denial of service); real messages still get through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
from collections import Counter

from ..crypto import EnvelopeError, padded_size
from ..sds import WireError, wire
from ..transport import MqttTransport
from .frame import FrameError, pack, unpack

__all__ = ["MOVES", "HostileMember", "hostile_channel_config"]

MOVES = ("forge-acks", "reorder", "withhold", "flood")
#: how far ahead a reordered copy claims to be
AHEAD_MS = 3_600_000


def hostile_channel_config(move: str, base):
    """The engine settings a move needs: ``withhold`` never resends and never answers a repair request."""
    if move != "withhold":
        return base
    never = 10**12
    return dataclasses.replace(
        base,
        resend_unacknowledged_ms=never,
        resend_possibly_acknowledged_ms=never,
        resend_max_interval_ms=never,
        repair=dataclasses.replace(base.repair, enabled=False),
    )


class HostileMember:
    """One move (see the module's docstring) played by ``node``'s member; :meth:`run` until stopped."""

    def __init__(
        self, node, move: str, *, rate: float = 50.0, count: int = 10, interval: float = 1.0, seed: int | None = None
    ) -> None:
        if move not in MOVES:
            raise ValueError(f"unknown hostile move {move!r} (one of {', '.join(MOVES)})")
        self.node = node
        self.move = move
        self.rate = rate
        self.count = count
        self.interval = interval
        self.rng = random.Random(seed)
        #: what was published, by kind (``forged_sync``, ``reordered_ahead``, ``withheld``, ``garbage``, ...)
        self.published: Counter[str] = Counter()
        self._tap: MqttTransport | None = None
        #: the last genuine content frame heard from each member
        self._last: dict[str, wire.Message] = {}
        #: genuine content frames heard, for the move to answer
        self._queue: asyncio.Queue[wire.Message] = asyncio.Queue(maxsize=10_000)

    async def run(self, stop: asyncio.Event) -> Counter[str]:
        node = self.node
        if self.move != "withhold":
            node.set_impairment(loss_out=1.0)  # the node listens; this member speaks only through its moves
            self._tap = MqttTransport(node.broker_url, on_message=self._heard)
            await self._tap.start()
            if self.move != "flood":
                await self._tap.subscribe(node.key.topic)
        try:
            if self.move == "withhold":
                await self._withhold(stop)
            elif self.move == "flood":
                await self._flood(stop)
            else:
                await self._answer_frames(stop)
        finally:
            if self._tap is not None:
                await self._tap.stop()
        return self.published

    # ------------------------------------------------------------ hearing

    def _heard(self, topic: str, payload: bytes) -> None:
        node = self.node
        try:
            publisher, reason, frame = unpack(node.key.open(payload), node.key.channel_binding)
            msg = wire.decode(frame)
        except (EnvelopeError, FrameError, WireError):
            return
        if msg.sender_id != publisher or publisher == node.participant_id:
            return  # relays (ours or anyone's), and our own frames
        if msg.content is not None and msg.lamport_timestamp is not None and reason in ("message", "resend"):
            self._last[msg.sender_id] = msg
            if not self._queue.full():
                self._queue.put_nowait(msg)

    async def _answer_frames(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                msg = await asyncio.wait_for(self._queue.get(), 0.2)
            except TimeoutError:
                continue
            if self.move == "reorder":
                await self._reorder(msg)
            else:
                await self._forge_acks(msg)

    async def _publish(self, kind: str, frame: wire.Message, reason: str) -> None:
        node, tap = self.node, self._tap
        if tap is None:  # (the tap is up for as long as a move runs)
            return
        envelope = node.key.seal(pack(node.identity, node.key.channel_binding, wire.encode(frame), reason))
        if await tap.publish(node.key.topic, envelope):
            self.published[kind] += 1

    # ------------------------------------------------------------ the moves

    async def _reorder(self, msg: wire.Message) -> None:
        lamport = msg.lamport_timestamp or 0  # (only messages are queued: they have one)
        variants: tuple[tuple[str, int, list[wire.HistoryEntry]], ...] = (
            ("reordered_ahead", lamport + AHEAD_MS, msg.causal_history),
            ("reordered_no_history", lamport, []),
            (
                "reordered_added_history",
                lamport,
                [*msg.causal_history, wire.HistoryEntry(os.urandom(32).hex(), None, msg.sender_id)],
            ),
        )
        for kind, lamport, history in variants:
            if (lamport, history) == (msg.lamport_timestamp, msg.causal_history):
                continue  # the first message's history is empty already: that copy would be genuine
            await self._publish(
                kind,
                dataclasses.replace(
                    msg, lamport_timestamp=lamport, causal_history=history, bloom_filter=None, repair_request=[]
                ),
                "repair",
            )

    async def _forge_acks(self, msg: wire.Message) -> None:
        others = [m for m in self._last if m != msg.sender_id]
        if not others:
            return
        victim = self.rng.choice(others)  # who is made to seem to have the message
        now = int(time.time() * 1000)
        sync = wire.Message(
            sender_id=victim,
            message_id=os.urandom(32).hex(),
            channel_id=msg.channel_id,
            lamport_timestamp=now,
            causal_history=[wire.HistoryEntry(msg.message_id, None, msg.sender_id)],
        )
        await self._publish("forged_sync", sync, "sync")
        await self._publish("forged_sync_as_repair", sync, "repair")
        genuine = self._last[victim]
        relayed = dataclasses.replace(
            genuine,
            causal_history=[*genuine.causal_history, wire.HistoryEntry(msg.message_id, None, msg.sender_id)],
            bloom_filter=None,
            repair_request=[],
        )
        await self._publish("forged_history_relay", relayed, "repair")

    async def _withhold(self, stop: asyncio.Event) -> None:
        node = self.node
        for i in range(self.count):
            if stop.is_set() or node.failure:
                return
            withheld = i % 2 == 0 and i + 1 < self.count  # the last one is published: it names the one before
            if withheld:
                node.set_impairment(loss_out=1.0)
            await node.send_text(f"{node.nick} #{i}" + (" (withheld)" if withheld else ""))
            if withheld:
                await node.drain_outbox()
                node.set_impairment(loss_out=0.0)
            self.published["withheld" if withheld else "message"] += 1
            await _wait(stop, self.interval)

    async def _flood(self, stop: asyncio.Event) -> None:
        node = self.node
        period = 1.0 / self.rate
        next_at = time.monotonic()
        while not stop.is_set():
            if self.rng.random() < 0.5:
                kind, payload = "garbage", os.urandom(padded_size(self.rng.randrange(64, 20_000)))
            else:
                kind, payload = "sealed_junk", node.key.seal(os.urandom(self.rng.randrange(8, 2_000)))
            if self._tap is not None and await self._tap.publish(node.key.topic, payload):
                self.published[kind] += 1
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                await _wait(stop, delay)
            elif delay < -1.0:
                next_at = time.monotonic()  # fell behind: do not burst to catch up
                await asyncio.sleep(0)


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass
