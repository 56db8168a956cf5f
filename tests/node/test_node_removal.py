"""A removal is final, between real nodes over mosquitto: an invite from before a kick (or re-made from the removed
member's profile) admits nobody and is never handed a later key; a member away through a kick gets the new key
after every node restarted, with no store node; the removed member no longer holds back acknowledgements; a
removed member who speaks is told; a member that learns of a key not sealed to it says it is locked out."""

from __future__ import annotations

import asyncio
import json

import pytest
from membership_helpers import Tap, all_joined, member, opens, rejected_reasons, rejections, stop_all, trio, wait_for
from node_helpers import FAST, log_of, run, settle

from sdschat.crypto import ChannelKey, Identity
from sdschat.node import MEMBERSHIP_KEY, Node, NodeConfig, UserError, node_channel_config
from sdschat.node import events as ev
from sdschat.node.membership import Membership, invite_refusal

pytestmark = pytest.mark.timeout(150)


def _kv(db, key: str) -> str | None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


async def newcomer(
    nick: str, key: ChannelKey, folder, url: str, admin: Identity, state_text: str | None, **cfg
) -> Node:
    """A fresh profile joining with what an invite made from ``state_text`` (a member's saved membership state;
    None: a channel with no change yet) carries: the admins, the current key epoch and the removed members."""
    epoch, removed = None, ()
    if state_text is not None:
        _, epoch, removed = Membership.read_keys(state_text)
    config = NodeConfig(
        nick,
        key,
        folder / f"{nick}.db",
        url,
        channel_config=node_channel_config(**FAST),
        identity=Identity.generate(),
        membership=True,
        admins=(admin.participant_id,),
        epoch=epoch,
        removed=tuple(removed),
        **cfg,
    )
    return await Node.start(config)


def _texts(node: Node) -> set[str]:
    return {m.text for m in node.messages()}


def test_an_invite_made_before_a_kick_admits_nobody_and_is_never_handed_the_new_key(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("final")
        admin = Identity.generate()
        tap = await Tap(url).start()
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        m = await member("mallory", key, tmp_path, url, admin)
        old_invite = _kv(tmp_path / "alice.db", MEMBERSHIP_KEY)  # what `sdschat invite` carries, made now
        refused_by = {x.nick: rejections(x) for x in (a, b)}
        refusals = []
        for x in (a, b):
            x.add_listener(
                lambda e: refusals.append(e) if isinstance(e, ev.MembershipChanged) and e.what == "refused" else None
            )
        eve = None
        try:
            await all_joined([a, b, m])
            await a.kick("mallory")
            await wait_for(lambda: b.membership.current.number == 1, what="bob on epoch 1")
            await m.stop()
            eve = await newcomer("eve", key, tmp_path, url, admin, old_invite)
            for i in range(3):
                await eve.send_text(f"eve {i}")
            for i in range(4):
                await a.send_text(f"alice after {i}")
                await b.send_text(f"bob after {i}")
            await settle([a, b], 1 + 3 + 8, timeout=30)  # (the join lines, the kick line, the 8 lines)
            await asyncio.sleep(2.0)
            assert eve.membership.current.number == 0  # nobody handed her epoch 1
            assert eve.participant_id not in a.membership.members and eve.participant_id not in b.membership.members
            assert not any(t.startswith(("alice after", "bob after")) for t in _texts(eve))
            for x in (a, b):
                assert not any(t.startswith("eve") for t in _texts(x)), x.nick
                assert "stale_key" in refused_by[x.nick], refused_by[x.nick]
            assert any(e.by == eve.participant_id for e in refusals)  # shown as a refused join
            assert "stale_key" in rejected_reasons(tmp_path / "alice.db")  # and recorded
            assert log_of(a) == log_of(b)
            await wait_for(lambda: eve.locked_out == 1, 20, "eve told she is locked out")
        finally:
            await stop_all([a, b] + ([eve] if eve else []))
            await tap.stop()
        # on the wire: nothing sent after the kick opens with any key eve holds
        eve_keys = [key]
        later = [env for _, topic, env in tap.frames if topic == a.membership.send_key.topic]
        assert later and not any(opens(k, env) for k in eve_keys for env in later)

    run(main(), 140)


def test_an_invite_remade_from_the_removed_members_profile_admits_nobody(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key, admin, (a, b, m) = await trio("remade", tmp_path, url)
        try:
            await a.rekey()  # epoch 1: mallory gets it too
            await wait_for(lambda: m.membership.current.number == 1, what="mallory on epoch 1")
            await a.kick("mallory")  # epoch 2
            await wait_for(lambda: m.removed_me and b.membership.current.number == 2, what="kick applied")
        finally:
            await m.stop()
        state = _kv(tmp_path / "mallory.db", MEMBERSHIP_KEY)
        assert "removed" in invite_refusal(state)  # `sdschat invite` there refuses, and says why
        assert Membership.read_keys(state)[1][0] == 1  # what a hand-made token would carry: her epoch 1 key
        eve = await newcomer("eve", key, tmp_path, url, admin, state)
        try:
            assert eve.membership.current.number == 1
            await eve.send_text("let me in")
            await a.send_text("after the kick")
            await wait_for(lambda: eve.locked_out == 2, 20, "eve locked out")
            await settle([a, b], 3 + 2 + 1, timeout=30)  # three joins, the rekey and kick lines, one text
            await asyncio.sleep(1.5)
            assert eve.membership.current.number == 1
            assert "after the kick" not in _texts(eve)
            assert "let me in" not in _texts(a) | _texts(b)
            assert eve.participant_id not in a.membership.members
        finally:
            await stop_all([a, b, eve])

    run(main(), 120)


def test_a_member_away_through_a_kick_gets_the_key_after_every_restart_without_a_store(node_mosquitto, tmp_path):
    """The issue's scenario: carol and mallory online during the kick, bob away; everyone stops; alice and carol
    restart; bob comes back with no store node. The epoch message is found again in alice's and carol's databases."""

    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("restarts")
        admin = Identity.generate()
        ids = {n: (admin if n == "alice" else Identity.generate()) for n in ("alice", "bob", "carol", "mallory")}

        async def start(nick):
            return await member(nick, key, tmp_path, url, admin, identity=ids[nick], use_store=False)

        a, b, c, m = [await start(n) for n in ("alice", "bob", "carol", "mallory")]
        await all_joined([a, b, c, m])
        await settle([a, b, c, m], 4)
        b.set_impairment(offline=True)
        await a.kick("mallory")
        await wait_for(lambda: c.membership.current.number == 1 and m.removed_me, what="carol switched")
        await c.send_text("carol after the kick")  # its history acknowledges the epoch message: no more resends
        await wait_for(lambda: not a.channel.outgoing_ids, 20, "the epoch message acknowledged")
        await stop_all([a, b, c, m])
        a, c = await start("alice"), await start("carol")
        b = await start("bob")
        nodes = [a, b, c]
        try:
            assert b.membership.current.number == 0
            await wait_for(lambda: b.membership.current.number == 1, 30, "bob got epoch 1 from a restarted member")
            for i in range(4):
                await a.send_text(f"alice {i}")
                await c.send_text(f"carol {i}")
            await wait_for(
                lambda: {f"alice {i}" for i in range(4)} | {f"carol {i}" for i in range(4)} <= _texts(b),
                40,
                "bob has every line",
            )
            assert b.locked_out == 0 and not b.removed_me
        finally:
            await stop_all(nodes)

    run(main(), 140)


def test_after_a_kick_that_leaves_two_members_resends_stop(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key, admin, (a, b, m) = await trio("two-left", tmp_path, url)
        try:
            for x in (a, b, m):
                await x.send_text(f"hello from {x.nick}")
            await settle([a, b, m], 3 + 3)
            await a.kick("mallory")
            await wait_for(lambda: b.membership.current.number == 1, what="epoch 1")
            await m.stop()
            assert m.participant_id not in b.channel._peers  # (the engine's peers follow the membership)
            for i in range(5):
                await b.send_text(f"bob {i}")
            await wait_for(lambda: not b.channel.outgoing_ids, 25, "bob's lines acknowledged")
            resends = b.health()["resends"]
            await asyncio.sleep(6)
            assert b.health()["resends"] == resends and not b.channel.outgoing_ids
        finally:
            await stop_all([a, b, m])
        # after a restart too: the removed member is no peer of the restored engine
        b2 = await member("bob", key, tmp_path, url, admin, identity=b.identity)
        try:
            assert m.participant_id not in b2.channel._peers
        finally:
            await b2.stop()

    run(main(), 120)


def test_a_removed_member_who_speaks_under_the_old_key_is_told(node_mosquitto, tmp_path):
    """Mallory is away through her removal; alice and bob restart (the epoch message acknowledged, so nobody
    resends it); she comes back and speaks under the old key: she is told, from what their databases kept."""

    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("told")
        admin = Identity.generate()
        bob_id = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin, use_store=False)
        b = await member("bob", key, tmp_path, url, admin, use_store=False, identity=bob_id)
        m = await member("mallory", key, tmp_path, url, admin, use_store=False)
        told = []
        m.add_listener(
            lambda e: told.append(e) if isinstance(e, ev.MembershipChanged) and e.what == "removed" else None
        )
        try:
            await all_joined([a, b, m])
            m.set_impairment(offline=True)
            await a.kick("mallory")
            await wait_for(lambda: b.membership.current.number == 1, what="epoch 1")
            await b.send_text("bob after")
            await wait_for(lambda: not a.channel.outgoing_ids, 20, "the epoch message acknowledged")
            await stop_all([a, b])
            a = await member("alice", key, tmp_path, url, admin, use_store=False)
            b = await member("bob", key, tmp_path, url, admin, use_store=False, identity=bob_id)
            await a.send_text("after")
            assert not m.removed_me
            m.set_impairment(offline=False)
            await m.send_text("am I still here?")
            await wait_for(lambda: m.removed_me, 15, "mallory told she was removed")
            assert told and told[0].by == a.participant_id
            with pytest.raises(UserError, match="removed"):
                await m.send_text("again")
            assert "am I still here?" not in _texts(a) | _texts(b)
        finally:
            await stop_all([a, b, m])
        counts = json.loads(_kv(tmp_path / "mallory.db", MEMBERSHIP_KEY))
        assert counts["removed"][m.participant_id] == 1

    run(main(), 90)
