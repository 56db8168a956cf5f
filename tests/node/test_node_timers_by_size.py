"""A node's SDS-R timers follow its channel's size (docs/sds-at-scale.md, "Recommendations"): the tiers, which
configurations follow them, and real nodes whose member count crosses 100 as a member joins, leaves or is removed,
and at start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from node_helpers import FAST, run
from run_until import until

from sdschat.crypto import ChannelKey, Identity
from sdschat.crypto.epochs import exchange_public
from sdschat.node import MEMBERSHIP_KEY, Node, NodeConfig
from sdschat.node.config import BLOOM_CAPACITY, NODE_REPAIR, node_channel_config, repair_for_members
from sdschat.node.membership import Membership
from sdschat.sds import RepairConfig
from sdschat.store import Store

pytestmark = pytest.mark.timeout(120)

#: the test helpers' quick resends and syncs, with the node's own (default) repair timers
QUICK = {k: v for k, v in FAST.items() if not k.startswith("repair_")}


def timers(repair: RepairConfig) -> tuple[int, int, int]:
    return repair.t_min_ms, repair.t_max_ms, repair.response_groups


# ----------------------------------------------------------------- the tiers


@pytest.mark.parametrize(
    "members,want",
    [
        (0, (2_000, 10_000, 1)),
        (1, (2_000, 10_000, 1)),
        (99, (2_000, 10_000, 1)),
        (100, (5_000, 120_000, 1)),
        (127, (5_000, 120_000, 1)),
        (128, (5_000, 120_000, 2)),
        (999, (5_000, 120_000, 8)),
        (1_000, (5_000, 60_000, 8)),
        (10_000, (5_000, 60_000, 79)),
        (100_000, (5_000, 60_000, 782)),
    ],
)
def test_the_tiers_are_the_studys(members, want):
    got = repair_for_members(members)
    assert timers(got) == want
    assert got.t_min_growth == 1.0 and got.enabled  # growth and the rest stay the node's


def test_a_small_channel_keeps_the_nodes_default_and_the_filter_stays_128_ids():
    assert repair_for_members(5) == node_channel_config().repair == NODE_REPAIR
    assert node_channel_config().bloom_capacity == BLOOM_CAPACITY == 128


def test_only_a_node_on_the_default_repair_settings_follows_the_size(tmp_path):
    key = ChannelKey.generate("cfg")

    def config(**kw) -> NodeConfig:
        return NodeConfig("alice", key, tmp_path / "a.db", **kw)

    assert config().follows_size
    assert config(channel_config=node_channel_config(**QUICK)).follows_size  # other settings given: still
    assert not config(channel_config=node_channel_config(repair_t_min_ms=300)).follows_size
    assert not config(channel_config=node_channel_config(repair_t_max_ms=60_000)).follows_size
    assert not config(repair_by_size=False).follows_size


# ---------------------------------------------------------------- real nodes


async def seeded(
    folder: Path, name: str, key: ChannelKey, url: str, others: int, *, real_keys: bool = False, **cfg
) -> Node:
    """A node whose database already holds a channel of ``others`` members besides itself (it admin, joined): the
    membership a node keeps, without that many nodes running."""
    me = Identity.generate()
    m = Membership(me.participant_id, key, (me.participant_id,))
    m.apply_join(me.participant_id, exchange_public(me))
    for _ in range(others):
        m.apply_join(os.urandom(16).hex(), exchange_public(Identity.generate()) if real_keys else os.urandom(32))
    db = folder / f"{name}.db"
    async with await Store.open(db) as store:
        await store.kv_set(MEMBERSHIP_KEY, m.to_json())
    config = NodeConfig(
        name,
        key,
        db,
        url,
        identity=me,
        membership=True,
        admins=(me.participant_id,),
        **{"channel_config": node_channel_config(**QUICK), **cfg},
    )
    return await Node.start(config)


def engine_timers(node: Node) -> tuple[int, int, int]:
    assert node.channel is not None
    return timers(node.channel.config.repair)


SMALL, HUNDRED, THOUSAND = (2_000, 10_000, 1), (5_000, 120_000, 1), (5_000, 60_000, 8)


def test_a_node_follows_its_channel_past_100_members_as_one_joins_and_back_as_it_leaves(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("hundred")
        a = await seeded(tmp_path, "alice", key, node_mosquitto.url, 98)
        b = None
        try:
            assert a.roster.member_count == 99
            assert engine_timers(a) == SMALL
            b = await Node.start(
                NodeConfig(
                    "bob",
                    key,
                    tmp_path / "bob.db",
                    node_mosquitto.url,
                    channel_config=node_channel_config(**QUICK),
                    membership=True,
                    admins=a.config.admins,
                )
            )
            await a.send_text("anyone?")  # bob hears a member: he joins
            await until(lambda: b.participant_id in a.membership.members, 20, "bob's join")
            assert a.roster.member_count == 100
            assert engine_timers(a) == HUNDRED
            assert engine_timers(b) == SMALL  # bob knows of two members
            assert await b.leave()
            await until(lambda: b.participant_id not in a.membership.members, 20, "bob's leave")
            assert a.roster.member_count == 99
            assert engine_timers(a) == SMALL
        finally:
            if b is not None:
                await b.stop()
            await a.stop()

    run(main(), 110)


def test_a_kick_takes_the_channel_back_under_100_and_the_timers_with_it(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("kick")
        a = await seeded(tmp_path, "alice", key, node_mosquitto.url, 99, real_keys=True)
        try:
            assert a.roster.member_count == 100
            assert engine_timers(a) == HUNDRED
            victim = next(iter(a.membership.others()))
            await a.kick(victim)
            assert victim in a.membership.removed
            assert a.roster.member_count == 99
            assert engine_timers(a) == SMALL
        finally:
            await a.stop()

    run(main(), 110)


def test_at_start_a_large_channel_gets_its_tier_and_explicit_timers_are_kept(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("large")
        url = node_mosquitto.url
        big = await seeded(tmp_path, "big", key, url, 999)
        pinned = await seeded(tmp_path, "pinned", key, url, 999, repair_by_size=False)
        explicit = await seeded(tmp_path, "explicit", key, url, 999, channel_config=node_channel_config(**FAST))
        try:
            assert big.roster.member_count == 1_000
            assert engine_timers(big) == THOUSAND
            assert engine_timers(pinned) == SMALL
            assert engine_timers(explicit) == (FAST["repair_t_min_ms"], FAST["repair_t_max_ms"], 1)
        finally:
            for n in (big, pinned, explicit):
                await n.stop()

    run(main(), 110)
