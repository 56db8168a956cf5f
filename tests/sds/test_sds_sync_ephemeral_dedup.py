"""Periodic sync frames, ephemeral messages, duplicates and own frames."""

from __future__ import annotations

import dataclasses

from sds_helpers import channel, decode, frame, mids, of, outgoing, quiet_config

from sdschat.sds import (
    Delivered,
    EphemeralReceived,
    Missing,
    Outgoing,
    RepairConfig,
    RepairRequested,
    SyncReceived,
)


def sync_config(**kw):
    base = dict(sync_interval_ms=1_000, sync_jitter_ms=0)
    base.update(kw)
    return quiet_config(**base)


# ---------------------------------------------------------------------- sync


def test_sync_sent_after_interval_when_idle():
    a = channel("alice", sync_config())
    m = a.send(b"hello", 0)
    assert outgoing(a.tick(999)) == []
    (sync,) = outgoing(a.tick(1_000))
    assert sync.reason == "sync"
    msg = decode(sync.data)
    assert msg.content is None  # empty content: absent, not b""
    assert msg.lamport_timestamp == sync.lamport_timestamp == 1_000 == a.lamport_timestamp
    assert [h.message_id for h in msg.causal_history] == [m.message_id]
    assert msg.bloom_filter == a.bloom.to_bytes()
    assert msg.repair_request == []
    # nothing of it is kept
    assert a.log == [m.message_id]
    assert a.outgoing_ids == [m.message_id]
    assert sync.message_id not in a.bloom
    assert sync.message_id != m.message_id
    # and the next one follows a full interval later
    assert outgoing(a.tick(1_999)) == []
    assert mids(outgoing(a.tick(2_000), "sync"))


def test_sync_ids_are_unique():
    a = channel("alice", sync_config())
    a.send(b"hello", 0)
    ids = {a.sync(t).message_id for t in range(1, 50)}
    assert len(ids) == 49


def test_sync_not_sent_while_others_are_active():
    a = channel("alice", sync_config())
    a.send(b"hello", 0)
    for t in (500, 1_200, 1_900):
        a.receive(frame("bob", f"b{t}", lamport=t), t)
        assert outgoing(a.tick(t + 999)) == []
    assert mids(outgoing(a.tick(2_900), "sync"))


def test_sync_jitter_stays_within_bounds():
    for name in ("alice", "bob", "carol", "dave", "erin"):
        a = channel(name, sync_config(sync_jitter_ms=500))
        a.send(b"hello", 0)
        times = [t for t in range(0, 3_000, 10) if outgoing(a.tick(t), "sync")]
        assert 1_000 <= times[0] <= 1_500


def test_sync_soon_takes_the_channels_next_sync_and_peers_put_theirs_off():
    cfg = sync_config(sync_interval_ms=10_000, sync_jitter_ms=3_000)
    a, b = channel("alice", cfg), channel("bob", cfg)
    m = a.send(b"hello", 0)
    b.receive(m.data, 0)  # both quiet since 0: their periodic syncs are due at 10,000 + their jitter
    a.sync_soon(3_000, within_ms=30_000)
    due = a.next_deadline()  # just before the quiet interval's end (a sixteenth of alice's jitter): ahead of all
    assert 10_000 - 3_000 // 16 <= due <= 10_000 and due < b.next_deadline()
    assert outgoing(a.tick(due - 1)) == []
    (sync,) = outgoing(a.tick(due), "sync")  # sent by the tick, as any periodic sync
    b.receive(sync.data, due + 10)  # bob hears it: his own sync moves a whole interval on
    assert outgoing(b.tick(due + 3_000), "sync") == [] and outgoing(b.tick(due + 13_010), "sync")
    assert a.next_deadline() >= due + 10_000  # alice's next one is a full period (and her jitter) later


def test_sync_soon_holds_until_ours_goes_out_when_a_peers_sync_comes_first():
    cfg = sync_config(sync_interval_ms=10_000, sync_jitter_ms=3_000)
    names = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
    chans = {n: channel(n, cfg) for n in names}
    m = chans["alice"].send(b"hello", 0)
    for n in names[1:]:
        chans[n].receive(m.data, 0)
    for n in names:
        chans[n].sync_soon(1_000, within_ms=60_000)  # all ask at once
    dues = {n: c.next_deadline() for n, c in chans.items()}
    first = min(dues, key=dues.__getitem__)
    # spread by their own draws, over a sixteenth of the jitter (two may meet, as two peers' syncs may: all do not)
    assert len(set(dues.values())) >= len(names) - 2
    (sync,) = outgoing(chans[first].tick(dues[first]), "sync")
    t = dues[first] + 5
    for n in names:
        if n != first:
            chans[n].receive(sync.data, t)  # heard first: each one's sync is put off to the next interval's end
            due = chans[n].next_deadline()
            assert t + 10_000 - 3_000 // 16 <= due <= t + 10_000  # and still ahead of every peer's
    # the bound holds through it: a busy channel still gets the sync by now + within
    c = chans[names[-1] if first != names[-1] else names[-2]]
    for k in range(1, 60):
        c.receive(frame("zed", f"z{k}", lamport=t + k * 1_000), t + k * 1_000)
    assert c.next_deadline() <= 61_000


def test_a_message_of_ours_answers_sync_soon():
    cfg = sync_config(sync_interval_ms=10_000, sync_jitter_ms=3_000)
    a = channel("alice", cfg)
    a.send(b"hello", 0)
    a.sync_soon(1_000, within_ms=5_000)
    assert a.next_deadline() <= 6_000
    a.send(b"heard by this line", 2_000)  # we were heard: no sync is owed by the bound any more
    assert a.next_deadline() >= 12_000


def test_sync_soon_in_a_busy_channel_is_due_within_the_bound_and_never_later_than_before():
    a = channel("alice", sync_config(sync_interval_ms=10_000, sync_jitter_ms=0))
    a.send(b"hello", 0)
    for t in range(500, 6_000, 500):  # others talk: the periodic sync keeps moving on
        a.receive(frame("bob", f"b{t}", lamport=t), t)
    a.sync_soon(6_000, within_ms=2_000)
    assert a.next_deadline() == 8_000  # not the quiet interval's end (15,500): the bound
    assert outgoing(a.tick(8_000), "sync")
    due = a.next_deadline()
    a.sync_soon(9_000, within_ms=60_000)  # never puts a sync off
    assert a.next_deadline() == due


def test_after_sync_soon_an_owed_acknowledgement_goes_with_a_quarter_of_its_jitter_and_once():
    cfg = sync_config(sync_interval_ms=10_000, ack_delay_ms=300, ack_jitter_ms=700)
    a, b = channel("alice", cfg), channel("bob", cfg)
    m = a.send(b"hello", 0)
    b.receive(m.data, 0)
    assert outgoing(b.tick(1_000), "sync")  # (bob acknowledges the first line, with its jitter)
    b.sync_soon(1_000, within_ms=30_000)
    n = a.send(b"a line bob owes an ack for", 2_000)
    b.receive(n.data, 2_000)
    due = b.next_deadline()
    assert 2_300 <= due <= 2_475  # the ack delay and a quarter of the ack jitter: ahead of most
    (ack,) = outgoing(b.tick(due), "sync")
    assert n.message_id in [h.message_id for h in decode(ack.data).causal_history]
    o = a.send(b"the next line", 5_000)
    b.receive(o.data, 5_000)  # asked once: the next owed ack has its jitter again
    due = b.next_deadline()
    assert 5_300 < due <= 6_000 and [due] == [t for t in range(5_300, 6_001) if outgoing(b.tick(t), "sync")][:1]


def test_sync_with_empty_log_is_not_sent():
    a = channel("alice", sync_config())
    assert a.sync(5) is None
    for t in range(0, 5_000, 250):
        assert outgoing(a.tick(t)) == []
    assert a.lamport_timestamp == 0


def test_received_sync_is_not_delivered_logged_or_bloomed():
    a, b = channel("alice", sync_config()), channel("bob", now=10)
    a.send(b"hello", 0)
    sync = a.sync(1_000)
    before = b.lamport_timestamp
    events = b.receive(sync.data, 20)
    assert of(events, SyncReceived) == [SyncReceived("alice", sync.message_id, 1_000)]
    assert of(events, Delivered) == [] and of(events, Missing) == []
    assert b.log == [] and b.incoming_ids == []
    assert sync.message_id not in b.bloom
    assert b.lamport_timestamp == before


def test_sync_carries_due_repair_requests_even_when_others_are_active():
    cfg = sync_config(sync_interval_ms=100_000, repair=RepairConfig(t_min_ms=1_000, t_max_ms=2_000))
    b = channel("bob", cfg)
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 0)
    (row,) = b.snapshot().repair_requests
    t = 0
    syncs = []
    while t < row.t_req + 300:
        t += 100
        b.receive(frame("carol", f"c{t}", lamport=t), t)  # the channel is busy
        syncs += [(t, e) for e in b.tick(t) if isinstance(e, (Outgoing, RepairRequested))]
    (t_sync, sync), (t_ev, requested) = syncs
    assert t_sync == t_ev and row.t_req <= t_sync < row.t_req + 100
    assert sync.reason == "sync" and sync.repair_request == ("m1",)
    assert [e.message_id for e in decode(sync.data).repair_request] == ["m1"]
    assert requested == RepairRequested(("m1",), sync.message_id)


def test_no_extra_sync_when_a_cancelled_repair_request_was_due():
    """A repair request that ended (its message arrived) must not make the
    channel send anything at its old T_req: the periodic sync is suppressed
    because others are active, and there is nothing to ask for."""
    cfg = sync_config(sync_interval_ms=100_000, repair=RepairConfig(t_min_ms=1_000, t_max_ms=5_000))
    b = channel("bob", cfg)
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 0)
    (row,) = b.snapshot().repair_requests
    b.receive(frame("alice", "m1", lamport=1), 10)  # the gap closes: the request ends
    assert b.repair_request_ids == []
    sent = []
    t = 10
    while t < row.t_req + 1_000:
        t += 100
        b.receive(frame("carol", f"c{t}", lamport=t), t)  # the channel is busy
        sent += outgoing(b.tick(t))
    assert sent == []


# ----------------------------------------------------------------- ephemeral


def test_ephemeral_frame_has_no_lamport_history_or_bloom():
    a = channel("alice", now=7)
    a.send(b"logged", 8)
    before = a.snapshot()
    out = a.send_ephemeral(b"typing...", 9)
    assert out.reason == "ephemeral" and out.lamport_timestamp is None
    msg = decode(out.data)
    assert msg.lamport_timestamp is None and msg.causal_history == [] and msg.bloom_filter is None
    assert msg.content == b"typing..." and msg.repair_request == []
    assert a.snapshot() == before  # not logged, not buffered, clock unchanged


def test_ephemeral_received_at_once_and_not_kept():
    a, b = channel("alice"), channel("bob", now=3)
    b.receive(frame("carol", "m1", lamport=1), 1)
    before = b.snapshot()
    out = a.send_ephemeral(b"typing...", 5)
    events = b.receive(out.data, 6)
    assert events == [EphemeralReceived("alice", b"typing...", out.message_id)]
    assert b.snapshot() == before
    assert out.message_id not in b.bloom


def test_ephemeral_delivered_even_if_it_names_history():
    b = channel("bob")
    events = b.receive(frame("alice", "e1", lamport=None, history=["unknown"], content=b"hi"), 1)
    assert events == [EphemeralReceived("alice", b"hi", "e1")]
    assert b.incoming_ids == [] and b.missing_ids == []


def test_own_ephemeral_echo_ignored():
    a = channel("alice")
    assert a.receive(a.send_ephemeral(b"typing", 1).data, 2) == []


def test_ephemeral_refuses_empty_content():
    a = channel("alice")
    try:
        a.send_ephemeral(b"", 1)
    except ValueError:
        pass
    else:  # pragma: no cover
        raise AssertionError("empty ephemeral content accepted")


# --------------------------------------------------------------------- dedup


def test_duplicate_content_frame_produces_no_events():
    a, b = channel("alice"), channel("bob")
    m = a.send(b"hello", 1)
    assert mids(of(b.receive(m.data, 2), Delivered)) == [m.message_id]
    before = b.snapshot()
    for t in (3, 4, 5):
        assert b.receive(m.data, t) == []
    assert b.snapshot() == before
    assert b.log == [m.message_id]


def test_duplicate_of_a_waiting_message_produces_no_events():
    b = channel("bob")
    f = frame("alice", "m2", lamport=2, history=["m1"])
    assert of(b.receive(f, 1), Missing)
    before = b.snapshot()
    assert b.receive(f, 2) == []
    assert b.snapshot() == before


def test_resend_of_a_known_message_is_a_duplicate():
    cfg = quiet_config(resend_unacknowledged_ms=100)
    a, b = channel("alice", cfg), channel("bob", cfg)
    m = a.send(b"hello", 0)
    b.receive(m.data, 1)
    (resend,) = outgoing(a.tick(100), "resend")
    assert b.receive(resend.data, 101) == []


def test_duplicate_sync_frame_produces_no_events():
    a, b = channel("alice"), channel("bob")
    a.send(b"hello", 0)
    sync = a.sync(10)
    assert of(b.receive(sync.data, 11), SyncReceived)
    assert b.receive(sync.data, 12) == []


def test_sync_dedup_remembers_that_many_sync_ids_and_a_restore_keeps_no_more():
    """``ChannelConfig.sync_dedup`` (the node's default 4,096; the simulator's 256) bounds the sync ids a member
    remembers: a sync seen ``sync_dedup`` syncs ago is still dropped, one seen before that is processed again."""
    from sdschat.sds import ChannelConfig, MessageChannel
    from sdschat.sim.params import SYNC_DEDUP, SimParams, channel_config

    assert ChannelConfig().sync_dedup == 4_096 and channel_config(SimParams()).sync_dedup == SYNC_DEDUP == 256
    assert channel_config(SimParams(overrides={"sync_dedup": "4096"})).sync_dedup == 4_096
    a, b = channel("alice"), channel("bob", quiet_config(sync_dedup=3))
    a.send(b"hello", 0)
    syncs = [a.sync(10 + i) for i in range(5)]
    for i, sync in enumerate(syncs):
        assert of(b.receive(sync.data, 20 + i), SyncReceived)
    assert b.receive(syncs[2].data, 30) == []  # one of the last three
    assert of(b.receive(syncs[1].data, 31), SyncReceived)  # forgotten: processed again
    state = b.snapshot()
    assert len(state.recent_syncs) == 3
    restored = MessageChannel.restore(
        dataclasses.replace(state, recent_syncs=[s.message_id for s in syncs]), quiet_config(sync_dedup=2)
    )
    assert restored.receive(syncs[4].data, 40) == []  # the newest two are remembered
    assert of(restored.receive(syncs[2].data, 41), SyncReceived)


def test_stats_count_every_copy_and_are_a_copy():
    """``stats`` counts received frames, syncs, deliveries, duplicates and own echoes (kept apart from the
    dict for speed, merged back in), and is a snapshot: changing it changes nothing in the channel."""
    a, b = channel("alice", sync_config()), channel("bob", sync_config())
    m1, m2 = a.send(b"one", 0), a.send(b"two", 1)
    b.receive(m2.data, 2)  # waits for m1
    b.receive(m1.data, 3)
    b.receive(m1.data, 4)  # duplicate
    sync = a.sync(5)
    b.receive(sync.data, 6)
    b.receive(sync.data, 7)  # duplicate sync
    a.receive(m1.data, 8)  # own echo
    s = b.stats
    assert (s["received"], s["delivered"], s["syncs_received"], s["duplicates"]) == (3, 2, 1, 2)
    assert a.stats["own_echoes"] == 1 and a.stats["sent"] == 2 and a.stats["syncs_sent"] == 1
    assert list(s) == list(a.stats)  # every counter, in one order
    s["received"] = 99
    assert b.stats["received"] == 3


def test_own_frames_are_ignored():
    a = channel("alice", sync_config())
    m = a.send(b"hello", 0)
    sync = a.sync(5)
    before = a.snapshot()
    assert a.receive(m.data, 6) == []
    assert a.receive(sync.data, 7) == []
    assert a.snapshot() == before


def test_foreign_frame_claiming_our_sender_id_is_ignored():
    a = channel("alice")
    before = a.snapshot()
    assert a.receive(frame("alice", "forged", lamport=5), 1) == []
    assert a.snapshot() == before


def test_every_member_sends_its_share_of_a_quiet_channels_syncs():
    # each sync heard draws every member's jitter afresh: a member that drew late once is not left behind
    # the others' fresh draws round after round (then it would not be heard while it takes no part)
    names = ["alice", "bob", "carol", "dave", "erin"]
    shares, waited = _sync_shares(names, sync_config(sync_interval_ms=10_000, sync_jitter_ms=3_000))
    assert min(shares) < 0.05  # off: one member sends next to none
    assert 1_300 < waited < 1_700  # and a quiet interval ends half the jitter (1,500 ms) past the interval
    cfg = sync_config(sync_interval_ms=10_000, sync_jitter_ms=3_000, sync_fresh_jitter=True)
    shares, waited = _sync_shares(names, cfg)
    for n, share in zip(names, shares, strict=True):
        assert 0.12 < share < 0.28, (n, share)
    assert 400 < waited < 600  # the earliest of five draws: 3,000 / 6 (the node lengthens its interval to match)


def _sync_shares(names, cfg, rounds=600):
    """Each member's share of a quiet channel's periodic syncs over ``rounds`` syncs, and how long past the
    interval a quiet interval lasted on average (ms); asserts with fresh draws that no member waits 45 rounds or
    more between two of its own (0.8 ** 45 is about 4e-5)."""
    chans = {n: channel(n, cfg) for n in names}
    m = chans["alice"].send(b"hello", 0)
    for n in names[1:]:
        chans[n].receive(m.data, 0)
    won: dict[str, list[int]] = {n: [] for n in names}
    last, past = 0, 0
    for r in range(rounds):
        first = min(names, key=lambda n: chans[n].next_deadline())
        t = chans[first].next_deadline()
        if r:
            past += t - last - 5 - cfg.sync_interval_ms
        last = t
        (sync,) = outgoing(chans[first].tick(t), "sync")
        won[first].append(r)
        for n in names:
            if n != first:
                chans[n].receive(sync.data, t + 5)
    shares = []
    for n in names:
        gaps = [b - a for a, b in zip([-1, *won[n]], [*won[n], rounds], strict=True)]
        if cfg.sync_fresh_jitter:
            assert max(gaps) < 45, (n, max(gaps))
        shares.append(len(won[n]) / rounds)
    return shares, past / (rounds - 1)
