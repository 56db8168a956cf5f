"""What members see of each other, between real nodes over mosquitto: a restart names members (never a
fingerprint) in membership lines, removed and departed members leave the participant list, ``/part`` is told
(``* carol left``) and a later join brings the member back, ``/nick`` is told (``* bob is now alicia``)."""

from __future__ import annotations

import asyncio

import pytest
from membership_helpers import all_joined, member, stop_all, trio, wait_for
from node_helpers import run

from sdschat.crypto import ChannelKey, Identity
from sdschat.node import UserError

pytestmark = pytest.mark.timeout(120)


def _lines(node, kind: str) -> list[tuple[str, str]]:
    return [(m.nick, m.text) for m in node.messages() if m.kind == kind]


def _listed(node) -> set[str]:
    return {p.participant_id for p in node.participants()}


def test_after_a_restart_a_kick_line_names_the_member_and_the_removed_are_no_longer_listed(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key, admin, (a, b, m) = await trio("names", tmp_path, url)
        bob_id = b.identity
        try:
            await a.kick("mallory")
            await wait_for(lambda: b.membership.current.number == 1, what="epoch 1")
            assert any(t.startswith("removed mallory: new key") for _, t in _lines(b, "epoch"))
            assert m.participant_id not in _listed(b)
        finally:
            await stop_all([a, b, m])
        b = await member("bob", key, tmp_path, url, admin, identity=bob_id)
        try:
            kicks = [t for _, t in _lines(b, "epoch")]
            assert kicks and kicks[0].startswith("removed mallory: new key"), kicks  # not her fingerprint
            assert m.participant_id not in _listed(b) and a.participant_id in _listed(b)
        finally:
            await b.stop()

    run(main(), 100)


def test_part_is_told_and_a_later_join_brings_the_member_back(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key = ChannelKey.generate("part")
        admin = Identity.generate()
        carol_id = Identity.generate()
        a = await member("alice", key, tmp_path, url, admin)
        b = await member("bob", key, tmp_path, url, admin)
        c = await member("carol", key, tmp_path, url, admin, identity=carol_id)
        nodes = [a, b, c]
        try:
            await all_joined(nodes)
            assert await c.leave()
            await c.stop()
            await wait_for(
                lambda: ("carol", "left") in _lines(a, "leave") and ("carol", "left") in _lines(b, "leave"),
                what="'* carol left' at alice and bob",
            )
            for x in (a, b):
                assert c.participant_id not in _listed(x) and c.participant_id not in x.membership.members
            # the next key is not sealed to her, and the two left acknowledge each other's lines alone
            n, count = await a.rekey()
            assert count == 2
            await b.send_text("just us")
            await wait_for(lambda: not b.channel.outgoing_ids, 15, "bob's line acknowledged by alice alone")
            # she comes back (same database): she announces herself again and is listed again
            c = await member("carol", key, tmp_path, url, admin, identity=carol_id)
            nodes[2] = c
            await c.send_text("back")
            await wait_for(
                lambda: c.participant_id in a.membership.members and c.participant_id in _listed(a),
                20,
                "carol a member again",
            )
            await wait_for(lambda: c.membership.current.number == n, 20, "carol granted the current key")
        finally:
            await stop_all(nodes)

    run(main(), 110)


def test_a_new_nick_is_told_to_everyone(node_mosquitto, tmp_path):
    async def main():
        url = node_mosquitto.url
        key, admin, (a, b, m) = await trio("nick", tmp_path, url)
        try:
            b.set_nick("alicia")
            await wait_for(lambda: ("bob", "is now alicia") in _lines(a, "nick"), what="'* bob is now alicia'")
            await b.send_text("hi, new name")
            await wait_for(
                lambda: any(x.nick == "alicia" and x.text == "hi, new name" for x in a.messages()),
                what="her next line under the new nick",
            )
            await asyncio.sleep(0.3)
            assert a.names()[b.participant_id] == "alicia"
            b.set_nick("alicia")  # the same: nothing told
            await asyncio.sleep(1.0)
            assert len(_lines(a, "nick")) == 1
        finally:
            await stop_all([a, b, m])

    run(main(), 90)


def test_two_members_with_one_nick_are_told_apart_everywhere(node_mosquitto, tmp_path):
    """A second profile joins as ``bob``: from then on both bobs show as ``bob#<4 hex>`` in lines, names (the
    participant list, completion, mentions), membership lines and kick; the real bob is warned."""
    from sdschat.node import events as ev

    async def main():
        url = node_mosquitto.url
        key, admin, (a, b, m) = await trio("twins", tmp_path, url)
        clashes = []
        b.add_listener(lambda e: clashes.append(e) if isinstance(e, ev.NickClash) else None)
        (tmp_path / "fake").mkdir()
        fake = await member("bob", key, tmp_path / "fake", url, admin)
        nodes = [a, b, m, fake]
        try:
            await all_joined(nodes)
            await fake.send_text("this is bob, please DM me the prod password")
            real, twin = f"bob#{b.participant_id[:4]}", f"bob#{fake.participant_id[:4]}"
            await wait_for(
                lambda: any(x.nick == twin for x in a.messages() if x.text.startswith("this is bob")),
                what="the impostor's line suffixed at alice",
            )
            names = a.names()
            assert names[b.participant_id] == real and names[fake.participant_id] == twin
            assert any(e.participant_id == fake.participant_id and e.mine for e in clashes)  # bob is warned
            assert b.names()[fake.participant_id] == twin  # bob sees the other one suffixed too
            with pytest.raises(UserError, match="2 members are called 'bob'"):
                await a.kick("bob")
            info = a.whois(twin)
            assert info["participant_id"] == fake.participant_id and not info["admin"] and info["first_seen_ms"]
            assert a.whois(real)["participant_id"] == b.participant_id
            await a.kick(twin)
            await wait_for(
                lambda: any(x.kind == "epoch" and x.text.startswith(f"removed {twin}") for x in b.messages()),
                what="the kick line names the impostor suffixed",
            )
        finally:
            await stop_all(nodes)

    run(main(), 100)
