"""The simulator's fast paths change nothing: the engine's read-once Frame, stale timers, flat event rows, workers."""

from __future__ import annotations

import os
import socket
import threading

import pyarrow as pa
import pyarrow.parquet as pq

from sdschat.sds import ChannelConfig, MessageChannel, RepairConfig
from sdschat.sds.channel import Frame
from sdschat.sds.wire import parse_pb
from sdschat.sim import SimParams, simulate
from sdschat.sim.links import Links
from sdschat.sim.output import ROW_WIDTH, EventSink

FAST_REPAIR = {"repair_t_min_ms": 1000, "repair_t_max_ms": 4000}


def _group(n: int, cfg: ChannelConfig) -> list[MessageChannel]:
    return [MessageChannel("c", f"p{i}", cfg, 0) for i in range(n)]


def test_a_frame_read_once_gives_every_receiver_the_same_events_and_state_as_the_message():
    """Two identical groups; one receives protobuf messages, the other one shared Frame per broadcast."""
    cfg = ChannelConfig(causal_history_size=3, repair=RepairConfig(num_response_groups=2, t_min_ms=500, t_max_ms=2000))
    plain, shared = _group(6, cfg), _group(6, cfg)
    other_cfg = ChannelConfig(causal_history_size=3, max_id_length=8)  # a receiver with other limits
    odd_plain, odd_shared = MessageChannel("c", "q", other_cfg, 0), MessageChannel("c", "q", other_cfg, 0)
    t = 0
    outs: list[tuple[int, bytes]] = []
    for k in range(60):
        t += 97
        s = k % 6
        if k % 5 == 4:
            outs += [(s, o.data) for o in plain[s].tick(t) if type(o).__name__ == "Outgoing"]
            shared[s].tick(t)
        else:
            outs.append((s, plain[s].send(f"m{k}".encode(), t).data))
            shared[s].send(f"m{k}".encode(), t)
        for s_idx, data in outs:
            f = Frame(parse_pb(data))  # one Frame for every receiver of this broadcast
            if k % 2:  # checked against the other limits first, then against the group's
                assert odd_plain.receive_parsed(parse_pb(data), t) == odd_shared.receive_parsed(f, t)
            for r in range(6):
                if r == s_idx or (r + k) % 4 == 0:  # some copies lost: gaps, repairs
                    continue
                assert plain[r].receive_parsed(parse_pb(data), t) == shared[r].receive_parsed(f, t)
            if not k % 2:
                assert odd_plain.receive_parsed(parse_pb(data), t) == odd_shared.receive_parsed(f, t)
        outs = []
    # a bad frame: the same rejection both ways, for each configuration
    bad = MessageChannel("other", "z", cfg, 0).send(b"x", t).data
    f = Frame(parse_pb(bad))
    assert plain[0].receive_parsed(parse_pb(bad), t) == shared[0].receive_parsed(f, t)
    assert plain[0].receive(bad, t) == shared[0].receive_parsed(f, t)
    for a, b in zip(plain + [odd_plain], shared + [odd_shared]):
        assert a.snapshot() == b.snapshot()
        assert a.stats == b.stats
        assert a.next_deadline() == b.next_deadline()


def test_a_frame_reads_like_the_message():
    a = MessageChannel("c", "a", ChannelConfig(), 0)
    a.send(b"one", 1)
    pb = parse_pb(a.send(b"two", 2).data)
    f = Frame(pb)
    for name in ("message_id", "sender_id", "channel_id", "content"):
        assert getattr(f, name) == getattr(pb, name)
    assert f.HasField("bloom_filter") and f.bloom == pb.bloom_filter
    assert f.ByteSize() == pb.ByteSize()  # anything else reads through


def test_delivered_messages_leave_no_wake_up_behind():
    """A message that waited for a dependency leaves a timer 2 * lost_after_ms later; once it is delivered,
    next_deadline() no longer reports it (the tick there would do nothing)."""
    cfg = ChannelConfig(
        causal_history_size=2,
        lost_after_ms=300_000,
        sync_interval_ms=10_000_000,
        sync_jitter_ms=0,
        repair=RepairConfig(enabled=False),
    )
    a, b = MessageChannel("c", "a", cfg, 0), MessageChannel("c", "b", cfg, 0)
    first = a.send(b"1", 10).data
    second = a.send(b"2", 20).data
    b.receive(second, 30)  # waits for `first`, which is missing
    assert b.incoming_ids and b.missing_ids
    assert b.next_deadline() == 30 + cfg.lost_after_ms  # when `first` would be declared lost
    b.receive(first, 40)  # both delivered
    assert not b.incoming_ids and not b.missing_ids and b.log == a.log
    assert b.next_deadline() == 40 + cfg.sync_interval_ms  # the periodic sync, not a stale timer
    assert [type(e).__name__ for e in b.tick(40 + cfg.sync_interval_ms)] == ["Outgoing"]


def test_event_sink_writes_flat_rows_as_shards(tmp_path):
    names = ["p0", "p1", "p2"]
    sink = EventSink(
        tmp_path, "chan", shard_rows=3, row_group_rows=2, seq_stride=2, seq_offset=1, participant_names=names
    )
    # the last value is the row's facts (output.FACTS): a sent row's frame size, else detail JSON
    rows = [
        (
            i,
            "sent" if i % 2 else "received",
            f"m{i}",
            "p1",
            i % 3,
            i * 10 if i % 2 else None,
            (100 + i) if i % 2 else (None if i % 3 else '{"x":1}'),
        )
        for i in range(7)
    ]
    for r in rows[:2]:
        sink.add(*r)
    sink.rows.extend(rows[2] + rows[3])  # several rows in one extend
    assert len(sink) == 4 and len(sink.rows) == 4 * ROW_WIDTH
    sink.maybe_flush()
    for r in rows[4:]:
        sink.rows.extend(r)
    sink.close()
    assert sink.written == 7 and len(sink.shards) == 2
    shards = [pq.read_table(tmp_path / s) for s in sink.shards]
    for shard in shards:  # sorted by kind, so a filter on kind skips row groups
        kinds = shard.column("kind").to_pylist()
        assert kinds == sorted(kinds)
    got = sorted(pa.concat_tables(shards).to_pylist(), key=lambda g: g["seq"])
    assert [g["seq"] for g in got] == [2 + 2 * i for i in range(7)]
    for g, r in zip(got, rows):
        facts = (g["bytes"], None) if r[1] == "sent" else (None, g["detail"])
        assert (
            g["ts_ms"],
            g["kind"],
            g["message_id"],
            g["sender_id"],
            g["participant_id"],
            g["lamport_timestamp"],
            g["channel_id"],
        ) == (*r[:4], names[r[4]], r[5], "chan")
        assert facts == ((r[6], None) if r[1] == "sent" else (None, r[6]))
    assert sink.kind_counts == {"sent": 3, "received": 4}


def test_event_sink_puts_every_kind_of_facts_in_its_typed_columns_and_detail(tmp_path):
    """Each kind's facts value (output.FACTS) lands in the typed columns and detail of its own row, whatever the
    order of kinds in the shard, the rows without facts null in every typed column."""
    from sdschat.sim.output import TYPED_COLUMNS

    ids = ["a" * 64, "b" * 64]
    cases = [  # (kind, facts, typed values the row must have, detail)
        ("sent", 120, {"bytes": 120}, None),
        ("sync_sent", 80, {"bytes": 80}, None),
        ("repair_served", 95, {"bytes": 95}, None),
        ("resent", (130, 2), {"bytes": 130}, '{"resends":2}'),
        ("resent", (131, None), {"bytes": 131}, '{"resends":null}'),
        ("acked", (True, "p7", 40), {"by_bloom": True, "by_id": "p7", "frame_ts": 40}, None),
        ("acked", (False, None, None), {"by_bloom": False}, None),
        ("possibly_acked", (3, "p8", 41), {"by_id": "p8", "frame_ts": 41}, '{"count":3}'),
        (
            "delivered",
            (True, "repair", "p9", ("x",)),
            {"repaired": True},
            '{"via":"repair","publisher":"p9","after_lost":["x"]}',
        ),
        ("delivered", None, {}, None),
        ("missing", (ids, '{"waiting_on":[]}'), {"missing_ids": ids}, '{"waiting_on":[]}'),
        ("repair_requested", "sync-1", {"carrier": "sync-1"}, None),
        ("lost", '{"dependants":[]}', {}, '{"dependants":[]}'),
        ("received", None, {}, None),
        ("sync_received", None, {}, None),
    ]
    sink = EventSink(tmp_path, "chan", participant_names=["p0", "p1"])
    for i, (kind, facts, _, _) in enumerate(reversed(cases * 3)):  # kinds interleaved, not in sorted order
        sink.add(i, kind, f"m{i}", "p1", i % 2, i, facts)
    sink.close()
    got = {g["ts_ms"]: g for g in pq.read_table(tmp_path / sink.shards[0]).to_pylist()}
    assert len(got) == 3 * len(cases)
    for i, (kind, facts, typed, detail) in enumerate(reversed(cases * 3)):
        g = got[i]
        assert (g["kind"], g["message_id"], g["participant_id"], g["lamport_timestamp"]) == (
            kind,
            f"m{i}",
            f"p{i % 2}",
            i,
        )
        assert {c: g[c] for c in TYPED_COLUMNS if g[c] is not None} == typed, (kind, facts)
        assert g["detail"] == detail


def test_worker_links_do_not_deadlock_when_both_sides_send_a_lot():
    a_sock, b_sock = socket.socketpair()
    a, b = Links({1: a_sock}), Links({0: b_sock})
    big = os.urandom(3_000_000)  # far more than the socket buffers hold
    got: dict[str, list] = {}

    def side(name, links, n):
        links.send_all(("p", 1, [big]))  # never blocks
        msgs = []
        while len(msgs) < n:
            msgs += links.receive(True)
        links.drain()
        got[name] = msgs

    ta = threading.Thread(target=side, args=("a", a, 1))
    tb = threading.Thread(target=side, args=("b", b, 1))
    ta.start()
    tb.start()
    ta.join(30)
    tb.join(30)
    assert not ta.is_alive() and not tb.is_alive()
    assert got["a"] == [(1, ("p", 1, [big]))] and got["b"] == [(0, ("p", 1, [big]))]
    a_sock.close()
    b_sock.close()


def test_workers_with_a_one_millisecond_lookahead_give_the_same_events(tmp_path):
    p = SimParams(
        participants=24,
        messages=25,
        rate=4.0,
        loss=0.2,
        duplicate=0.05,
        latency_ms=(1, 40),
        seed=5,
        overrides=FAST_REPAIR,
        horizon_ms=60_000,
    )
    one = simulate(p, tmp_path / "one", workers=1)
    two = simulate(p, tmp_path / "two", workers=2)

    def rows(d):
        t = pa.concat_tables([pq.read_table(f) for f in sorted(d.glob("events-*.parquet"))]).drop(["seq"])
        return sorted(zip(*[t.column(c).to_pylist() for c in t.column_names]), key=repr)

    assert rows(tmp_path / "one") == rows(tmp_path / "two")
    assert one.log_hashes == two.log_hashes
    for key in ("stop_reason", "virtual_end_ms", "counts", "engine_stats", "event_kinds", "frames"):
        assert one.meta[key] == two.meta[key], key
