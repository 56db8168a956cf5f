"""Payload kinds from a newer sdschat: read, ordered and shown as their fallback line, never a hole in the log; a
kind that is not well-formed stays refused."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from node_helpers import log_of, run, settle, start

from sdschat.crypto import ChannelKey
from sdschat.export import export
from sdschat.node import AppPayload, Node, PayloadError
from sdschat.node import events as ev

pytestmark = pytest.mark.timeout(60)

FALLBACK = 'set the topic to "release Friday"'


def of_kind(node: Node, kind: str, text: str) -> AppPayload:
    """A payload of ``kind`` (any string) as ``node`` would write it: built as a chat line, then given the kind."""
    app = AppPayload.new("msg", node.nick, text, node.now(), epoch=node.roster.membership.current.number)
    return dataclasses.replace(app, kind=kind)


def test_a_well_formed_unknown_kind_decodes_and_a_malformed_one_does_not():
    app = dataclasses.replace(AppPayload.new("msg", "alice", FALLBACK, 1, reply_to="ab" * 32), kind="future")
    back = AppPayload.decode(app.encode())
    assert (back.kind, back.text, back.known, back.reply_to, back.data) == ("future", FALLBACK, False, "", None)
    assert AppPayload.decode(dataclasses.replace(app, kind="msg").encode()).known
    for kind in ("Bad-Kind!", "a" * 40, "", "tôpic", "kind2"):
        with pytest.raises(PayloadError):
            AppPayload.decode(dataclasses.replace(app, kind=kind).encode())
    assert AppPayload.decode(dataclasses.replace(app, kind="a" * 16).encode()).kind == "a" * 16


def test_a_newer_kind_is_delivered_in_order_and_shown_as_its_fallback_line(node_amqtt, tmp_path):
    async def main():
        key = ChannelKey.generate("kinds")
        a = await start("alice", key, tmp_path, node_amqtt.url)
        b = await start("bob", key, tmp_path, node_amqtt.url)
        seen: list[ev.NodeEvent] = []
        b.add_listener(seen.append)
        try:
            sent = [await a.send_text("before")]
            sent.append(await a.send_payload(of_kind(a, "future", FALLBACK)))
            sent += [await a.send_text(f"after {i}") for i in range(3)]
            await settle([a, b], 5)
            assert log_of(b) == log_of(a) == sent  # in order, nothing waits on the newer one
            assert not [e for e in seen if isinstance(e, ev.GapOpened | ev.MessageLost | ev.FrameRejected)]
            assert b.counters["rejected"] == 0
            shown = [e.message for e in seen if isinstance(e, ev.MessageShown)]
            assert [m.message_id for m in shown] == sent and all(m.state != ev.WAITING for m in shown)
            future = shown[1]
            assert (future.kind, future.text, future.newer) == ("future", FALLBACK, True)
            assert future.line == f"* alice (newer sdschat): {FALLBACK}"
            assert not shown[0].newer and shown[0].line == "<alice> before"
            # stored: read back as it was shown, found by its text
            assert [m.text for m in await b.history()] == ["before", FALLBACK, "after 0", "after 1", "after 2"]
            assert [h.message.message_id for h in await b.search("Friday")] == [sent[1]]
        finally:
            await a.stop()
            await b.stop()
        out = tmp_path / "bob.jsonl"
        await export(tmp_path / "bob.db", out=out)
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(r["kind"], r["text"]) for r in rows][:2] == [("msg", "before"), ("future", FALLBACK)]

    run(main())


def test_a_malformed_kind_is_still_refused_and_counted(node_amqtt, tmp_path):
    async def main():
        key = ChannelKey.generate("badkinds")
        a = await start("alice", key, tmp_path, node_amqtt.url)
        b = await start("bob", key, tmp_path, node_amqtt.url)
        rejected: list[str] = []
        b.add_listener(lambda e: rejected.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
        try:
            await a.send_text("hello")
            await settle([a, b], 1)
            bad = [await a.send_payload(of_kind(a, kind, "nope")) for kind in ("Bad-Kind!", "a" * 40)]
            for _ in range(250):
                if len(rejected) >= 2:
                    break
                await asyncio.sleep(0.02)
            assert rejected[:2] == ["bad_payload", "bad_payload"]
            assert b.counters["rejected"] >= 2
            assert not set(bad) & set(log_of(b)) and not set(bad) & {m.message_id for m in b.messages()}
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_topic_is_set_by_an_admin_only_latest_in_log_order_and_survives_a_restart(node_amqtt, tmp_path):
    from membership_helpers import member, stop_all, trio, wait_for

    from sdschat.node import NotAllowed

    async def main():
        key, admin, (alice, bob, mallory) = await trio("topics", tmp_path, node_amqtt.url)
        try:
            first = await alice.set_topic("  release\tFriday  ")
            await wait_for(lambda: bob.topic is not None and bob.topic.message_id == first, what="bob's topic")
            assert (bob.topic.text, bob.topic.nick, bob.topic.sender_id) == (
                "release Friday",
                "alice",
                alice.participant_id,
            )
            line = next(m for m in bob.messages() if m.message_id == first)
            assert (line.kind, line.line) == ("topic", "* alice set the topic: release Friday")
            with pytest.raises(NotAllowed):
                await mallory.set_topic("mine now")
            # a non-admin's topic message, built directly: in the log, shown as ignored, the topic unchanged
            forged = await mallory.send_payload(of_kind(mallory, "topic", "mine now"))
            await wait_for(lambda: forged in log_of(bob) and forged in log_of(alice), what="the forged topic")
            assert bob.topic.message_id == first and alice.topic.message_id == first
            assert next(m for m in bob.messages() if m.message_id == forged).text.startswith("tried to set the topic")
            # an older admitted topic arriving late (a repair) changes nothing
            older = of_kind(alice, "topic", "stale")
            assert bob.book.topic_seen("0" * 64, alice.participant_id, older, 0) == {}
            assert bob.topic.text == "release Friday"
            cleared = await alice.set_topic("")
            await wait_for(lambda: bob.topic.message_id == cleared, what="the cleared topic")
            assert bob.topic.text == "" and [m.text for m in bob.messages()][-1] == "cleared the topic"
            again = await alice.set_topic("x" * 300)
            await wait_for(lambda: bob.topic.message_id == again, what="the long topic")
            assert bob.topic.text == "x" * 200
        finally:
            await stop_all([alice, bob, mallory])
        bob = await member("bob", key, tmp_path, node_amqtt.url, admin, identity=bob.identity)
        try:
            assert bob.topic is not None and (bob.topic.message_id, bob.topic.text) == (again, "x" * 200)
        finally:
            await bob.stop()

    run(main())


def test_the_other_members_channels_command_shows_the_topic(node_amqtt, tmp_path):
    import subprocess
    import sys

    from membership_helpers import wait_for

    from sdschat.crypto import Identity
    from sdschat.node import NodeConfig, node_channel_config
    from sdschat.profile import Profile, resolve_paths

    home = tmp_path / "bob"
    profile = Profile.create(resolve_paths(home), "bob", node_amqtt.url)
    admin = Identity.generate()
    entry = profile.add_channel("team", b"t" * 32, admins=[admin.participant_id])
    key = profile.key(entry)

    def config(nick: str, db, identity: Identity) -> NodeConfig:
        fast = node_channel_config(repair_t_min_ms=300, repair_t_max_ms=1_500, sync_interval_ms=2_000)
        return NodeConfig(
            nick,
            key,
            db,
            node_amqtt.url,
            channel_config=fast,
            identity=identity,
            membership=True,
            admins=(admin.participant_id,),
        )

    def channels(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "sdschat", "channels", *args, "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "topic" not in json.loads(channels("--json")) and "TOPIC" not in channels()  # none: as before topics

    async def main():
        alice = await Node.start(config("alice", tmp_path / "alice.db", admin))
        bob = await Node.start(config("bob", profile.db_path(entry), profile.identity()))
        try:
            mid = await alice.set_topic("release Friday")
            await wait_for(lambda: bob.topic is not None and bob.topic.message_id == mid, what="bob's topic")
        finally:
            await alice.stop()
            await bob.stop()

    run(main())
    assert json.loads(channels("--json"))["topic"] == "release Friday"
    table = channels().splitlines()
    assert table[0].split()[-1] == "TOPIC" and table[1].endswith("  release Friday")
