"""Presence over a real broker (mosquitto): online, away and offline from ephemeral beats, never stored.

Real nodes and a real broker; the beat interval and the idle time are shortened per node (``presence_every_ms``,
``away_after_ms``), so going away and coming back happen in seconds."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from node_helpers import FAST, run, until

from sdschat.crypto import ChannelKey
from sdschat.node import AppPayload, Node, NodeConfig, node_channel_config
from sdschat.node import events as ev
from sdschat.node.presence import (
    ANSWER_WITHIN_MS,
    AWAY,
    BEAT_MEMBERS,
    OFFLINE,
    ONLINE,
    beat_interval,
    beat_payload,
    read_beat,
)

pytestmark = pytest.mark.timeout(90)


async def start(
    nick: str, key: ChannelKey, folder, url: str, *, every_ms: int = 60_000, away_ms: int = 0, **channel
) -> Node:
    config = NodeConfig(
        nick,
        key,
        folder / f"{nick}.db",
        url,
        channel_config=node_channel_config(**{**FAST, **channel}),
        presence_every_ms=every_ms,
        away_after_ms=away_ms,
    )
    return await Node.start(config)


async def pair(name: str, folder, url: str, **kw) -> tuple[Node, Node]:
    """alice and bob in a new channel ``name``, each started with ``kw`` (see :func:`start`)."""
    key = ChannelKey.generate(name)
    return await start("alice", key, folder, url, **kw), await start("bob", key, folder, url, **kw)


def changes(node: Node) -> list[ev.PresenceChanged]:
    seen: list[ev.PresenceChanged] = []
    node.add_listener(lambda e: seen.append(e) if isinstance(e, ev.PresenceChanged) else None)
    return seen


def test_a_beat_reads_back_and_what_is_no_beat_is_ignored():
    app = AppPayload.decode(beat_payload("bob", AWAY, "at\nlunch", 1, 0, 60_000, ask=True).encode())
    assert read_beat(app) == (AWAY, "at lunch", 60_000, True)
    online = AppPayload.decode(beat_payload("bob", ONLINE, "ignored", 1, 0, 60_000).encode())
    assert read_beat(online) == (ONLINE, "", 60_000, False)
    assert read_beat(AppPayload.new("msg", "bob", "hi", 1)) is None
    odd = AppPayload.new("presence", "bob", "", 1, data={"s": "asleep"})
    assert read_beat(odd) is None
    beat = beat_payload("bob", ONLINE, "", 1_764_000_000_000, 3, 120_000)
    assert len(beat.encode()) <= 128  # the payload; the frame adds ids and a signature, the envelope its padding


def test_the_beat_interval_grows_with_the_channel_past_five_members():
    assert beat_interval(180_000, 2) == beat_interval(180_000, BEAT_MEMBERS) == 180_000
    assert beat_interval(180_000, 10) == 360_000  # a quiet channel's syncs are shared among more members
    assert beat_interval(180_000, 1_000) == 3_600_000  # at most an hour
    assert beat_interval(2_000, 3) == 2_000 and beat_interval(7_200_000, 50) == 7_200_000  # never below the base


def test_a_big_channels_quiet_member_is_not_shown_offline_by_a_smaller_announced_interval(node_mosquitto, tmp_path):
    async def main():
        a, b = await pair("big", tmp_path, node_mosquitto.url, every_ms=60_000)
        try:
            bob = b.participant_id
            await until(lambda: a.presence(bob).state == ONLINE, 10, "alice hears bob")
            heard = a.presences.of(bob, a.now()).last_heard_ms
            later = heard + 60_000 * 3  # past 2.5 of bob's announced minute, not of the channel's size's
            assert a.presences.of(bob, later).state == OFFLINE
            a.presences.beat_every_ms = beat_interval(60_000, 10)  # (what alice's tick sets in a channel of 10)
            assert a.presences.of(bob, later).state == ONLINE
            assert a.presences.of(bob, heard + 360_000).state == OFFLINE
            a.presences._size_due = 0  # the keeper looks at the channel's size again at its next tick
            await until(lambda: a.presences.beat_every_ms == 60_000, 5, "two members: the configured interval")
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_presence_going_away_and_coming_back(node_mosquitto, tmp_path):
    async def main():
        url, key = node_mosquitto.url, ChannelKey.generate("presence")
        a = await start("alice", key, tmp_path, url)
        b = await start("bob", key, tmp_path, url)
        told = changes(a)
        try:
            await until(lambda: a.presence(b.participant_id).state == ONLINE, 10, "alice hears bob online")
            await until(lambda: b.presence(a.participant_id).state == ONLINE, 10, "bob hears alice online")
            b.set_away("at lunch")
            assert b.presence(b.participant_id).state == AWAY
            await until(lambda: a.presence(b.participant_id).state == AWAY, 10, "alice sees bob away")
            assert a.presence(b.participant_id).message == "at lunch"
            await b.send_typing()  # typing brings bob back from /away
            await until(lambda: a.presence(b.participant_id).state == ONLINE, 10, "alice sees bob back")
            bob = b.participant_id
            await b.stop()  # a clean quit: an offline beat
            await until(lambda: a.presence(bob).state == OFFLINE, 10, "alice sees bob offline")
            heard = a.presence(bob).last_heard_ms
            assert heard > 0 and a.presence(bob).epoch == 0
            b = await start("bob", key, tmp_path, url)  # back again
            await until(lambda: a.presence(bob).state == ONLINE, 10, "alice sees bob online again")
            states = [e.state for e in told if e.participant_id == bob]
            assert states[-4:] == [AWAY, ONLINE, OFFLINE, ONLINE], states
            info = a.whois("bob")
            assert info["presence"] == ONLINE and info["key_epoch"] == 0 and info["key_epoch_from"] == "heard"
            assert info["last_heard_ms"] >= heard
        finally:
            await a.stop()
            await b.stop()
        # nothing of it is in the database: no row names presence
        for nick in ("alice", "bob"):
            with sqlite3.connect(tmp_path / f"{nick}.db") as db:
                rows = db.execute("SELECT count(*) FROM messages WHERE CAST(content AS TEXT) LIKE '%presence%'")
                assert rows.fetchone()[0] == 0
                kinds = {k for (k,) in db.execute("SELECT DISTINCT kind FROM events")}
                assert not any("presence" in k for k in kinds), kinds

    run(main())


def test_a_member_that_vanishes_goes_offline_and_an_idle_one_goes_away(node_mosquitto, tmp_path):
    async def main():
        url, key = node_mosquitto.url, ChannelKey.generate("vanish")
        a = await start("alice", key, tmp_path, url, every_ms=2_000)
        b = await start("bob", key, tmp_path, url, every_ms=2_000, away_ms=1_500)
        try:
            bob = b.participant_id
            await until(lambda: a.presence(bob).state == AWAY, 15, "bob idle: away on its own")
            assert a.presence(bob).message == ""
            b.active()  # a key pressed: back from an idle away
            await until(lambda: a.presence(bob).state == ONLINE, 10, "bob back")
            b.set_impairment(offline=True)  # unplugged: no offline beat, only silence
            await until(lambda: a.presence(bob).state == OFFLINE, 20, "bob not heard: offline")
            b.set_impairment(offline=False)
            await until(lambda: a.presence(bob).state != OFFLINE, 20, "bob heard again")
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_a_newcomer_learns_who_is_away_at_once(node_mosquitto, tmp_path):
    async def main():
        url, key = node_mosquitto.url, ChannelKey.generate("newcomer")
        a = await start("alice", key, tmp_path, url)  # beats only every minute: the answer is what tells
        a.set_away("back at 3")
        b = await start("bob", key, tmp_path, url)
        try:
            await until(lambda: b.presence(a.participant_id).state == AWAY, 10, "bob learns alice is away")
            assert b.presence(a.participant_id).message == "back at 3"
            names = {p.name: p for p in b.presence_list()}
            assert names["bob"].me and names["bob"].presence.state == ONLINE
            assert names["alice"].presence.label == "away (back at 3)"
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_a_member_heard_through_its_other_frames_sends_no_beats(node_mosquitto, tmp_path):
    async def main():
        a, b = await pair("quiet-beats", tmp_path, node_mosquitto.url, every_ms=2_000)
        try:
            await until(lambda: b.presence(a.participant_id).state == ONLINE, 10, "bob hears alice")
            await asyncio.sleep(ANSWER_WITHIN_MS[1] / 1000 + 0.3)  # (alice's answer to bob's start beat)
            before = a.presences.beats_sent
            for i in range(12):  # six seconds, three beat intervals, of alice talking
                await a.send_text(f"line {i}")
                await asyncio.sleep(0.5)
                assert b.presence(a.participant_id).state == ONLINE
            assert a.presences.beats_sent == before  # every line already said she is here
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_a_line_sent_after_a_newcomer_asked_answers_it_without_a_beat(node_mosquitto, tmp_path):
    async def main():
        url, key = node_mosquitto.url, ChannelKey.generate("answered-by-a-line")
        a = await start("alice", key, tmp_path, url)
        await asyncio.sleep(0.5)
        b = await start("bob", key, tmp_path, url)
        try:
            await until(lambda: a.presence(b.participant_id).state == ONLINE, 10, "alice hears bob's start beat")
            before = a.presences.beats_sent
            await a.send_text("hi bob")  # at least 300 ms before the answer would be due
            await until(lambda: b.presence(a.participant_id).state == ONLINE, 10, "bob hears alice")
            await asyncio.sleep(ANSWER_WITHIN_MS[1] / 1000 + 0.3)
            assert a.presences.beats_sent == before  # the line told bob she is here
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_an_idle_member_is_heard_through_its_sync_brought_forward_not_a_beat(node_mosquitto, tmp_path):
    async def main():
        url, key = node_mosquitto.url, ChannelKey.generate("idle-syncs")
        slow = dict(sync_interval_ms=60_000, sync_jitter_ms=0)  # no periodic sync in this test's time
        a = await start("alice", key, tmp_path, url, every_ms=2_000, **slow)
        b = await start("bob", key, tmp_path, url, every_ms=2_000, **slow)
        try:
            bob = b.participant_id
            await until(lambda: a.presence(bob).state == ONLINE, 10, "alice hears bob")
            await a.send_text("one line, so both logs have something to sync")
            await until(lambda: len(b.messages()) >= 1, 10, "bob has the line")
            await asyncio.sleep(ANSWER_WITHIN_MS[1] / 1000 + 0.3)  # (start beats answered)
            beats, early = b.presences.beats_sent, b.presences.syncs_for_beats
            for _ in range(16):  # eight seconds idle: four beat intervals, offline after five seconds unheard
                await asyncio.sleep(0.5)
                assert a.presence(bob).state == ONLINE
            assert b.presences.beats_sent == beats  # no ephemeral beat
            assert b.presences.syncs_for_beats >= early + 2  # its syncs said it was there
        finally:
            await a.stop()
            await b.stop()

    run(main())
