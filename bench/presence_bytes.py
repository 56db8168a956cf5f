"""Bytes of presence beats against all of a channel's bytes on the broker, at a chat rate.

    .venv/bin/python bench/presence_bytes.py [--members 5] [--lines-per-minute 2] [--minutes 30] [--scale 10]
                                             [--every 120] [--smoke]

--members real nodes (the node's settings) over the embedded broker talk for
--minutes minutes: lines of 80 characters from a random member, --lines-per-minute
a minute for the whole channel (Poisson), typing notices before each. Every
timing (the engine's resends, syncs, acks and repairs; the presence beat interval
--every seconds; the chat rate) runs --scale times faster than in life, so half an
hour takes three minutes; the bytes per frame do not depend on it.

A raw MQTT client subscribed to the channel adds up every envelope the broker
relays (once per frame, whoever receives it), opens it with the channel key and
files it by what it carries: a message, a sync, a resend, a repair answer, or an
ephemeral typing notice, greeting or presence beat. The first minute (starts,
joins, greetings, the start beats and their answers) is counted apart.

Printed: the bytes of each kind, the beats and their share of the channel's
bytes (the issue asks for less than 1%), and the periodic syncs a member brought
forward in a beat's place. With --idle, the same for an idle channel (no lines).
With --compare, each case runs again with no beat at all (the same lines at the
same times), and the difference in the channel's bytes is what presence costs.

Two live runs differ by more than presence: the broker's timing decides which
member syncs when, and a run's bytes move by 2-3% from one run to the next.
With --simulated, the same channel runs in simulated time instead, as real
time --runs times (seeds 1..N), with and without beats: the engine with the
node's settings and the node's presence keeper, every frame signed, packed and
sealed as the node does (its bytes are the envelope's), and delivered to every
other member 5-30 ms later. Both runs of a seed see the same lines at the same
times and the same delays, so what differs is presence alone: printed per
seed, and as a median and in all.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import random
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from kit import broker_tap

from sdschat.crypto import ChannelKey, EnvelopeError, Identity, SignatureError, read_signed_content
from sdschat.node import AppPayload, Node, NodeConfig, PayloadError, node_channel_config, signer
from sdschat.node.config import BEAT_EVERY_MS
from sdschat.node.frame import FrameError, pack, unpack
from sdschat.node.presence import PresenceKeeper
from sdschat.sds import MessageChannel, Outgoing, WireError, wire

#: the engine timings a node uses (ms), scaled down together with the beat interval and the chat rate
TIMINGS = (
    "resend_unacknowledged_ms",
    "resend_possibly_acknowledged_ms",
    "resend_max_interval_ms",
    "sync_interval_ms",
    "sync_jitter_ms",
    "ack_delay_ms",
    "ack_jitter_ms",
    "lost_after_ms",
)
WARMUP_MIN = 1.0
#: a beat interval no run reaches: presence without beats (--compare)
NEVER_S = 10**7
LINE = "the quick brown fox jumps over a lazy dog and then some more words follow here ok"[:80]


def scaled_config(scale: float):
    base = node_channel_config()
    over = {name: max(1, int(getattr(base, name) / scale)) for name in TIMINGS}
    over["repair_t_min_ms"] = max(1, int(base.repair.t_min_ms / scale))
    over["repair_t_max_ms"] = max(2, int(base.repair.t_max_ms / scale))
    return node_channel_config(**over)


def gap_s(rng: random.Random, lines_per_minute: float, scale: float) -> float:
    """Seconds (scaled) to the channel's next line: Poisson at ``lines_per_minute``; none at 0."""
    return rng.expovariate(lines_per_minute / 60 * scale) if lines_per_minute > 0 else float("inf")


def kind_of(key: ChannelKey, binding: bytes, envelope: bytes) -> str:
    """What an envelope carries: ``message``, ``sync``, ``resend``, ``repair``, ``typing``, ``hello``,
    ``presence`` (or ``other``)."""
    try:
        _, reason, frame = unpack(key.open(envelope), binding)
        msg = wire.decode(frame)
    except (EnvelopeError, FrameError, WireError):
        return "other"
    if reason != "ephemeral":
        return reason
    try:
        return AppPayload.decode(read_signed_content(msg.content or b"").message).kind
    except (SignatureError, PayloadError):
        return "other"


async def measure(members: int, lines_per_minute: float, minutes: float, scale: float, every_s: float) -> dict:
    key = ChannelKey.generate("presence-bytes")
    counted: dict[str, Counter] = {"warmup": Counter(), "steady": Counter()}
    frames: dict[str, Counter] = {"warmup": Counter(), "steady": Counter()}
    phase = ["warmup"]
    loop = asyncio.get_running_loop()
    raw: list[bytes] = []

    def file_all() -> None:
        for envelope in raw:
            kind = kind_of(key, key.channel_binding, envelope)
            counted[phase[0]][kind] += len(envelope)
            frames[phase[0]][kind] += 1
        raw.clear()

    rng = random.Random(7)
    tap = broker_tap("sdschat/#", lambda payload: loop.call_soon_threadsafe(raw.append, payload))
    async with tap as (url, nodes):
        with tempfile.TemporaryDirectory(prefix="sdschat-presence-bytes-") as tmp:
            for i in range(members):
                config = NodeConfig(
                    nick=f"member{i}",
                    key=key,
                    db_path=Path(tmp) / f"m{i}.db",
                    broker_url=url,
                    seed=i,
                    channel_config=scaled_config(scale),
                    membership=True,
                    presence_every_ms=int(every_s * 1000 / scale),
                    away_after_ms=0,  # nobody idles away here
                )
                nodes.append(await Node.start(config))
            t_end = loop.time() + minutes * 60 / scale
            warm_end = loop.time() + WARMUP_MIN * 60 / scale
            sent = 0
            next_line = loop.time() + gap_s(rng, lines_per_minute, scale)
            while loop.time() < t_end:
                until = min(next_line, t_end, warm_end if phase[0] == "warmup" else t_end)
                await asyncio.sleep(max(0.0, until - loop.time()))
                if phase[0] == "warmup" and loop.time() >= warm_end:
                    await asyncio.sleep(0.2)
                    file_all()
                    phase[0] = "steady"
                if loop.time() < next_line or loop.time() >= t_end:
                    continue
                next_line = loop.time() + gap_s(rng, lines_per_minute, scale)
                who = rng.choice(nodes)
                await who.send_typing()
                await who.send_text(LINE)
                sent += 1
            if phase[0] == "warmup":
                file_all()
                phase[0] = "steady"
            await asyncio.sleep(0.3)
            file_all()
            beats = sum(n.presences.beats_sent for n in nodes)
            early = sum(n.presences.syncs_for_beats for n in nodes)
            while nodes:
                await nodes.pop().stop()
    return {"bytes": counted, "frames": frames, "lines": sent, "beats": beats, "early_syncs": early}


class _Member:
    """One simulated member: the engine with the node's settings, the node's presence keeper, and what the node
    does around them (:class:`~sdschat.node.ports.PresenceHost`: the keeper's door)."""

    def __init__(self, sim: _Sim, i: int, every_ms: int) -> None:
        self.sim = sim
        self.identity = Identity.generate()
        self.participant_id = self.identity.participant_id
        self.nick = f"member{i}"
        self.sign = signer(self.identity, sim.key.channel_binding)
        self.channel = MessageChannel("bench", self.participant_id, node_channel_config(), 0)
        self.stopping = False
        self.presences = PresenceKeeper(self, beat_every_ms=every_ms, away_after_ms=0, seed=i)
        self.tick_at: int | None = None

    def now(self) -> int:
        return self.sim.now

    def emit(self, event) -> None:
        pass

    def current_epoch(self) -> int:
        return 0

    def member_count(self) -> int:
        return len(self.sim.members)

    def enqueue(self, item) -> None:  # (the keeper's beats)
        self.sim.publish(self, item.data, item.reason)


class _Sim:
    """Members in simulated time: a queue of deliveries, ticks and lines (ms)."""

    def __init__(self, members: int, every_ms: int, seed: int) -> None:
        self.key = ChannelKey.generate("presence-sim")
        self.now = 0
        self.delay = random.Random(seed)
        self._queue: list[tuple[int, int, str, object]] = []
        self._seq = 0
        self.members = [_Member(self, i, every_ms) for i in range(members)]
        self.counting = False
        self.bytes: Counter = Counter()
        self.frames: Counter = Counter()

    def at(self, t: int, what: str, arg: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, what, arg))

    def publish(self, m: _Member, data: bytes, reason: str) -> None:
        envelope = self.key.seal(pack(m.identity, self.key.channel_binding, data, reason))
        if self.counting:
            kind = reason if reason != "ephemeral" else kind_of(self.key, self.key.channel_binding, envelope)
            self.bytes[kind] += len(envelope)
            self.frames[kind] += 1
        m.presences.published(self.now)
        for other in self.members:
            if other is not m:
                self.at(self.now + self.delay.randint(5, 30), "deliver", (other, m, data, reason))

    def wake(self, m: _Member, t: int) -> None:
        """The node's ticker: after every frame, at the engine's deadline, and at least every 0.5 s."""
        if m.tick_at is None or t < m.tick_at:
            m.tick_at = t
            self.at(t, "tick", m)

    def handle(self, m: _Member, events) -> None:
        for e in events:
            if isinstance(e, Outgoing):
                self.publish(m, e.data, e.reason)

    def run(self, lines: list[tuple[int, int]], end_ms: int, warm_ms: int) -> None:
        for i, m in enumerate(self.members):
            m.presences.start(0)
            self.wake(m, 0)
            self.at(200 + 100 * i, "join", m)  # (a node announces itself in the log: a content message)
        for t, who in lines:
            self.at(t, "line", self.members[who])
        self.at(warm_ms, "count", None)
        while self._queue and self._queue[0][0] <= end_ms:
            t, _, what, arg = heapq.heappop(self._queue)
            self.now = t
            if what == "count":
                self.counting = True
            elif what == "tick":
                m = arg  # type: ignore[assignment]
                if m.tick_at != t:
                    continue  # (a sooner one ran)
                m.tick_at = None
                self.handle(m, m.channel.tick(t))
                m.presences.tick(t)
                self.wake(m, max(t + 5, min(m.channel.next_deadline(), t + 500)))
            elif what == "deliver":
                to, frm, data, reason = arg  # type: ignore[misc]
                self.handle(to, to.channel.receive(data, t))
                to.presences.heard(frm.participant_id, t, 0)
                if reason == "ephemeral":
                    content = wire.decode(data).content or b""
                    app = AppPayload.decode(read_signed_content(content).message)
                    if app.kind == "presence":
                        to.presences.beat(frm.participant_id, app, t, 0)
                self.wake(to, t)
            elif what == "join":
                m = arg  # type: ignore[assignment]
                join = AppPayload.new("msg", m.nick, f"{m.nick} joined", t)
                self.publish(m, m.channel.send(join.encode(), t, sign=m.sign).data, "message")
                self.wake(m, t)
            elif what == "line":
                m = arg  # type: ignore[assignment]
                m.presences.active(t, typed=True)
                typing = AppPayload.new("typing", m.nick, "", t)
                self.publish(m, m.channel.send_ephemeral(typing.encode(), t, sign=m.sign).data, "ephemeral")
                text = AppPayload.new("msg", m.nick, LINE, t)
                self.publish(m, m.channel.send(text.encode(), t, sign=m.sign).data, "message")
                self.wake(m, t)


def simulated(members: int, lines_per_minute: float, minutes: float, every_s: float, runs: int) -> None:
    """The --simulated figures: for each seed, the channel's bytes with and without presence."""
    end_ms, warm_ms = int(minutes * 60_000), int(WARMUP_MIN * 60_000)
    added, shares, syncs = [], [], []
    totals = [0, 0]
    for seed in range(1, runs + 1):
        rng = random.Random(seed)
        lines, t = [], 0.0
        while True:
            t += gap_s(rng, lines_per_minute, 1.0) * 1000
            if t >= end_ms:
                break
            lines.append((int(t), rng.randrange(members)))
        got = []
        for every in (every_s, NEVER_S):
            sim = _Sim(members, int(every * 1000), seed)
            sim.run(lines, end_ms, warm_ms)
            got.append((sum(sim.bytes.values()), sim.frames["sync"], sim.frames["presence"]))
        (with_p, sync_p, beats), (without, sync_q, _) = got
        totals[0] += with_p
        totals[1] += without
        added.append(with_p - without)
        shares.append(with_p / without - 1)
        syncs.append(sync_p - sync_q)
        print(
            f"  seed {seed}: {len(lines)} lines; {with_p:,} bytes with presence ({sync_p} syncs, {beats} beats), "
            f"{without:,} without ({sync_q} syncs): {with_p / without - 1:+.2%}"
        )
    print(
        f"simulated: presence adds {statistics.median(shares):+.2%} to the channel's bytes (median of {runs} seeds; "
        f"{min(shares):+.2%} to {max(shares):+.2%}), {totals[0] / totals[1] - 1:+.2%} in all; "
        f"syncs {statistics.median(syncs):+g} a run (median); without presence {totals[1] / runs:,.0f} bytes a run"
    )


def report(r: dict, label: str, minutes: float) -> float:
    steady, frames = r["bytes"]["steady"], r["frames"]["steady"]
    total = sum(steady.values())
    share = steady["presence"] / total if total else 0.0
    print(f"{label}: {r['lines']} lines in {minutes:g} minutes; after the first minute, by kind:")
    for kind, size in steady.most_common():
        print(f"  {kind:<10} {frames[kind]:>6} frames {size:>10,} bytes {size / total:>7.2%}")
    warm = r["bytes"]["warmup"]
    warm_total = sum(warm.values())
    print(
        f"  first minute (starts, joins, start beats and answers): {warm_total:,} bytes, presence "
        f"{warm['presence']:,} ({warm['presence'] / warm_total if warm_total else 0:.1%})"
    )
    print(f"{label}: presence beats {steady['presence']:,} of {total:,} bytes: {share:.2%} of the channel's bytes")
    print(f"{label}: periodic syncs brought forward in a beat's place: {r['early_syncs']:,}")
    return share


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=5)
    ap.add_argument("--lines-per-minute", type=float, default=2.0, help="lines a minute, the whole channel")
    ap.add_argument("--minutes", type=float, default=30.0, help="minutes of chat (as in life)")
    ap.add_argument("--scale", type=float, default=10.0, help="how much faster than life every timing runs")
    ap.add_argument("--every", type=float, default=BEAT_EVERY_MS / 1000, help="presence beat interval, s")
    ap.add_argument("--idle", action="store_true", help="also measure the channel with no lines at all")
    ap.add_argument(
        "--compare", action="store_true", help="run each case again without beats, and print what presence adds"
    )
    ap.add_argument(
        "--simulated", action="store_true", help="in simulated time, with and without beats, for --runs seeds"
    )
    ap.add_argument("--runs", type=int, default=20, help="seeds of --simulated")
    ap.add_argument("--smoke", action="store_true", help="3 members, 3 minutes at 20x: runs end to end (the suite)")
    a = ap.parse_args()
    if a.simulated:
        members, minutes = (3, 5.0) if a.smoke else (a.members, a.minutes)
        print(
            f"{members} members, beats every {a.every:g} s, {a.lines_per_minute:g} lines a minute, {minutes:g} "
            f"minutes in simulated time"
        )
        simulated(members, a.lines_per_minute, minutes, a.every, 2 if a.smoke else a.runs)
        return 0
    members, minutes, scale = (3, 3.0, 20.0) if a.smoke else (a.members, a.minutes, a.scale)
    print(
        f"{members} members, beats every {a.every:g} s, {a.lines_per_minute:g} lines a minute, "
        f"{minutes:g} minutes at {scale:g}x"
    )
    cases = [("chat", a.lines_per_minute)] + ([("idle", 0.0)] if a.idle else [])
    for label, rate in cases:
        r = asyncio.run(measure(members, rate, minutes, scale, a.every))
        report(r, label, minutes)
        if a.compare:
            # the same channel (the same lines at the same times) with no beat and no sync brought forward
            quiet = asyncio.run(measure(members, rate, minutes, scale, NEVER_S))
            with_p, without = (sum(x["bytes"]["steady"].values()) for x in (r, quiet))
            print(
                f"{label}: the channel's bytes after the first minute {with_p:,} with presence, {without:,} without: "
                f"{with_p / without - 1:+.2%}"
            )
    if a.smoke:
        simulated(3, a.lines_per_minute, 5.0, a.every, 2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
