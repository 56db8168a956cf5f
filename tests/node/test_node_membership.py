"""Members, admins and key epochs between real nodes over mosquitto: /kick, /rekey, late joiners, a member
offline through the change (back through a store node, or through any member), retention, and the attacks."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from membership_helpers import (
    Tap,
    all_joined,
    knows_all,
    member,
    opens,
    rejected_reasons,
    rejections,
    stop_all,
    wait_for,
)
from node_helpers import log_of, run, settle

from sdschat.crypto import ChannelKey, Identity
from sdschat.node import MEMBERSHIP_KEY, Node, UserError
from sdschat.node import events as ev
from sdschat.node.membership import Membership
from sdschat.storenode import StoreNode

pytestmark = pytest.mark.timeout(120)


def test_kick_removed_member_reads_nothing_after_and_the_rest_carry_on(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("kick-room")
        admin = Identity.generate()
        tap = await Tap(url).start()
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        c = await member("carol", key, tmp_path, url, admin)
        m = await member("mallory", key, tmp_path, url, admin)
        nodes = [a, b, c, m]
        seen = {n.nick: [] for n in nodes}
        for n in nodes:
            n.add_listener(lambda e, n=n: seen[n.nick].append(e) if isinstance(e, ev.MembershipChanged) else None)
        refused = rejections(b)
        try:
            await all_joined(nodes)
            await a.send_text("before the kick")
            await settle(nodes, 5)
            with pytest.raises(UserError, match="only an admin"):
                await b.kick("mallory")
            kicked_at = time.monotonic()
            pid, n, count = await a.kick("mallory")
            assert (pid, n, count) == (m.participant_id, 1, 3)
            await wait_for(lambda: all(x.membership.current.number == 1 for x in (a, b, c)), what="epoch 1")
            await wait_for(lambda: m.removed_me, what="mallory told")
            assert m.membership.current.number == 0  # no key for her
            with pytest.raises(UserError, match="removed"):
                await m.send_text("still here?")
            for i, x in enumerate((a, b, c)):
                await x.send_text(f"secret after the kick {i}")
            await settle([a, b, c], 9)
            assert log_of(a) == log_of(b) == log_of(c)
            texts = [msg.text for msg in c.messages()]
            assert "secret after the kick 0" in texts and texts.count("joined") == 4
            assert any(
                msg.kind == "epoch" and msg.text.startswith("removed mallory: new key (epoch 1) for 3")
                for msg in b.messages()
            )
            await asyncio.sleep(0.5)
            assert not any("secret after" in msg.text for msg in m.messages())
            # mallory, who still holds every key she had, tries to speak under the old one: refused as removed
            m.membership.removed.pop(m.participant_id)
            forged = await m.send_text("forged from outside")
            await wait_for(
                lambda: any(f.message_id == forged and f.outcome == "rejected: removed" for f in b.wire.frames),
                what="her message refused as removed",
            )
            assert set(refused) == {"removed"}, refused  # (her syncs since the kick: removed too)
            assert not any(msg.text == "forged from outside" for msg in b.messages())
            assert any(e.what == "removed" for e in seen["mallory"])
            assert any(e.what == "epoch" and e.who == (m.participant_id,) for e in seen["bob"])
        finally:
            await stop_all(nodes)
            await tap.stop()
        # her full state: every key in her database (membership) and her channel key open nothing sent after
        raw = json.loads(_kv(tmp_path / "mallory.db", MEMBERSHIP_KEY))
        keys = [key] + [ChannelKey(bytes.fromhex(e["s"]), "kick-room") for e in raw["epochs"]]
        later = [(topic, env) for at, topic, env in tap.frames if at > kicked_at]
        new_topic = a.membership.send_key.topic
        on_new = [env for topic, env in later if topic == new_topic]
        assert len(on_new) >= 3  # the three messages at least (and syncs)
        assert not any(opens(k, env) for k in keys for env in on_new)
        assert "removed" in rejected_reasons(tmp_path / "bob.db")  # the refusal is recorded, with its reason
        readable = [env for topic, env in later if any(opens(k, env) for k in keys)]
        plain = b"".join(key.open(env) for env in readable)
        assert b"secret after the kick" not in plain
        # the kept state says the same after a restart
        state = Membership(a.participant_id, key)
        state.load_json(_kv(tmp_path / "alice.db", MEMBERSHIP_KEY))
        assert state.current.number == 1 and m.participant_id in state.removed

    run(main(), 110)


def _kv(db, key: str) -> str:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()[0]


def test_a_member_offline_during_a_kick_catches_up_through_the_store(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("store-kick")
        admin = Identity.generate()
        store = await StoreNode.start(url, tmp_path / "store.db")
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        m = await member("mallory", key, tmp_path, url, admin)
        nodes = [a, b, m]
        try:
            await all_joined(nodes)
            await settle(nodes, 3)
            b.set_impairment(offline=True)
            await a.kick("mallory")
            for i in range(5):
                await a.send_text(f"while bob was away {i}")
            await wait_for(lambda: store.counters["stored"] >= 9, what="stored")
            assert b.membership.current.number == 0
            b.set_impairment(offline=False)
            await wait_for(lambda: b.membership.current.number == 1, what="bob switched")
            await settle([a, b], 9, timeout=30)
            assert log_of(a) == log_of(b)
            assert b.store_counters["delivered"] >= 5, b.store_counters
            await b.send_text("back")
            await settle([a, b], 10, timeout=30)
        finally:
            await stop_all(nodes)
            await store.stop()

    run(main(), 100)


def test_a_member_offline_during_a_rekey_gets_the_key_from_any_member_without_a_store(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("nostore-rekey")
        admin = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin, use_store=False)
        b = await member("bob", key, tmp_path, url, admin, use_store=False)
        c = await member("carol", key, tmp_path, url, admin, use_store=False)
        nodes = [a, b, c]
        try:
            await all_joined(nodes)
            await settle(nodes, 3)
            c.set_impairment(offline=True)
            assert await a.rekey() == (1, 3)
            await a.send_text("new key 1")
            await b.send_text("new key 2")
            await settle([a, b], 6)
            c.set_impairment(offline=False)
            await c.send_text("i was away")  # under the old key: a and b still listen there, and answer with the key
            await wait_for(lambda: c.membership.current.number == 1, what="carol switched")
            await settle(nodes, 7, timeout=40)
            assert log_of(a) == log_of(b) == log_of(c)
        finally:
            await stop_all(nodes)

    run(main(), 100)


def test_rekey_under_20_percent_loss_with_messages_in_flight_loses_nothing(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("lossy-rekey")
        admin = Identity.generate()
        loss = {"loss_in": 0.2, "loss_out": 0.2}
        nodes = [
            await member(nick, key, tmp_path, url, admin, impairment=loss, seed=i)
            for i, nick in enumerate(("alice", "bob", "carol"))
        ]
        a, b, c = nodes
        try:
            await all_joined(nodes, 30)
            await settle(nodes, 3, timeout=40)

            async def chatter(node, tag):
                for i in range(8):
                    await node.send_text(f"{tag} {i}")
                    await asyncio.sleep(0.05)

            talk = [asyncio.ensure_future(chatter(x, x.nick)) for x in nodes]
            await asyncio.sleep(0.2)
            await a.rekey()
            await asyncio.gather(*talk)
            await wait_for(lambda: all(x.membership.current.number == 1 for x in nodes), 30, "epoch 1 everywhere")
            await settle(nodes, 3 + 24 + 1, timeout=60)
            assert log_of(a) == log_of(b) == log_of(c)
            texts = {msg.text for msg in c.messages()}
            assert {f"{x.nick} {i}" for x in nodes for i in range(8)} <= texts
            assert all(x.membership.current.number == 1 for x in nodes)
        finally:
            await stop_all(nodes)

    run(main(), 110)


def epoch1_key(node: Node):
    return next((k for e, k in node.membership.keys() if e.number == 1), None)


def test_old_keys_are_deleted_after_the_retention_window(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("retention")
        admin = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin, epoch_retention_ms=3_000)
        b = await member("bob", key, tmp_path, url, admin, epoch_retention_ms=3_000)
        expired = []
        b.add_listener(
            lambda e: expired.append(e) if isinstance(e, ev.MembershipChanged) and e.what == "expired" else None
        )
        try:
            await wait_for(lambda: knows_all(a, [b]) and knows_all(b, [a]), what="joins")
            await a.rekey()
            await wait_for(lambda: b.membership.current.number == 1, what="epoch 1")
            first = b.membership.current.secret
            first_message = b.membership.current.message_id
            await a.rekey()
            await wait_for(lambda: b.membership.current.number == 2, what="epoch 2")
            assert epoch1_key(b) is not None  # epoch 1's key while the window runs (epoch 0's may be gone already)
            await wait_for(lambda: len(b.membership.keys()) == 1, 10, "old keys deleted")
            assert [e.epoch for e in expired][-1] >= 1
            await wait_for(
                lambda: first.hex() not in _kv(tmp_path / "bob.db", MEMBERSHIP_KEY),
                5,
                "the kept state written without it",
            )  # (the writer commits on a coming turn)

            def in_files() -> bool:
                raw = b"".join(p.read_bytes() for p in tmp_path.glob("bob.db*"))
                return first.hex().encode() in raw or first in raw

            await wait_for(lambda: not in_files(), 5, "deleted key gone from bob's database files")
            # nor does anything keep the box that opened it: the message row never had it, the repair cache let
            # the message go with the key
            import sqlite3

            with sqlite3.connect(tmp_path / "bob.db") as conn:
                assert (
                    conn.execute("SELECT count(*) FROM sds_cache WHERE message_id = ?", (first_message,)).fetchone()[0]
                    == 0
                )
                rows = [json.loads(c) for (c,) in conn.execute("SELECT content FROM messages")]
            epochs = [r["d"] for r in rows if r["k"] == "epoch"]
            assert len(epochs) == 2 and all(d["e"] == "" and isinstance(d["keys"], list) for d in epochs)
            # a frame sealed under a deleted key is not read any more
            before = b.counters["undecryptable"]
            b.receiver.on_frame(key.seal(b"x" * 40), None, key.topic)
            assert b.counters["undecryptable"] == before + 1
            await a.send_text("under epoch 2")
            await settle([a, b], 5)
        finally:
            await a.stop()
            await b.stop()

    run(main(), 60)


def test_late_joiner_gets_the_current_key_from_an_admin_and_non_admins_cannot_change_keys(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("late")
        admin = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        try:
            await wait_for(lambda: knows_all(a, [b]), what="joins")
            await a.rekey()
            await wait_for(lambda: b.membership.current.number == 1, what="epoch 1")
            # dave joins with the channel's first key (an old invite): alice gives him the current one
            d = await member("dave", key, tmp_path, url, admin)
            try:
                await wait_for(lambda: d.membership.current.number == 1, what="dave granted")
                await a.send_text("hello dave")
                await wait_for(lambda: any(msg.text == "hello dave" for msg in d.messages()), what="dave reads")
                # bob is no admin: his own node refuses, and a forged epoch (his node told he is one) is refused
                with pytest.raises(UserError, match="only an admin"):
                    await b.rekey()
                refused_a, refused_d = rejections(a), rejections(d)
                b.membership.admins.add(b.participant_id)
                await b.rekey()
                await wait_for(lambda: "bad_control" in refused_a and "bad_control" in refused_d, what="refused")
                assert set(refused_a) == set(refused_d) == {"bad_control"}, (refused_a, refused_d)
                assert a.membership.current.number == 1 and d.membership.current.number == 1

            finally:
                await d.stop()
        finally:
            await a.stop()
            await b.stop()

    run(main(), 90)
    assert "bad_control" in rejected_reasons(tmp_path / "alice.db")  # recorded, with its reason


def test_a_member_named_admin_changes_the_key_for_everyone_and_a_non_admin_cannot(node_mosquitto, tmp_path):
    """``/admin NAME`` end to end: carol, no admin, forces a key change (her node told she is one): alice and bob
    refuse it as *bad_control* and stay on their key. Alice names bob; once the admin message reaches the
    others, his kick of carol is accepted by alice (both switch to his key), carol learns she was removed, and
    what bob then writes reaches alice and not carol."""

    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("named-admin")
        admin = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        c = await member("carol", key, tmp_path, url, admin)
        nodes = [a, b, c]
        refused_a, refused_b = rejections(a), rejections(b)
        try:
            await all_joined(nodes)
            with pytest.raises(UserError, match="only an admin"):
                await c.rekey()
            c.membership.admins.add(c.participant_id)
            await c.rekey()
            await wait_for(lambda: "bad_control" in refused_a and "bad_control" in refused_b, what="refused")
            assert a.membership.current.number == b.membership.current.number == 0
            # alice names bob: every member learns it
            assert await a.name_admin("bob") == b.participant_id
            await wait_for(lambda: all(b.participant_id in x.membership.admins for x in (a, b)), what="bob admin")
            assert b.membership.is_admin
            # now bob's kick counts: alice switches to his key, carol is removed
            before = len(refused_a)
            pid, n, count = await b.kick("carol")
            assert (pid, n, count) == (c.participant_id, 1, 2)
            await wait_for(lambda: a.membership.current.number == 1, what="alice on bob's new key")
            assert a.membership.current.secret == b.membership.current.secret
            assert a.membership.send_key.topic == b.membership.send_key.topic != key.topic
            assert c.participant_id in a.membership.removed and "bad_control" not in refused_a[before:]
            await b.send_text("bob, admin now")
            await wait_for(lambda: any(msg.text == "bob, admin now" for msg in a.messages()), what="alice reads")
            assert not any(msg.text == "bob, admin now" for msg in c.messages())
        finally:
            await stop_all(nodes)
        return refused_a

    refused = run(main(), 90)
    assert set(refused) <= {"bad_control", "removed"}, refused
    assert "bad_control" in rejected_reasons(tmp_path / "alice.db")


def test_not_protected_a_member_who_has_not_learned_of_a_removal_still_sends_under_the_old_key(
    node_mosquitto, tmp_path
):
    """SECURITY.md, not protected: a removal takes effect as members learn of it. Bob is offline when mallory is
    removed; what he writes meanwhile goes out under the old key when he is back (before the change reaches him),
    and mallory, who still holds that key, reads it. Once he has switched, she reads nothing more of his."""

    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("lagging")
        admin = Identity.generate()
        tap = await Tap(url).start()
        a = await member("alice", key, tmp_path, url, admin, use_store=False)
        b = await member("bob", key, tmp_path, url, admin, use_store=False)
        m = await member("mallory", key, tmp_path, url, admin, use_store=False)
        nodes = [a, b, m]
        try:
            await all_joined(nodes)
            b.set_impairment(offline=True)
            await a.kick("mallory")
            await b.send_text("written while away")
            # back, but (for a moment) not yet hearing anything: what he wrote goes out before the change reaches
            # him (without this, a loaded machine may deliver the change first and the test races)
            b.set_impairment(offline=False, loss_in=1.0)
            await wait_for(
                lambda: any(
                    topic == key.topic and opens(key, env) and b"written while away" in key.open(env)
                    for _, topic, env in list(tap.frames)
                ),
                10,
                "his line published",
            )
            b.set_impairment(loss_in=0.0)
            await wait_for(lambda: b.membership.current.number == 1, 20, "bob switched")
            await b.send_text("written after switching")
            await settle([a, b], 3 + 1 + 2, timeout=30)
        finally:
            await stop_all(nodes)
            await tap.stop()
        plain = b"".join(key.open(env) for _, topic, env in tap.frames if topic == key.topic and opens(key, env))
        assert b"written while away" in plain  # mallory's old key opens it: the limitation
        assert b"written after switching" not in plain

    run(main(), 90)


def test_an_admin_rotates_the_key_when_the_profile_asks_and_the_clock_survives_a_restart(node_mosquitto, tmp_path):
    """``rekey_days`` (here a second and a half): the admin's node starts a new epoch once the current one is
    that old, by its own clock, also counted across a restart (a member who restarts daily still rotates)."""

    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("rotate")
        admin = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin, rekey_every_ms=1_500)
        b = await member("bob", key, tmp_path, url, admin)
        try:
            await all_joined([a, b])
            await wait_for(lambda: b.membership.current.number >= 1, 10, "a first rotation")
            await wait_for(lambda: b.membership.current.number >= 2, 10, "a second rotation")
            assert not b.membership.is_admin and b.config.rekey_every_ms == 0
            await a.stop()
            started = a.membership.current.started_ms
            assert started > 0
            a = await member("alice", key, tmp_path, url, admin, rekey_every_ms=60_000)
            assert a.membership.current.started_ms == started  # the epoch's age is kept, not reset by the restart
            await b.send_text("still fine")
            await settle([a, b], 2 + a.membership.current.number + 1, timeout=20)
        finally:
            await stop_all([a, b])

    run(main(), 60)


def test_a_member_who_gets_the_admin_message_late_still_accepts_the_new_admins_key_change(node_mosquitto, tmp_path):
    """Alice names bob while carol hears nothing; bob rekeys at once. Bob's epoch message names the admin message
    in its causal history, so carol must accept it once she has both, and end on bob's key."""

    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("late-admin")
        admin = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        c = await member("carol", key, tmp_path, url, admin)
        nodes = [a, b, c]
        refused_c = rejections(c)
        try:
            await all_joined(nodes)
            c.set_impairment(loss_in=1.0)
            await a.name_admin("bob")
            await wait_for(lambda: b.membership.is_admin, what="bob admin")
            c.set_impairment(loss_in=0.0)
            await b.rekey()
            await wait_for(lambda: c.membership.current.number == 1, 15, "carol on bob's key")
            assert b.participant_id in c.membership.admins and "bad_control" not in refused_c
        finally:
            await stop_all(nodes)

    run(main(), 60)
