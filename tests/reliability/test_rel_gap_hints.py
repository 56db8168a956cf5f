"""Gap hints: a member that missed every frame naming a message still learns it exists.

Found by tests/support/broker_faults.py (two bots bursting while a third was frozen): messages acknowledged to
their senders by bloom filters alone, and named by no causal history the frozen member received, were
never learned of by it. Engine level, virtual time, deterministic."""


def test_a_message_acknowledged_only_by_bloom_filters_reaches_a_member_that_missed_every_frame_naming_it():
    """tests/support/broker_faults.py part 3 with two bursters: alice's X and bob's burst cross; alice, bob and carol
    each log >= K=10 other messages after X before their next broadcast, so no content frame ever names X;
    bob's and carol's bloom filters acknowledge X to alice (2 distinct filters: threshold met), so she never
    resends it. slow (frozen: receives nothing until t=4 s) missed X and every sync that named it; after that
    nobody's history names X again. slow's own bloom filter, in every frame it sends, shows that it lacks X."""
    from sdschat.node import node_channel_config
    from sdschat.sds import MessageChannel, Outgoing

    fast = dict(
        repair_t_min_ms=300,
        repair_t_max_ms=1500,
        resend_unacknowledged_ms=400,
        resend_possibly_acknowledged_ms=1200,
        resend_max_interval_ms=3000,
        sync_interval_ms=2000,
        sync_jitter_ms=500,
    )
    cfg = node_channel_config(**fast)
    names = ("alice", "bob", "carol", "slow")
    nodes = {n: MessageChannel("chan", n, cfg, 0) for n in names}
    thaw = 4_000

    def broadcast(sender, data, t, to=None):
        for n in names:
            if n == sender or (to is not None and n not in to) or (n == "slow" and t < thaw):
                continue
            for e in nodes[n].receive(data, t):
                if isinstance(e, Outgoing):
                    broadcast(n, e.data, t)

    x = nodes["alice"].send(b"alice: X", 1_000)
    bob = [nodes["bob"].send(f"bob {i}".encode(), 1_000 + i) for i in range(10)]  # concurrent with X
    for b in bob:
        broadcast("bob", b.data, 1_020)
    broadcast("alice", x.data, 1_021)  # bob and carol: X, then ten more before they broadcast
    for i in range(10):
        broadcast("alice", nodes["alice"].send(f"alice {i}".encode(), 1_030 + i).data, 1_040)
    for t in range(1_050, 60_000, 10):
        for n, ch in nodes.items():
            if n == "slow" and t < thaw:
                continue  # SIGSTOP
            for e in ch.tick(t):
                if isinstance(e, Outgoing):
                    broadcast(n, e.data, t)
        if t >= thaw and (t - thaw) % 500 == 0 and t < thaw + 8_000:
            broadcast("slow", nodes["slow"].send(f"slow {t}".encode(), t).data, t)
    assert nodes["alice"].outgoing_ids == [] and nodes["alice"].stats["acked_by_bloom"] >= 1
    assert all(x.message_id in nodes[n].log for n in ("alice", "bob", "carol"))
    slow = nodes["slow"]
    assert x.message_id in slow.log, (
        f"slow never learned X existed: missing {slow.missing_ids}, lost {slow.stats['lost']}, pending {slow.pending()}"
    )


def test_a_peer_filter_lacking_a_logged_id_gets_it_named_in_our_next_sync():
    """Unit: carol logged X; slow's frame (sent well after) carries a filter without X: carol's next sync
    names X although X is far outside her K most recent additions. A filter holding X, or a frame within
    the margin, does not."""
    from sdschat.node import node_channel_config
    from sdschat.sds import MessageChannel, Outgoing
    from sdschat.sds.wire import decode

    cfg = node_channel_config()
    alice, carol, slow = (MessageChannel("chan", n, cfg, 0) for n in ("alice", "carol", "slow"))
    x = alice.send(b"X", 1_000)
    carol.receive(x.data, 1_001)
    for i in range(20):  # push X out of carol's causal-history window
        carol.receive(alice.send(f"a{i}".encode(), 1_010 + i).data, 1_020 + i)
    early = slow.send(b"s0", 1_500)  # within the margin: X may still be in flight
    carol.receive(early.data, 1_500)
    late = slow.send(b"s1", 10_000)
    carol.receive(late.data, 10_000)
    syncs = [e for e in carol.tick(11_500) if isinstance(e, Outgoing) and e.reason == "sync"]
    assert syncs and x.message_id in [h.message_id for h in decode(syncs[0].data).causal_history]
