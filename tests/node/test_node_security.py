"""What reaches a node but must not enter its log: wrong key, tampering, garbage, impersonation."""

from __future__ import annotations

import asyncio

import pytest
from node_helpers import log_of, run, settle, start

from sdschat.crypto import ChannelKey, Identity
from sdschat.node import AppPayload, signer
from sdschat.node import events as ev
from sdschat.node.frame import pack
from sdschat.sds import MessageChannel
from sdschat.transport import MqttTransport

pytestmark = pytest.mark.timeout(60)


async def _wait(predicate, timeout=5.0):
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def _raw(url: str) -> MqttTransport:
    t = MqttTransport(url, suppress_echoes=False)
    await t.start()
    return t


def test_wrong_key_participant_sees_nothing_and_counts_rejections(broker, tmp_path):
    async def main():
        key = ChannelKey.generate("secret")
        other = ChannelKey.generate("secret")  # same channel name, another key
        a = await start("a", key, tmp_path, broker.url)
        b = await start("b", key, tmp_path, broker.url)
        eve = await start("eve", other, tmp_path, broker.url)
        rejected = []
        b.add_listener(lambda e: rejected.append(e) if isinstance(e, ev.FrameRejected) else None)
        raw = await _raw(broker.url)
        try:
            assert other.topic != key.topic  # the topic itself is derived from the key
            await a.send_text("for members only")
            await settle([a, b], 1)
            assert eve.messages() == [] and log_of(eve) == []
            # eve's frames, even published on the members' topic, are counted and dropped
            await eve.send_text("let me in")
            stolen = other.seal(pack(eve.identity, other.channel_binding, b"\x0a\x01x"))
            await raw.publish(key.topic, stolen)
            await _wait(lambda: b.counters["undecryptable"] >= 1)
            await _wait(lambda: rejected)  # told within a second, with how many
            assert [(r.reason, r.detail) for r in rejected] == [
                ("undecryptable", "1 frame(s) that do not open with the channel key")
            ]
            assert len(log_of(b)) == 1
        finally:
            await raw.stop()
            for n in (a, b, eve):
                await n.stop()

    run(main())


def test_tampered_and_garbage_frames_are_rejected_and_counted(broker, tmp_path):
    async def main():
        key = ChannelKey.generate("tamper")
        a = await start("a", key, tmp_path, broker.url)
        b = await start("b", key, tmp_path, broker.url)
        raw = await _raw(broker.url)
        captured: list[bytes] = []
        raw.set_message_handler(lambda topic, payload: captured.append(payload))
        await raw.subscribe(key.topic)
        try:
            await asyncio.sleep(0.1)
            await a.send_text("original")
            await settle([a, b], 1)
            envelope = captured[0]
            before = b.counters["undecryptable"]
            for i in (0, 5, len(envelope) // 2, len(envelope) - 1):
                bad = bytearray(envelope)
                bad[i] ^= 0x01
                await raw.publish(key.topic, bytes(bad))
            await raw.publish(key.topic, envelope[:-3])  # truncated
            await raw.publish(key.topic, b"")  # empty
            await raw.publish(key.topic, b"\x00garbage" * 10)
            await _wait(lambda: b.counters["undecryptable"] - before >= 7)
            assert b.counters["undecryptable"] - before == 7
            assert len(log_of(b)) == 1 and [m.text for m in b.messages()] == ["original"]
            assert b.store is not None and await b.store.message_count() == 1
        finally:
            await raw.stop()
            await a.stop()
            await b.stop()

    run(main())


def test_member_signing_as_another_member_is_rejected(tmp_path, node_mosquitto):
    async def main():
        key = ChannelKey.generate("impostor")
        a = await start("a", key, tmp_path, node_mosquitto.url)
        b = await start("b", key, tmp_path, node_mosquitto.url)
        raw = await _raw(node_mosquitto.url)
        try:
            await a.send_text("hello")
            await settle([a, b], 1)
            mallory = Identity.generate()  # a member: has the channel key, not a's signing key
            forged = MessageChannel(key.channel_id, a.participant_id)  # claims to be a
            body = AppPayload.new("msg", "a", "send me your password", 1).encode()
            out = forged.send(body, 10**13 // 10, sign=signer(mallory, key.channel_binding))
            await raw.publish(key.topic, key.seal(pack(mallory, key.channel_binding, out.data)))
            await _wait(lambda: b.counters["impersonation"] == 1)
            assert [m.text for m in b.messages()] == ["hello"]
            assert len(log_of(b)) == 1
        finally:
            await raw.stop()
            await a.stop()
            await b.stop()

    run(main())
