"""``sdschat bot --hostile MOVE`` (sdschat.node.hostile): each attack played by a real member against real
honest nodes over mosquitto, and what the honest members see: the forgeries refused and counted, logs
identical, resending going on; for the limitations, the loss and the flood happening."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter

import pytest
from brokers import Mosquitto, mosquitto_binary
from node_helpers import FAST, log_of, settle
from run_until import until as wait_for

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.node import events as ev
from sdschat.node.hostile import HostileMember, hostile_channel_config

pytestmark = pytest.mark.timeout(120)
SDSCHAT = [sys.executable, "-m", "sdschat"]


@pytest.fixture(scope="module")
def mosq(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("rel-hostile-mosquitto"))
    broker.start()
    yield broker
    broker.close()


async def member(name, key, folder, url, *, move=None, impairment=None, seed=0, **cfg) -> Node:
    channel = node_channel_config(**{**FAST, **cfg})
    if move:
        channel = hostile_channel_config(move, channel)
    return await Node.start(
        NodeConfig(
            name, key, folder / f"{name}.db", url, channel_config=channel, impairment=impairment or {}, seed=seed
        )
    )


def rejections(node: Node) -> Counter:
    seen: Counter = Counter()
    node.add_listener(lambda e: seen.update([e.reason]) if isinstance(e, ev.FrameRejected) else None)
    return seen


class Playing:
    """A hostile member's move running in the background while the test goes on."""

    def __init__(self, hostile: HostileMember) -> None:
        self.hostile, self.stop = hostile, asyncio.Event()

    async def __aenter__(self):
        self.task = asyncio.create_task(self.hostile.run(self.stop))
        await asyncio.sleep(0.3)  # its own connection subscribes
        return self.hostile

    async def __aexit__(self, *exc):
        self.stop.set()
        await self.task


def test_forge_acks_every_forgery_is_refused_and_the_sender_keeps_resending(mosq, tmp_path):
    key = ChannelKey.generate("hostile-acks")

    async def main():
        a = await member("alice", key, tmp_path, mosq.url)
        b = await member("bob", key, tmp_path, mosq.url)
        m = await member("mallory", key, tmp_path, mosq.url, move="forge-acks")
        refused = rejections(b)
        acked = []
        b.add_listener(
            lambda e: (
                acked.append(e.message_id) if isinstance(e, ev.AckStateChanged) and e.state == ev.ACKNOWLEDGED else None
            )
        )
        try:
            async with Playing(HostileMember(m, "forge-acks")) as hostile:
                await a.send_text("alice is here")  # mallory learns who the members are
                await b.send_text("bob is here")
                await settle([a, b], 2)
                a.set_impairment(offline=True)  # alice hears nothing and says nothing from now on
                mid = await b.send_text("did alice get this?")
                await wait_for(lambda: hostile.published["forged_history_relay"] >= 1 and sum(refused.values()) >= 3)
                resends = b.channel.stats["resends"]
                await wait_for(lambda: b.channel.stats["resends"] > resends)
                return dict(refused), dict(hostile.published), mid, acked, b.channel.outgoing_ids, list(log_of(a))
        finally:
            for n in (a, b, m):
                await n.stop()

    refused, published, mid, acked, outgoing, alice_log = asyncio.run(main())
    assert published["forged_sync"] >= 1 and published["forged_sync_as_repair"] >= 1
    assert refused.get("impersonation", 0) >= 2 and refused.get("bad_signature", 0) >= 1
    assert set(refused) <= {"impersonation", "bad_signature"}
    assert mid not in alice_log and mid not in acked and mid in outgoing  # bob still resends it


def test_reorder_every_relayed_copy_is_refused_and_logs_stay_identical(mosq, tmp_path):
    key = ChannelKey.generate("hostile-reorder")

    async def main():
        a = await member("alice", key, tmp_path, mosq.url)
        b = await member("bob", key, tmp_path, mosq.url, impairment={"loss_in": 0.3}, seed=3)
        m = await member("mallory", key, tmp_path, mosq.url, move="reorder")
        refused = rejections(b)
        try:
            async with Playing(HostileMember(m, "reorder")) as hostile:
                for i in range(6):
                    await (a if i % 2 else b).send_text(f"line {i}")
                    await asyncio.sleep(0.05)
                await settle([a, b], 6)
                await wait_for(lambda: sum(refused.values()) >= 9)
                return dict(refused), dict(hostile.published), list(log_of(a)), list(log_of(b))
        finally:
            for n in (a, b, m):
                await n.stop()

    refused, published, alice_log, bob_log = asyncio.run(main())
    assert min(published.get(k, 0) for k in ("reordered_ahead", "reordered_no_history", "reordered_added_history")) >= 3
    assert set(refused) == {"bad_signature"}
    assert alice_log == bob_log and len(alice_log) == 6


def test_withhold_the_withheld_messages_are_declared_lost(mosq, tmp_path):
    """Not protected (SECURITY.md): a member can always withhold its own messages; the others learn they exist
    from its later messages' causal history, ask, get no answer, and mark them lost."""
    key = ChannelKey.generate("hostile-withhold")

    async def main():
        a = await member("alice", key, tmp_path, mosq.url, lost_after_ms=2_500)
        b = await member("bob", key, tmp_path, mosq.url, lost_after_ms=2_500)
        m = await member("mallory", key, tmp_path, mosq.url, move="withhold")
        lost = []
        a.add_listener(lambda e: lost.append(e.message_id) if isinstance(e, ev.MessageLost) else None)
        try:
            hostile = HostileMember(m, "withhold", count=4, interval=0.1)
            published = await hostile.run(asyncio.Event())
            await wait_for(lambda: len(lost) == 2, timeout=20)
            texts = [x.text for x in a.messages()]
            withheld = [x.message_id for x in m.messages() if "withheld" in x.text]
            return dict(published), lost, texts, withheld, [x.text for x in b.messages()]
        finally:
            for n in (a, b, m):
                await n.stop()

    published, lost, alice_texts, withheld, bob_texts = asyncio.run(main())
    assert published == {"withheld": 2, "message": 2}
    assert sorted(lost) == sorted(withheld)
    assert alice_texts == bob_texts == ["mallory #1", "mallory #3"]


def test_flood_is_counted_and_real_messages_still_get_through(mosq, tmp_path):
    key = ChannelKey.generate("hostile-flood")

    async def main():
        a = await member("alice", key, tmp_path, mosq.url)
        b = await member("bob", key, tmp_path, mosq.url)
        m = await member("mallory", key, tmp_path, mosq.url, move="flood")
        try:
            async with Playing(HostileMember(m, "flood", rate=400, seed=1)) as hostile:
                await wait_for(lambda: sum(hostile.published.values()) >= 400)
                await a.send_text("still here")
                await settle([a, b], 1)
                published = dict(hostile.published)
            await wait_for(lambda: b.counters["undecryptable"] + b.counters["rejected"] >= sum(published.values()))
            return published, b.counters["undecryptable"], b.counters["rejected"], [x.text for x in b.messages()]
        finally:
            for n in (a, b, m):
                await n.stop()

    published, undecryptable, rejected, texts = asyncio.run(main())
    assert published["garbage"] >= 100 and published["sealed_junk"] >= 100
    assert undecryptable >= published["garbage"] and rejected >= published["sealed_junk"]
    assert texts == ["still here"]


def test_the_cli_bot_plays_a_move_and_says_what_it_published(mosq, tmp_path):
    """``sdschat bot --hostile reorder`` as a process against honest nodes: its relays are refused; SIGTERM stops
    it with a summary and exit 0."""
    key = ChannelKey.generate("hostile-cli")
    key.write_key_file(tmp_path / "team.key")

    async def main():
        a = await member("alice", key, tmp_path, mosq.url)
        b = await member("bob", key, tmp_path, mosq.url)
        refused = rejections(a)
        bot = await asyncio.create_subprocess_exec(
            *SDSCHAT,
            "bot",
            "--hostile",
            "reorder",
            "--name",
            "mallory",
            "--channel",
            "hostile-cli",
            "--key-file",
            str(tmp_path / "team.key"),
            "--db",
            str(tmp_path / "mallory.db"),
            "--broker",
            mosq.url,
            "--max-runtime",
            "60",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        try:
            first = await asyncio.wait_for(bot.stdout.readline(), 30)
            for i in range(20):  # until its connection listens (it says so before it subscribes)
                await b.send_text(f"hello {i}")
                try:
                    await wait_for(lambda: refused["bad_signature"] >= 3, timeout=1.5)
                    break
                except AssertionError:
                    continue
            await settle([a, b], i + 1)
            bot.terminate()
            out, err = await asyncio.wait_for(bot.communicate(), 30)
            return bot.returncode, first.decode() + out.decode(), err.decode(), dict(refused), log_of(a) == log_of(b)
        finally:
            if bot.returncode is None:
                bot.kill()
            await a.stop()
            await b.stop()

    code, out, err, refused, same = asyncio.run(main())
    assert code == 0, err
    assert "hostile member (reorder)" in out and "reordered_ahead" in out.splitlines()[-1]
    assert set(refused) == {"bad_signature"} and refused["bad_signature"] >= 3 and same


def test_a_bad_hostile_move_gets_one_line_and_exit_2():
    from sdschat.cli.args import HOSTILE_MOVES
    from sdschat.node.hostile import MOVES

    assert HOSTILE_MOVES == MOVES
    p = subprocess.run([*SDSCHAT, "bot", "--hostile", "charm"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "charm" in p.stderr
