"""Engine fan-out: the cost of one frame's copy at each of many members whose state is cold in the CPU caches.

What the simulator does at scale: every broadcast frame is handed to every
member's engine (``MessageChannel.receive_parsed``, the frame parsed once and
shared), and with 10,000s of members each copy finds its member's state out
of the caches. Most copies at 100,000 members are sync frames (~12 a message:
finding 15 of docs/sds-at-scale.md), many of them carrying a repair request.

Workload: ``--members`` engines with the simulator's configuration
(``sdschat.sim.params.channel_config``: causal history 10, the RFC's response
groups) receive ``--messages`` content messages from five senders (so each
member's log, SDS-R cache and counters look like a long run's: counters past
256), then, in turn, sync frames (``--frames`` of each kind): plain ones, ones
carrying a repair request for a message every member has, and new content
messages (their bloom positions and response group given once, as the
simulator does). Each frame goes to every member in a random order (as copies
arriving at random latencies reach them); the figure is the median over the
frames of the time per copy (also the minimum). The members are also visited
in the order they were made once, to show how much of a copy is the memory it
touches (a sweep in allocation order lets the hardware prefetch).

Usage:
  .venv/bin/python bench/engine_fanout.py [--members 50000] [--messages 300] [--frames 9]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time

from sdschat.sds import MessageChannel, native
from sdschat.sds.frame import Frame
from sdschat.sds.repair import in_response_group
from sdschat.sds.wire import HistoryEntry, encode_frame, parse_pb
from sdschat.sim.params import SimParams, channel_config


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=50_000)
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--frames", type=int, default=9, help="frames of each kind timed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the test suite runs this)")
    args = ap.parse_args()
    if args.smoke:
        args.members, args.messages, args.frames = 300, 40, 3
    n = args.members
    p = SimParams(participants=n, messages=args.messages)
    cfg = channel_config(p)
    rnd = random.Random(args.seed)
    gc.disable()  # as the simulator runs
    t = p.start_ms
    made = time.perf_counter()
    members = [MessageChannel(p.channel_id, f"member-{i:06d}", cfg, t) for i in range(n)]
    senders = [MessageChannel(p.channel_id, f"sender-{i}", cfg, t) for i in range(5)]
    order = list(range(n))

    def broadcast(data: bytes, sender: MessageChannel, now: int, in_order: bool = False) -> float:
        """Hand one frame to every member (random order unless ``in_order``); seconds per copy."""
        for s in senders:
            if s is not sender:
                s.receive(data, now)
        f = Frame(parse_pb(data))
        positions = None
        if f.has_content:  # as the simulator: the bloom positions and the response group, once a frame
            positions = members[0].bloom.positions(f.message_id)
            g = cfg.repair.response_groups
            f.responders = frozenset(
                ch.participant_id
                for ch in members
                if in_response_group(ch.participant_id, f.sender_id, f.message_id, g)
            )
        if not in_order:
            rnd.shuffle(order)
        seq = range(n) if in_order else order
        start = time.perf_counter()
        for i in seq:
            members[i].receive_parsed(f, now, None, positions)
        return (time.perf_counter() - start) / n

    for m in range(args.messages):
        t += 1_000
        s = senders[m % 5]
        broadcast(s.send(b"fan-out message %d" % m, t).data, s, t)
    setup = time.perf_counter() - made
    kept = members[0].stats
    assert kept["delivered"] == args.messages and kept["received"] == args.messages, kept

    asked = senders[0].log[len(senders[0].log) // 2]  # a message every member has (and caches if it may answer)
    kinds: dict[str, list[float]] = {"sync frame": [], "sync frame with a repair request": [], "content message": []}
    swept = []
    for k in range(args.frames):
        s = senders[k % 5]
        t += 100
        kinds["sync frame"].append(broadcast(s.sync(t).data, s, t))
        t += 100
        log = s.log
        hist = [HistoryEntry(mid, None, None) for mid in log[-cfg.causal_history_size :]]
        data = encode_frame(
            p.channel_id,
            s.participant_id,
            f"sync-fanout-{k}",
            s.lamport_timestamp + 1,
            hist,
            None,
            s.bloom.to_bytes(),
            [HistoryEntry(asked, None, senders[0].participant_id)],
        )
        kinds["sync frame with a repair request"].append(broadcast(data, s, t))
        t += 100
        kinds["content message"].append(broadcast(s.send(b"fan-out timed %d" % k, t).data, s, t))
        t += 100
        swept.append(broadcast(s.sync(t).data, s, t, in_order=True))
    stats = members[0].stats
    assert stats["syncs_received"] == 3 * args.frames and stats["repair_requests_received"] == args.frames, stats

    print(
        f"engine_fanout: {n:,} members, {args.messages} messages each before timing, {args.frames} frames of "
        f"each kind, members in random order"
    )
    print(f"engine             {native.BUILD}")
    print(f"setup              {setup:.1f} s ({n * args.messages:,} receives)")
    for kind, per in kinds.items():
        print(f"{kind:<34} {statistics.median(per) * 1e6:.2f} us a copy median, {min(per) * 1e6:.2f} min")
    print(
        f"{'sync frame, members in made order':<34} {statistics.median(swept) * 1e6:.2f} us a copy median, "
        f"{min(swept) * 1e6:.2f} min"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
