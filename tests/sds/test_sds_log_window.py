"""A windowed local log (``ChannelConfig.log_window``): the same behaviour as the whole log in memory, in
a fraction of the memory. Older ids leave the rows for a :class:`LogArchive` that still answers membership."""

from __future__ import annotations

import dataclasses
import random

from sds_helpers import Network, channel, frame, lossy_three, of, quiet_config

from sdschat.sds import (
    Delivered,
    GapDetected,
    HistoryEntry,
    LogArchive,
    MessageChannel,
    Missing,
    wire,
)

WINDOW = 8  # the window proper; rows are evicted in batches once 64 more have come in


def _run(window: int, seed: int) -> tuple[Network, dict[str, list[str]]]:
    return lossy_three(seed, log_window=window)


def test_a_windowed_log_behaves_exactly_as_the_whole_log():
    """Same seed, same network: every event of every member identical, with and without the window (late
    arrivals with old Lamport times, duplicates of evicted messages, syncs and gap hints naming them)."""
    for seed in (1, 2):
        whole_net, whole = _run(0, seed)
        win_net, windowed = _run(WINDOW, seed)
        assert windowed == whole, seed
        for name, ch in win_net.nodes.items():
            full = whole_net.nodes[name]
            assert ch.log_size() == len(full.log) > 170  # (a few declared lost on the way)
            assert len(ch.log) < 80 < ch.log_size()  # and most of it left the rows
            kept = set(ch.log)  # the newest rows, in log order (and the K newest additions, however old)
            assert ch.log[-WINDOW:] == full.log[-WINDOW:]
            assert ch.log == [m for m in full.log if m in kept]
            assert all(mid in ch for mid in full.log)
            assert ch.summary()["log"] == len(full.log)
            assert ch.check_invariants() == []
        # the run exercised what a window has to get right
        stats = win_net.nodes["alice"].stats
        assert stats["duplicates"] > 0


def _bob_frames(n: int) -> list[tuple[str, bytes]]:
    bob = channel("bob")
    return [(out.message_id, out.data) for out in (bob.send(f"m{i}".encode(), i + 1) for i in range(n))]


def test_an_evicted_message_arriving_again_is_a_duplicate_and_is_not_delivered_twice():
    alice = channel("alice", quiet_config(log_window=WINDOW))
    frames = _bob_frames(100)
    for i, (_mid, data) in enumerate(frames):
        assert of(alice.receive(data, 100 + i), Delivered)
    first_id, first_data = frames[0]
    assert first_id not in alice.log and first_id in alice  # archived, still known
    before = alice.stats["duplicates"]
    assert not of(alice.receive(first_data, 1_000), Delivered)
    assert alice.stats["duplicates"] == before + 1
    assert alice.log_size() == 100


def test_a_message_or_sync_naming_an_archived_message_waits_for_nothing():
    alice = channel("alice", quiet_config(log_window=WINDOW))
    frames = _bob_frames(100)
    for i, (_, data) in enumerate(frames):
        alice.receive(data, 100 + i)
    old = [mid for mid, _ in frames[:5]]
    assert not any(mid in alice.log for mid in old)
    events = alice.receive(frame("carol", "c1", lamport=500, history=[_entry(m) for m in old]), 2_000)
    assert [e.message_id for e in of(events, Delivered)] == ["c1"]
    assert not of(events, Missing)
    sync = alice.receive(frame("carol", "s1", lamport=501, history=[_entry(m) for m in old], content=None), 2_001)
    assert not of(sync, GapDetected)
    assert alice.snapshot().missing == []


def _entry(mid: str) -> HistoryEntry:
    return HistoryEntry(mid, None, "bob")


def test_a_late_message_with_an_old_lamport_time_is_still_named_in_the_next_causal_history():
    alice = channel("alice", quiet_config(log_window=WINDOW, causal_history_size=3))
    for i, (_, data) in enumerate(_bob_frames(100)):
        alice.receive(data, 100 + i)
    alice.receive(frame("carol", "late", lamport=1), 1_000)  # older than everything in the window
    assert "late" in alice
    out = alice.send(b"hello", 2_000)
    named = [e.message_id for e in wire.decode(out.data).causal_history]
    assert "late" in named


def test_snapshot_and_restore_keep_the_archive():
    alice = channel("alice", quiet_config(log_window=WINDOW))
    frames = _bob_frames(100)
    for i, (_, data) in enumerate(frames):
        alice.receive(data, 100 + i)
    state = alice.snapshot()
    assert state.log_archive is not None and len(state.log_archive) == 100 - len(state.log)
    again = MessageChannel.restore(state, alice.config)
    assert again.log == alice.log and again.log_size() == 100
    assert all(mid in again for mid, _ in frames)
    assert not of(again.receive(frames[0][1], 2_000), Delivered)
    # the snapshot's archive is a copy: the restored channel archiving more does not change it
    count = len(state.log_archive)
    for i in range(100):
        again.receive(frame("carol", f"c{i}", lamport=1_000 + i), 3_000 + i)
    assert len(state.log_archive) == count
    assert again.snapshot().log_archive is not None and len(again.snapshot().log_archive) > count


def test_the_window_off_keeps_every_row_and_no_archive():
    alice = channel("alice")
    for i, (_, data) in enumerate(_bob_frames(100)):
        alice.receive(data, 100 + i)
    assert len(alice.log) == alice.log_size() == 100
    assert alice.snapshot().log_archive is None


def test_log_archive_membership_has_no_false_negatives_across_merges():
    rng = random.Random(5)
    ids = [f"{rng.getrandbits(256):064x}" for _ in range(30_000)]
    archive = LogArchive(LogArchive.key(m) for m in ids[:10_000])
    for m in ids[10_000:20_000]:  # several merges into the sorted part
        archive.add(m)
    assert len(archive) == 20_000
    assert all(m in archive for m in ids[:20_000])
    assert not any(m in archive for m in ids[20_000:])
    copy = archive.copy()
    archive.add(ids[25_000])
    assert ids[25_000] in archive and ids[25_000] not in copy
    assert "x" not in LogArchive()


def test_log_window_is_a_config_field_that_round_trips():
    cfg = quiet_config(log_window=123)
    assert dataclasses.asdict(cfg)["log_window"] == 123
