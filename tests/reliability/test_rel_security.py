"""SECURITY.md, claim by claim: what is protected, and what is not (each limitation demonstrated).

Real nodes on a real mosquitto; a raw MQTT client subscribed to '#' plays the broker's view.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import random
import sqlite3
import stat
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest
from brokers import Mosquitto, mosquitto_binary
from node_helpers import FAST, log_of, missed_by, settle, shown_ids, start
from run_until import until as wait_for

from sdschat.crypto import MIN_ENVELOPE_SIZE, ChannelKey, EnvelopeError, Identity, padded_size, signed_content
from sdschat.crypto.keys import _hkdf
from sdschat.node import AppPayload, Node, NodeConfig, UserError, node_channel_config, signer
from sdschat.node import events as ev
from sdschat.node.frame import pack, unpack
from sdschat.sds import MessageChannel, wire
from sdschat.transport import MqttTransport

pytestmark = pytest.mark.timeout(90)

SDSCHAT = [sys.executable, "-m", "sdschat"]


@pytest.fixture(scope="module")
def mosq(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("rel-sec-mosquitto"))
    broker.start()
    yield broker
    broker.close()


class Clock:
    """A node clock that can jump ahead (minutes of virtual time)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


async def node(name, key, folder: Path, url, *, clock=None, seed=0, impairment=None) -> Node:
    cfg = NodeConfig(
        name,
        key,
        folder / f"{name}.db",
        url,
        channel_config=node_channel_config(**FAST),
        impairment=impairment or {},
        seed=seed,
        clock=clock or time.time,
    )
    return await Node.start(cfg)


class Tap:
    """A raw MQTT client subscribed to '#': everything the broker relays, as (topic, payload)."""

    def __init__(self, url: str) -> None:
        self.t = MqttTransport(url, suppress_echoes=False)
        self.frames: list[tuple[str, bytes]] = []

    async def __aenter__(self) -> Tap:
        await self.t.start()
        self.t.set_message_handler(lambda topic, payload: self.frames.append((topic, bytes(payload))))
        await self.t.subscribe("#")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.t.stop()

    async def publish(self, topic: str, payload: bytes) -> None:
        assert await self.t.publish(topic, payload)

    def on(self, topic: str) -> list[bytes]:
        return [p for t, p in self.frames if t == topic]


def sds_of(key: ChannelKey, envelope: bytes):
    publisher, reason, frame = unpack(key.open(envelope), key.channel_binding)
    return publisher, reason, wire.decode(frame)


# ----------------------------------------------------------- confidentiality against the broker


def test_broker_sees_no_plaintext_no_channel_name_no_key_material(mosq, tmp_path):
    name = "zebra-crossing-4711"
    key = ChannelKey.generate(name)
    secret = key._secret  # the channel secret, as in the key file
    texts = [f"PLAINTEXT-MARKER-{i} attack at dawn ✓" for i in range(6)]

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("alice-NICKA7", key, tmp_path, mosq.url, seed=1, impairment={"loss_in": 0.3})
            b = await node("bob-NICKB8", key, tmp_path, mosq.url, seed=2, impairment={"loss_out": 0.3})
            try:
                mids = []
                for i, text in enumerate(texts):  # the last one a reply: its parent's id rides inside
                    mids.append(await (a if i % 2 else b).send_text(text, reply_to=mids[0] if i == 5 else None))
                await a.send_typing()
                await settle([a, b], len(texts))
                assert [m.reply_to for m in b.messages() if m.text == texts[5]] == [mids[0]]
                ids = [a.identity, b.identity]
                pids = [a.participant_id, b.participant_id]
            finally:
                await a.stop()
                await b.stop()
            await asyncio.sleep(0.2)
            return tap.frames, ids, pids, mids

    frames, identities, pids, mids = asyncio.run(main())
    assert len(frames) >= len(texts) + 2, "the tap saw the traffic"
    seen = b"\n".join(t.encode() + b"\x00" + p for t, p in frames)
    secrets = {
        "channel name": name.encode(),
        "channel secret": secret,
        "secret (base64)": base64.b64encode(secret),
        "secret (hex)": secret.hex().encode(),
        "AEAD key": _hkdf(secret, b"aead", name.encode(), 32),
        "channel binding": key.channel_binding,
        "SDS channel id": key.channel_id.encode(),
        **{f"nick {n}": n.encode() for n in ("alice-NICKA7", "bob-NICKB8", "NICKA7", "NICKB8")},
        **{f"text {i}": t.encode() for i, t in enumerate(texts)},
        "marker": b"PLAINTEXT-MARKER",
        "attack at dawn": b"attack at dawn",
        **{f"identity key {i}": ident.private_bytes() for i, ident in enumerate(identities)},
        **{f"public key {i}": ident.public_bytes() for i, ident in enumerate(identities)},
        **{f"participant id {i}": pid.encode() for i, pid in enumerate(pids)},
        **{f"message id {i}": mid.encode() for i, mid in enumerate(mids)},
        **{f"message id {i} (raw)": bytes.fromhex(mid) for i, mid in enumerate(mids)},
    }
    leaked = [what for what, needle in secrets.items() if needle in seen]
    assert leaked == [], f"the broker saw: {leaked}"
    # channel frames go to one opaque topic derived from the key; nothing else names the channel
    chan = [t for t, _ in frames if t.startswith("sdschat/")]
    assert set(chan) == {key.topic} and len(key.topic) == len("sdschat/") + 32


# ----------------------------------------------------------------------- integrity


def _capture_one_message(mosq, tmp_path, key) -> tuple[bytes, bytes]:
    """A real message envelope (bloom filter included) and a real resend envelope."""

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("a", key, tmp_path, mosq.url)
            # a member that hears nothing: a resends to it (a member alone holds its resends)
            deaf = await node("deaf", key, tmp_path, mosq.url, impairment={"loss_in": 1.0})
            try:
                await wait_for(lambda: a.presences.others_here(a.now()) == [deaf.participant_id])
                await a.send_text("flip me")  # nobody acknowledges: it is resent
                await wait_for(lambda: any(sds_of(key, p)[1] == "resend" for p in tap.on(key.topic)))
            finally:
                await a.stop()
                await deaf.stop()
            by = {}
            for p in tap.on(key.topic):
                by.setdefault(sds_of(key, p)[1], p)
            return by["message"], by["resend"]

    return asyncio.run(main())


def test_a_flipped_bit_anywhere_in_a_frame_is_rejected(mosq, tmp_path):
    key = ChannelKey.generate("bits")
    message, resend = _capture_one_message(mosq, tmp_path, key)
    assert len(message) >= 1_024
    # every bit of a real message envelope: the AEAD refuses each
    buf = bytearray(message)
    accepted = 0
    for i in range(len(buf) * 8):
        buf[i // 8] ^= 1 << (i % 8)
        try:
            key.open(bytes(buf))
            accepted += 1
        except EnvelopeError:
            pass
        buf[i // 8] ^= 1 << (i % 8)
    assert accepted == 0
    assert key.open(bytes(buf))  # and the unflipped frame still opens

    # every bit of a real (resend) envelope through a running node: counted as undecryptable, nothing delivered
    async def main():
        b = await node("b", key, tmp_path, mosq.url)
        try:
            before = b.counters["undecryptable"]
            shown = []
            b.add_listener(lambda e: shown.append(e) if isinstance(e, ev.MessageShown) else None)
            flips = bytearray(resend)
            for i in range(len(flips) * 8):
                flips[i // 8] ^= 1 << (i % 8)
                b._on_frame(key.topic, bytes(flips))
                flips[i // 8] ^= 1 << (i % 8)
            await b.writer.flush()
            n = b.counters["undecryptable"] - before
            b._on_frame(key.topic, resend)  # the genuine frame is accepted
            return n, shown, b.failure
        finally:
            await b.stop()

    rejected, shown, failure = asyncio.run(main())
    assert rejected == len(resend) * 8
    assert [e.message.text for e in shown] == ["flip me"] and failure is None


def test_a_frame_replayed_later_is_not_delivered_twice(mosq, tmp_path):
    """Captured envelopes republished 10 minutes (virtual) later, and again after the receiver restarted."""
    key = ChannelKey.generate("replay")
    clock = Clock()

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("a", key, tmp_path, mosq.url)
            try:
                return await replays(tap, a)
            finally:
                await a.stop()  # whatever failed: a left running would keep the test process from exiting

    async def replays(tap, a):
        b = await node("b", key, tmp_path, mosq.url, clock=clock)
        shown = shown_ids(b)
        try:
            for i in range(3):
                await a.send_text(f"pay bob {i} coins")
            await settle([a, b], 3)
            captured = list(tap.on(key.topic))
            log_before = list(log_of(b))
            stored = await b.store.message_count()
            clock.offset += 600  # ten minutes later
            before = b.counters["received_frames"]
            for env in captured:  # b's own among them (the broker echoes the tap's copies to b)
                await tap.publish(key.topic, env)
            await wait_for(lambda: b.counters["received_frames"] >= before + len(captured))
            await asyncio.sleep(0.3)
            first = (list(log_of(b)), await b.store.message_count(), list(shown))
        finally:
            await b.stop()
        # the receiver restarts from its database; the same envelopes come again
        clock.offset += 600
        b2 = await node("b", key, tmp_path, mosq.url, clock=clock)
        shown2 = []
        b2.add_listener(lambda e: shown2.append(e) if isinstance(e, ev.MessageShown) else None)
        try:
            for env in captured:
                await tap.publish(key.topic, env)
            await wait_for(lambda: b2.counters["received_frames"] >= len(captured))
            await asyncio.sleep(0.3)
            second = (list(log_of(b2)), await b2.store.message_count(), shown2, b2.channel.stats["duplicates"])
        finally:
            await b2.stop()
        return log_before, stored, first, second

    log_before, stored, first, second = asyncio.run(main())
    assert len(log_before) == 3
    assert first[0] == log_before and first[1] == stored == 3
    assert len(first[2]) == 3, "each message was shown once, replays never"
    assert second[0] == log_before and second[1] == 3 and second[2] == []
    assert second[3] >= 3  # recognised as duplicates


def test_member_cannot_replay_another_members_message_under_a_new_id(mosq, tmp_path):
    """A member (holds the channel key) takes alice's signed content and republishes it as a new SDS message
    claiming to be alice, with a fresh message id. The signature is alice's and still valid, so only
    binding the id to the content (message_id = SHA-256(content), as @waku/sds computes it) catches it."""
    key = ChannelKey.generate("replay-member")

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("alice", key, tmp_path, mosq.url)
            b = await node("bob", key, tmp_path, mosq.url)
            try:
                await a.send_text("transfer 100 to mallory")
                await settle([a, b], 1)
                _, _, original = sds_of(key, tap.on(key.topic)[0])
                forger = MessageChannel(
                    key.channel_id, a.participant_id, node_channel_config(**FAST), int(time.time() * 1000)
                )
                out = forger.send(original.content, int(time.time() * 1000), message_id="f" * 64)
                # published by mallory as a "repair answer" (the only way to carry alice's sender id)
                await tap.publish(
                    key.topic, key.seal(pack(Identity.generate(), key.channel_binding, out.data, "repair"))
                )
                await asyncio.sleep(0.5)
                return [m.text for m in b.messages()]
            finally:
                await a.stop()
                await b.stop()

    texts = asyncio.run(main())
    assert texts == ["transfer 100 to mallory"], f"alice's message was delivered {len(texts)} times: {texts}"


def test_member_signing_as_another_member_is_rejected(mosq, tmp_path):
    key = ChannelKey.generate("impostor")

    async def main():
        a = await node("alice", key, tmp_path, mosq.url)
        b = await node("bob", key, tmp_path, mosq.url)
        reasons = []
        b.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
        async with Tap(mosq.url) as tap:
            try:
                await a.send_text("hello from alice")
                await settle([a, b], 1)
                _, _, real = sds_of(key, tap.on(key.topic)[0])
                mallory = Identity.generate()
                now = int(time.time() * 1000)
                body = AppPayload.new("msg", "alice", "send me your password", now).encode()
                frames = []
                # 1. mallory's signature, alice's sender id
                ch = MessageChannel(key.channel_id, a.participant_id, node_channel_config(**FAST), now)
                frames.append(ch.send(body, now, sign=signer(mallory, key.channel_binding)).data)
                # 2. alice's real signed content with the text changed (signature no longer matches)
                tampered = real.content.replace(b"hello from alice", b"hello from ALICE")
                ch2 = MessageChannel(key.channel_id, a.participant_id, node_channel_config(**FAST), now)
                frames.append(ch2.send(tampered, now).data)
                # 3. alice's genuine signed content, Lamport time and history under mallory's own sender id
                frames.append(
                    wire.encode(
                        wire.Message(
                            sender_id=mallory.participant_id,
                            message_id=real.message_id,
                            channel_id=key.channel_id,
                            lamport_timestamp=real.lamport_timestamp,
                            causal_history=real.causal_history,
                            content=real.content,
                        )
                    )
                )
                # 4. alice's genuine signed content replayed under a fresh message id (ids are content hashes)
                ch4 = MessageChannel(key.channel_id, a.participant_id, node_channel_config(**FAST), now)
                frames.append(ch4.send(real.content, now + 2, message_id="e" * 64).data)
                for data in frames:  # as repair answers: the content checks are what must catch them
                    await tap.publish(key.topic, key.seal(pack(mallory, key.channel_binding, data, "repair")))
                await wait_for(lambda: len(reasons) >= 4)
                return reasons, [m.text for m in b.messages()], b.counters["impersonation"]
            finally:
                await a.stop()
                await b.stop()

    reasons, texts, impersonations = asyncio.run(main())
    assert sorted(reasons) == ["bad_message_id", "bad_signature", "impersonation", "impersonation"]
    assert impersonations == 2 and texts == ["hello from alice"]


# ----------------------------------------------------------------------- files


def test_database_and_key_files_are_created_0600_even_under_umask_0(mosq, tmp_path):
    def under_umask0(*args, **kw):
        return subprocess.Popen(
            [*SDSCHAT, *args],
            preexec_fn=lambda: os.umask(0),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kw,
        )

    p = under_umask0("keygen", str(tmp_path / "k.key"))
    assert p.wait(60) == 0, p.stderr.read()
    assert stat.S_IMODE((tmp_path / "k.key").stat().st_mode) == 0o600
    home = tmp_path / "home"
    env = {**os.environ, "SDSCHAT_HOME": str(home)}
    explicit = tmp_path / "db" / "x.db"
    fast = [
        a
        for kv in ("resend_unacknowledged_ms=300", "sync_interval_ms=500", "sync_jitter_ms=100")
        for a in ("--tune", kv)
    ]
    common = [
        "--key-file",
        str(tmp_path / "k.key"),
        "--broker",
        mosq.url,
        "--count",
        "2",
        "--interval",
        "0.1",
        "--linger",
        "0.5",
        "--quiet",
        "--max-runtime",
        "4",
        *fast,
    ]
    bots = [
        under_umask0("bot", "--name", "u0", *common, env=env),
        under_umask0("bot", "--name", "u1", "--db", str(explicit), *common),
    ]
    modes: dict[str, int] = {}
    while any(b.poll() is None for b in bots):  # -wal and -shm exist only while the database is open
        for f in [*home.glob("*.db*"), *explicit.parent.glob("*.db*")]:
            try:
                modes[f.name] = stat.S_IMODE(f.stat().st_mode)
            except FileNotFoundError:
                pass
        time.sleep(0.02)
    for b in bots:
        assert b.returncode in (0, 3), b.stderr.read()
    names = set(modes)
    assert any(n.endswith(".db") for n in names) and any(n.endswith("-wal") for n in names), names
    assert any(n.endswith("-shm") for n in names), names
    assert all(m == 0o600 for m in modes.values()), {n: oct(m) for n, m in modes.items()}


def test_default_data_directory_is_private_even_under_umask_0(tmp_path, mosq):
    """The folder holding every database (SDSCHAT_HOME or the platform's data dir) is created 0700:
    under umask 0 a 0777 folder would let any local user delete or swap a participant's database."""
    home = tmp_path / "fresh" / "sdschat-home"
    (tmp_path / "k.key").write_bytes(b"")
    subprocess.run([*SDSCHAT, "keygen", "--force", str(tmp_path / "k.key")], check=True, capture_output=True)
    p = subprocess.run(
        [
            *SDSCHAT,
            "bot",
            "--name",
            "u",
            "--key-file",
            str(tmp_path / "k.key"),
            "--broker",
            mosq.url,
            "--count",
            "0",
            "--linger",
            "0",
            "--quiet",
            "--max-runtime",
            "5",
        ],
        preexec_fn=lambda: os.umask(0),
        env={**os.environ, "SDSCHAT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(home.stat().st_mode) & 0o077 == 0, oct(stat.S_IMODE(home.stat().st_mode))


# ------------------------------------------------------- what is NOT protected (demonstrated)


def test_not_protected_traffic_metadata_topic_sizes_timing(mosq, tmp_path):
    """The broker sees one stable topic per channel, every frame's time (and so who is active) and its size
    bucket: padding hides a text's length within a bucket (test_frame_sizes_are_padded_to_buckets), not a
    much longer text's bucket. It does not see the participant id: MQTT client ids are random per session."""
    key = ChannelKey.generate("meta")

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("a", key, tmp_path, mosq.url)
            b = await node("b", key, tmp_path, mosq.url)
            try:
                await a.send_text("x" * 10)
                await settle([a, b], 1)
                await a.send_text("x" * 4_010)
                await settle([a, b], 2)
            finally:
                await a.stop()
                await b.stop()
            return [(p, sds_of(key, p)) for p in tap.on(key.topic)], a.participant_id

    frames, pid = asyncio.run(main())
    broker_log = mosq.log_path.read_text(errors="replace")  # the broker's own log
    assert broker_log.count("New client connected") >= 2 and pid[:8] not in broker_log
    messages = [p for p, (_, reason, _) in frames if reason == "message"]
    assert len(messages) == 2
    # a 4,000-character text still lands 2 to 6 KB higher: its size class shows
    assert 2_000 <= len(messages[1]) - len(messages[0]) <= 6_200
    assert all(len(p) == padded_size(len(p)) for p, _ in frames)


def test_frame_sizes_are_padded_to_buckets(mosq, tmp_path):
    """The broker sees bucket sizes only (Padmé in steps of at least 256 bytes, at least 1 KB): texts of 1 to 200
    characters, whose frames differ by ~200 bytes, show as at most two neighbouring buckets; a dull text and a
    lively one of 300 characters show as the same bucket (what a text says never shows); every frame on the wire
    (messages, syncs, typing notices) has a bucket size."""
    key = ChannelKey.generate("padded")
    rng = random.Random(3)
    lively = "".join(rng.choice(string.ascii_letters + " ") for _ in range(300))

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("a", key, tmp_path, mosq.url)
            b = await node("b", key, tmp_path, mosq.url)
            try:
                for text in ("y", "y" * 100, "y" * 200, "y" * 300, lively):
                    await a.send_text(text)
                    await settle([a, b], len(a.channel.log))
                await b.send_typing()
                await asyncio.sleep(0.3)
            finally:
                await a.stop()
                await b.stop()
            return [(p, sds_of(key, p)) for p in tap.on(key.topic)]

    frames = asyncio.run(main())
    messages = [p for p, (_, reason, _) in frames if reason == "message"]
    assert len(messages) == 5
    plain = [len(key.open(p)) for p in messages[:3]]
    assert len(set(plain)) == 3 and plain[2] - plain[0] >= 190  # the lengths differ...
    sizes = sorted({len(p) for p in messages[:3]})
    assert len(sizes) <= 2 and sizes[-1] - sizes[0] <= 256, sizes  # ...the broker sees one or two buckets
    assert len(messages[3]) == len(messages[4])  # 300 letters y, or 300 random letters: one size
    reasons = {reason for _, (_, reason, _) in frames}
    assert {"message", "sync", "ephemeral"} <= reasons
    assert all(len(p) == padded_size(len(p)) >= MIN_ENVELOPE_SIZE and len(p) % 256 == 0 for p, _ in frames)
    # what it costs here: at most 12% or 256 bytes, bounded by the 1 KB floor for small frames
    for p, (_, _, _msg) in frames:
        plain = len(key.open(p)) + 34
        assert len(p) <= max(MIN_ENVELOPE_SIZE, plain * 1.12, plain + 255)


def test_a_member_cannot_forge_another_members_acknowledgement(mosq, tmp_path):
    """Every frame is signed by its publisher, and only a repair answer may carry someone else's frame (and its
    causal history then acknowledges nothing). Mallory tells bob that alice has his message, three ways: a sync
    frame in alice's name signed by mallory, the same dressed as a repair answer, and alice's genuine message
    rebroadcast with bob's message added to its causal history (which alice's signature does not cover). Each is
    refused, and bob keeps resending to alice, who never got it."""
    key = ChannelKey.generate("sync-forgery")

    async def main():
        a = await node("alice", key, tmp_path, mosq.url)
        b = await node("bob", key, tmp_path, mosq.url)
        acked = []
        reasons = []
        b.add_listener(
            lambda e: (
                acked.append(e.message_id) if isinstance(e, ev.AckStateChanged) and e.state == ev.ACKNOWLEDGED else None
            )
        )
        b.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
        mallory = Identity.generate()  # a member: she holds the channel key, and her own identity only
        async with Tap(mosq.url) as tap:
            try:
                await a.send_text("hello bob")
                await settle([a, b], 1)
                missed = await missed_by(b, a, "bob misses this one", restore=False)
                genuine = next(m for _, _, m in (sds_of(key, p) for p in tap.on(key.topic)) if m.message_id == missed)
                a.set_impairment(offline=True)  # alice is gone: she hears nothing and resends nothing
                b.set_impairment(loss_in=0.0)
                mid = await b.send_text("did alice get this?")
                await asyncio.sleep(0.2)
                now = int(time.time() * 1000)
                forged = wire.Message(
                    sender_id=a.participant_id,
                    message_id="sync-forged",
                    channel_id=key.channel_id,
                    lamport_timestamp=now,
                    causal_history=[wire.HistoryEntry(mid)],
                )
                await tap.publish(key.topic, key.seal(pack(mallory, key.channel_binding, wire.encode(forged), "sync")))
                await tap.publish(
                    key.topic, key.seal(pack(mallory, key.channel_binding, wire.encode(forged), "repair"))
                )
                await wait_for(lambda: len(reasons) >= 2)
                # alice's genuine message bob lacks, rebroadcast with bob's message added to its causal history
                relayed = wire.Message(
                    sender_id=genuine.sender_id,
                    message_id=genuine.message_id,
                    channel_id=key.channel_id,
                    lamport_timestamp=genuine.lamport_timestamp,
                    causal_history=[wire.HistoryEntry(mid)],
                    content=genuine.content,
                )
                await tap.publish(
                    key.topic, key.seal(pack(mallory, key.channel_binding, wire.encode(relayed), "repair"))
                )
                await wait_for(lambda: len(reasons) >= 3)
                resends = b.channel.stats["resends"]
                await wait_for(lambda: b.channel.stats["resends"] > resends, timeout=10)
                return (
                    mid,
                    list(log_of(a)),
                    reasons,
                    b.counters["impersonation"],
                    b.channel.outgoing_ids,
                    acked,
                    missed in log_of(b),
                )
            finally:
                await a.stop()
                await b.stop()

    mid, alice_log, reasons, impersonations, outgoing, acked, relayed_logged = asyncio.run(main())
    assert mid not in alice_log  # alice never got it ...
    assert reasons == ["impersonation", "impersonation", "bad_signature"] and impersonations == 2  # ... all refused
    assert not relayed_logged  # the altered copy of alice's message got nowhere
    assert mid in outgoing and mid not in acked  # ... and bob still holds it unacknowledged, resending


def test_a_relayed_repair_answers_bloom_filter_acknowledges_nothing(mosq, tmp_path):
    """The bloom filter of a rebroadcast is not signed by its author (only the content, Lamport time and causal
    history are), so a repair answer's acknowledgements count for nothing (``acks=not relayed`` in
    sdschat/node/receive.py). Mallory relays alice's genuine message, which bob lacks, as a repair answer with
    her own bloom filter holding bob's message X, which alice never got. The relay is accepted (its signature
    holds: bob delivers alice's message), yet X stays unacknowledged and bob keeps resending it. The same frame
    bytes given to an engine holding X with ``acks=True`` do acknowledge X: the test tells the two apart."""
    key = ChannelKey.generate("relayed-bloom")
    cfg = node_channel_config(**FAST)

    async def main():
        a = await node("alice", key, tmp_path, mosq.url)
        b = await node("bob", key, tmp_path, mosq.url)
        states, reasons = [], []
        b.add_listener(lambda e: states.append((e.message_id, e.state)) if isinstance(e, ev.AckStateChanged) else None)
        b.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
        mallory = Identity.generate()  # a member: the channel key and an identity of her own
        async with Tap(mosq.url) as tap:
            try:
                await a.send_text("hello bob")
                await settle([a, b], 1)
                missed = await missed_by(b, a, "bob misses this one", restore=False)
                a.set_impairment(offline=True)  # alice is gone: she never gets X, never resends
                b.set_impairment(loss_in=0.0)
                x = await b.send_text("X: did alice get this?")
                await asyncio.sleep(0.2)
                heard = [sds_of(key, p) for p in tap.on(key.topic)]
                genuine = next(m for _, _, m in heard if m.message_id == missed)
                x_msg = next(m for _, _, m in heard if m.message_id == x)
                # mallory's own engine has X (she heard it) and alice's message: its bloom filter holds X
                now = int(time.time() * 1000)
                mine = MessageChannel(key.channel_id, mallory.participant_id, cfg, now)
                mine.receive(wire.encode(genuine), now)
                mine.receive(wire.encode(x_msg), now)
                bloom = wire.decode(mine.send(b"mallory's own", now).data).bloom_filter
                assert bloom and len(bloom) == len(genuine.bloom_filter)
                relayed = wire.encode(dataclasses.replace(genuine, bloom_filter=bloom, repair_request=[]))
                await tap.publish(key.topic, key.seal(pack(mallory, key.channel_binding, relayed, "repair")))
                await wait_for(lambda: missed in log_of(b))  # accepted: alice's signature does not cover the bloom
                resends = b.channel.stats["resends"]
                await wait_for(lambda: b.channel.stats["resends"] > resends, timeout=10)
                return (
                    x,
                    x_msg,
                    relayed,
                    missed,
                    states,
                    reasons,
                    list(b.channel.outgoing_ids),
                    list(log_of(a)),
                    b.participant_id,
                )
            finally:
                await a.stop()
                await b.stop()

    x, x_msg, relayed, missed, states, reasons, outgoing, alice_log, bob_id = asyncio.run(main())
    assert x not in alice_log and reasons == []  # alice never got X; the relay was not refused
    assert x in outgoing  # bob still holds X unacknowledged, and kept resending it (above)
    acked_states = (ev.ACKNOWLEDGED, ev.POSSIBLY_ACKNOWLEDGED)
    assert [s for mid, s in states if mid == x] and not any(mid == x and s in acked_states for mid, s in states), (
        states
    )  # its state moved (resending), never to acknowledged nor possibly acknowledged
    con = sqlite3.connect(tmp_path / "bob.db")
    rows = con.execute(
        "SELECT kind FROM events WHERE message_id = ? AND kind IN ('acked', 'possibly_acked')", (x,)
    ).fetchall()
    delivered = con.execute(
        "SELECT detail FROM events WHERE kind = 'received' AND message_id = ?", (missed,)
    ).fetchone()
    con.close()
    assert rows == [] and json.loads(delivered[0])["via"] == "repair"
    # the distinction: an engine holding X (same sender, same content, so the same id), given the same frame
    for acks in (True, False):
        replica = MessageChannel(key.channel_id, bob_id, cfg, x_msg.lamport_timestamp)
        assert replica.send(x_msg.content, x_msg.lamport_timestamp).message_id == x
        events = replica.receive(relayed, x_msg.lamport_timestamp + 100, acks=acks)
        acked = [e.message_id for e in events if type(e).__name__ in ("Acknowledged", "PossiblyAcknowledged")]
        assert acked == ([x] if acks else []) and (x in replica.outgoing_ids) is not acks


def test_frames_are_signed_by_their_publisher(mosq, tmp_path):
    """A frame without a publisher's signature (version 1), with a signature that does not verify, or whose
    reason byte was changed after signing, is refused and counted; nothing of it reaches the engine."""
    key = ChannelKey.generate("signed-frames")

    async def main():
        a = await node("alice", key, tmp_path, mosq.url)
        b = await node("bob", key, tmp_path, mosq.url)
        reasons = []
        b.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
        async with Tap(mosq.url) as tap:
            try:
                await a.send_text("hello")
                await settle([a, b], 1)
                plain = key.open(tap.on(key.topic)[0])
                publisher, reason, frame = unpack(plain, key.channel_binding)
                assert publisher == a.participant_id and reason == "message"
                pid = a.participant_id.encode()
                v1 = bytes((1, 0, len(pid))) + pid + frame  # how earlier versions framed it: no signature
                flipped = bytearray(plain)
                flipped[plain.index(b"hello")] ^= 1  # one bit of the SDS frame (its content, sent as it is)
                rereason = bytearray(plain)
                rereason[1] = 1  # "resend": the reason is signed too
                for bad in (v1, bytes(flipped), bytes(rereason)):
                    await tap.publish(key.topic, key.seal(bad))
                await wait_for(lambda: len(reasons) >= 3)
                return reasons, len(log_of(b)), b.counters["rejected"]
            finally:
                await a.stop()
                await b.stop()

    reasons, logged, rejected = asyncio.run(main())
    assert reasons == ["unsigned", "bad_signature", "bad_signature"] and rejected == 3 and logged == 1


def test_a_message_is_taken_on_its_authors_signature_and_its_frame_checked_when_its_filter_counts(mosq, tmp_path):
    """A frame carrying its publisher's own new message needs only the author's content signature, which covers
    all of it but the publish reason, the bloom filter and the repair requests; its frame signature is checked
    once the filter would acknowledge one of the receiver's messages that the causal history does not.

    Bob says "b1" and hears nothing after it. Carol's "c1" names b1 in its history (one entry a frame here);
    alice's "a1" names c1 only, and her filter holds b1. With alice and carol gone, copies of their frames with
    the frame signature broken reach bob: "a1" would acknowledge b1 in alice's name by its filter alone, so its
    frame signature is checked and the copy refused (*bad_signature*), b1 still unacknowledged; "c1" has
    nothing more in its filter than in its history, so it is taken on carol's signature and delivered."""
    key = ChannelKey.generate("author-signed")

    async def main():
        async with Tap(mosq.url) as tap:
            a, b, c = [
                await start(n, key, tmp_path, mosq.url, causal_history_size=1) for n in ("alice", "bob", "carol")
            ]
            reasons = []
            b.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
            try:
                b.set_impairment(loss_in=1.0)
                b1 = await b.send_text("b1")
                await wait_for(lambda: b1 in log_of(a) and b1 in log_of(c))
                c1 = await c.send_text("c1")
                await wait_for(lambda: c1 in log_of(a))
                a1 = await a.send_text("a1")
                await asyncio.sleep(0.2)
                await a.stop()
                await c.stop()
                frames = {}
                for payload in tap.on(key.topic):
                    plain = key.open(payload)
                    frames.setdefault(sds_of(key, payload)[2].message_id, plain)
                assert [
                    h.message_id for h in wire.decode(unpack(frames[a1], key.channel_binding)[2]).causal_history
                ] == [c1]
                assert [
                    h.message_id for h in wire.decode(unpack(frames[c1], key.channel_binding)[2]).causal_history
                ] == [b1]

                def broken(plain: bytes) -> bytes:
                    out = bytearray(plain)
                    out[2 + 32] ^= 1  # the first byte of the frame signature (after version, reason, key)
                    return key.seal(bytes(out))

                b.set_impairment(loss_in=0.0)
                await tap.publish(key.topic, broken(frames[a1]))
                await wait_for(lambda: reasons)
                refused = list(reasons), b1 in b.channel.outgoing_ids, a1 in log_of(b)
                taken = b.counters["frames_on_content_signature"]
                await tap.publish(key.topic, broken(frames[c1]))
                await wait_for(lambda: c1 in log_of(b))
                return refused, reasons, b1 in b.channel.outgoing_ids, b.counters["frames_on_content_signature"] - taken
            finally:
                for n in (a, b, c):
                    await n.stop()

    refused, reasons, b1_unacked, taken = asyncio.run(main())
    assert refused == (["bad_signature"], True, False)
    assert reasons == ["bad_signature"] and not b1_unacked and taken == 1


def test_a_member_relaying_a_message_with_a_forged_lamport_or_history_is_refused_and_logs_stay_identical(
    mosq, tmp_path
):
    """The author's signature covers the message's Lamport time and causal history as well as its content
    (sdschat.node.authored), and survives SDS-R rebroadcast unchanged. Mallory relays alice's "first" to bob
    (who missed it) three ways: an hour ahead, with its history emptied, and with a made-up history entry. Each
    copy is refused and counted; the honest copy still reaches bob (alice resends it) and all logs are the
    same."""
    key = ChannelKey.generate("reorder")

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("alice", key, tmp_path, mosq.url)
            b = await node("bob", key, tmp_path, mosq.url, impairment={"loss_in": 1.0})
            reasons = []
            b.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
            try:
                zero = await a.send_text("zero")
                await asyncio.sleep(0.2)
                first = await a.send_text("first")
                await asyncio.sleep(0.2)
                _, _, real = sds_of(key, next(p for p in tap.on(key.topic) if sds_of(key, p)[2].message_id == first))
                assert [h.message_id for h in real.causal_history] == [zero]
                second = await a.send_text("second")
                await asyncio.sleep(0.2)
                b.set_impairment(loss_in=0.0)
                mallory = Identity.generate()
                relays = [
                    dict(lamport_timestamp=real.lamport_timestamp + 3_600_000, causal_history=real.causal_history),
                    dict(lamport_timestamp=real.lamport_timestamp, causal_history=[]),
                    dict(
                        lamport_timestamp=real.lamport_timestamp,
                        causal_history=[*real.causal_history, wire.HistoryEntry("f" * 64)],
                    ),
                ]
                for fields in relays:
                    relay = wire.Message(
                        sender_id=real.sender_id,
                        message_id=real.message_id,
                        channel_id=key.channel_id,
                        content=real.content,
                        **fields,
                    )
                    await tap.publish(
                        key.topic, key.seal(pack(mallory, key.channel_binding, wire.encode(relay), "repair"))
                    )
                await wait_for(lambda: len(reasons) >= 3)
                await settle([a, b], 3, timeout=20)
                return list(log_of(a)), list(log_of(b)), [zero, first, second], reasons, b.counters["rejected"]
            finally:
                await a.stop()
                await b.stop()

    alice_log, bob_log, sent, reasons, rejected = asyncio.run(main())
    assert reasons == ["bad_signature"] * 3 and rejected == 3
    assert alice_log == bob_log == sent  # same messages, same order


def test_content_signed_over_the_payload_alone_is_refused(mosq, tmp_path):
    """Content signed the way earlier sdschat builds did (signed content version 1: the payload only, so a relay
    could change its Lamport time and history) is refused as ``unsigned_ordering``, even correctly signed by
    the member it names."""
    key = ChannelKey.generate("unordered")

    async def main():
        a = await node("alice", key, tmp_path, mosq.url)
        reasons = []
        a.add_listener(lambda e: reasons.append(e.reason) if isinstance(e, ev.FrameRejected) else None)
        async with Tap(mosq.url) as tap:
            try:
                old = Identity.generate()
                now = int(time.time() * 1000)
                body = AppPayload.new("msg", "old", "from an earlier build", now).encode()
                ch = MessageChannel(key.channel_id, old.participant_id, node_channel_config(**FAST), now)
                frame = ch.send(signed_content(old, key.channel_binding, body), now).data
                await tap.publish(key.topic, key.seal(pack(old, key.channel_binding, frame)))
                await wait_for(lambda: reasons)
                return reasons, len(log_of(a)), a.counters["rejected"]
            finally:
                await a.stop()

    reasons, logged, rejected = asyncio.run(main())
    assert reasons == ["unsigned_ordering"] and logged == 0 and rejected == 1


def test_not_protected_a_member_withholding_a_message_makes_it_lost_for_others():
    """Only members hold a message; if the sender leaves and the one member that has it will not answer
    repair requests, the others declare it lost after lost_after_ms (engine level, virtual time)."""
    cfg = node_channel_config(**FAST, lost_after_ms=5_000)
    quiet = node_channel_config(**{**FAST, "repair_enabled": False}, lost_after_ms=5_000)
    alice, bob, carol = (MessageChannel("c", n, c, 0) for n, c in (("alice", cfg), ("bob", quiet), ("carol", cfg)))
    m1 = alice.send(b"only bob gets this", 1_000)
    bob.receive(m1.data, 1_001)  # carol misses it; alice then goes away
    m2 = bob.send(b"bob names m1 in his history", 2_000)
    events = carol.receive(m2.data, 2_001)
    assert any(type(e).__name__ == "Missing" for e in events)
    lost = []
    asked = 0
    for t in range(2_100, 12_000, 100):  # carol asks and asks; bob (withholding) never answers
        for e in carol.tick(t):
            if type(e).__name__ == "Lost":
                lost.append(e)
            elif hasattr(e, "data"):
                asked += bool(e.repair_request)
                for ev_ in bob.receive(e.data, t):
                    assert type(ev_).__name__ != "RepairScheduled"
    assert asked > 0
    assert [e.message_id for e in lost] == [m1.message_id]
    assert m1.message_id not in carol.log and m2.message_id in carol.log


def test_not_protected_key_compromise_reveals_past_traffic_and_the_identity_key_sits_in_the_database(mosq, tmp_path):
    """A key that is not rotated stays in use: whoever gets it later reads every envelope captured under it
    (forward secrecy is only as fine as the rotation). Without ``--protect`` the identity key is stored
    unencrypted in the 0600 database: whoever reads that file can sign as its owner."""
    key = ChannelKey.generate("compromise")
    key.write_key_file(tmp_path / "leaked.key")

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("a", key, tmp_path, mosq.url)
            try:
                await a.send_text("yesterday's secret")
                await asyncio.sleep(0.3)
                return tap.on(key.topic), a.participant_id
            finally:
                await a.stop()

    captured, pid = asyncio.run(main())
    thief = ChannelKey.from_file(tmp_path / "leaked.key", "compromise")
    assert any(b"yesterday's secret" in thief.open(env) for env in captured)
    con = sqlite3.connect(tmp_path / "a.db")
    raw = con.execute("SELECT private_key FROM identity").fetchone()[0]
    con.close()
    assert Identity.from_private_bytes(raw).participant_id == pid


def test_not_protected_key_compromise_a_superseded_key_is_kept_24_hours_and_the_first_key_for_good(mosq, tmp_path):
    """Coarse forward secrecy, SECURITY.md's "Key compromise" row: alice (the default window) still holds
    epoch 1's key in her database after she moved to epoch 2, and it opens what was captured under it. Bob
    (a window of 1.5 s, a node started from his profile) deletes epochs 0 and 1 from his node, yet the
    channel's first key stays in his profile: it opens everything sent before the first change, and an invite
    he makes now still carries it."""
    from sdschat.cli.wiring import profile_node_config
    from sdschat.profile import Profile, decode_invite, encode_invite, resolve_paths

    key = ChannelKey.generate("compromise-epochs")
    admin = Identity.generate()
    paths = resolve_paths(tmp_path / "bob-home")
    profile = Profile.create(paths, "bob")
    entry = profile.add_channel(key.channel_name, key._secret, admins=[admin.participant_id])
    assert NodeConfig("x", key, tmp_path / "x.db").epoch_retention_ms == 24 * 3600 * 1000  # the default window

    async def main():
        async with Tap(mosq.url) as tap:
            a = await Node.start(
                NodeConfig(
                    "alice",
                    key,
                    tmp_path / "alice.db",
                    mosq.url,
                    identity=admin,
                    channel_config=node_channel_config(**FAST),
                    membership=True,
                    admins=(admin.participant_id,),
                )
            )
            b = await Node.start(
                profile_node_config(
                    profile,
                    entry,
                    broker_url=mosq.url,
                    epoch_retention_ms=1_500,
                    channel_config=node_channel_config(**FAST),
                )
            )
            try:
                await wait_for(
                    lambda: b.participant_id in a.membership.members and a.participant_id in b.membership.members
                )
                await a.send_text("said under the first key")
                await wait_for(lambda: any(m.text == "said under the first key" for m in b.messages()))
                await a.rekey()
                await wait_for(lambda: b.membership.current.number == 1)
                await a.send_text("said under epoch 1")
                await asyncio.sleep(0.3)
                await a.rekey()
                await wait_for(lambda: b.membership.current.number == 2)
                await wait_for(lambda: len(b.membership.keys()) == 1, timeout=10)  # bob: 0 and 1 deleted
                await asyncio.sleep(0.3)
                return list(tap.frames), [e.number for e, _ in a.membership.keys()]
            finally:
                await a.stop()
                await b.stop()

    frames, alice_epochs = asyncio.run(main())
    assert sorted(alice_epochs) == [0, 1, 2]  # alice: nothing deleted within 24 h
    state = json.loads(
        sqlite3.connect(tmp_path / "alice.db").execute("SELECT value FROM kv WHERE key = 'membership'").fetchone()[0]
    )
    epoch1 = ChannelKey(bytes.fromhex(next(e["s"] for e in state["epochs"] if e["n"] == 1)), key.channel_name)

    def readable(k: ChannelKey) -> bytes:
        out = []
        for _, env in frames:
            try:
                out.append(k.open(env))
            except EnvelopeError:
                pass
        return b"".join(out)

    assert b"said under epoch 1" in readable(epoch1)  # whoever takes alice's files today reads epoch 1
    assert b"said under epoch 1" not in readable(key)
    # bob's node deleted both older keys; his profile still has the first, and hands it on in an invite
    again = Profile.load(paths)
    first = again.key(again.channel(key.channel_name))
    assert b"said under the first key" in readable(first)
    token = decode_invite(encode_invite(again.invite(key.channel_name)))
    assert token.secret == key._secret


def test_not_protected_key_compromise_an_imported_database_keeps_its_identity_key_even_with_protect(tmp_path):
    """``sdschat init --protect`` seals the profile's identity key, but a database imported from an earlier
    version (``join --key-file --db``) keeps its own identity key, in the clear, in its ``identity`` table."""
    home = tmp_path / "home"
    data = Path(__file__).resolve().parents[1] / "data" / "v0.1"
    env = {**os.environ, "SDSCHAT_IDENTITY_PASSPHRASE": "correct horse battery staple"}

    def run_cli(*args):
        p = subprocess.run([*SDSCHAT, *args, "--home", str(home)], capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 0, p.stderr

    run_cli("init", "--name", "alice", "--protect")
    run_cli("join", "--key-file", str(data / "team.key"), "--channel", "old", "--db", str(data / "alice.db"))
    from sdschat.profile import Profile, resolve_paths

    profile = Profile.load(resolve_paths(home))
    assert profile.protected
    dbs = list(home.rglob("*.db"))
    assert len(dbs) == 1 and dbs[0].resolve() != (data / "alice.db").resolve()  # copied into the profile
    con = sqlite3.connect(dbs[0])
    raw = con.execute("SELECT private_key FROM identity").fetchone()[0]
    con.close()
    imported = Identity.from_private_bytes(raw)  # usable as it is: no passphrase needed
    assert imported.participant_id != profile.participant_id


def test_not_protected_a_token_holder_who_never_joins_is_cut_off_only_by_a_rekey(mosq, tmp_path):
    """An invite token is the channel key. Eve took a copy of one and runs a node with it without ever
    announcing herself: she reads and writes the channel, and no admin can remove her by name. A ``/rekey``
    cuts her off: the new key is sealed to the members who joined, so she reads nothing sent after it; what she
    writes under the old key is still accepted while the members keep that key (the 24-hour window)."""
    from sdschat.profile import Profile, decode_invite, encode_invite, resolve_paths

    paths = resolve_paths(tmp_path / "alice-home")
    profile = Profile.create(paths, "alice", mosq.url)
    profile.add_channel("team", os.urandom(32))
    token = encode_invite(profile.invite("team"))
    stolen = decode_invite(token)
    alice_id = profile.identity()

    async def main():
        key = ChannelKey(stolen.secret, stolen.channel)
        member_cfg = dict(
            channel_config=node_channel_config(**FAST), membership=True, admins=(alice_id.participant_id,)
        )
        a = await Node.start(NodeConfig("alice", key, tmp_path / "alice.db", mosq.url, identity=alice_id, **member_cfg))
        b = await Node.start(
            NodeConfig("bob", key, tmp_path / "bob.db", mosq.url, identity=Identity.generate(), **member_cfg)
        )
        e = await Node.start(
            NodeConfig("eve", key, tmp_path / "eve.db", mosq.url, channel_config=node_channel_config(**FAST))
        )  # never announces herself
        try:
            await wait_for(lambda: b.participant_id in a.membership.members)
            await a.send_text("before the rekey")
            await e.send_text("eve was here")
            await wait_for(lambda: any(m.text == "before the rekey" for m in e.messages()))
            await wait_for(lambda: any(m.text == "eve was here" for m in b.messages()))
            assert e.participant_id not in a.membership.members
            with pytest.raises(UserError, match="no member called 'eve'"):
                await a.kick("eve")
            await a.rekey()
            await wait_for(lambda: b.membership.current.number == 1)
            await a.send_text("after the rekey")
            await wait_for(lambda: any(m.text == "after the rekey" for m in b.messages()))
            # what she writes under the old key still counts while the members keep it (the retention window)
            await e.send_text("eve, after the rekey")
            await wait_for(lambda: any(m.text == "eve, after the rekey" for m in b.messages()))
            await asyncio.sleep(0.5)
            return [m.text for m in e.messages()], e.membership.current.number
        finally:
            for n in (a, b, e):
                await n.stop()

    eve_sees, eve_epoch = asyncio.run(main())
    assert "before the rekey" in eve_sees and "after the rekey" not in eve_sees and eve_epoch == 0


def test_not_protected_denial_of_service_garbage_is_counted_not_prevented(mosq, tmp_path):
    """Anyone who can publish on the topic (the topic is not secret from the broker) makes every member
    spend work on each frame; it is rejected and counted, and real messages still get through."""
    key = ChannelKey.generate("flood")

    async def main():
        a = await node("a", key, tmp_path, mosq.url)
        b = await node("b", key, tmp_path, mosq.url)
        async with Tap(mosq.url) as tap:
            try:
                for i in range(2_000):
                    await tap.publish(key.topic, os.urandom(64 + i % 500))
                await a.send_text("still here")
                await settle([a, b], 1)
                await wait_for(lambda: b.counters["undecryptable"] >= 2_000)
                return b.counters["undecryptable"], [m.text for m in b.messages()]
            finally:
                await a.stop()
                await b.stop()

    rejected, texts = asyncio.run(main())
    assert rejected == 2_000 and texts == ["still here"]
    # told and recorded once a second with their count, not as 2,000 rows (a flood is not as many writes)
    con = sqlite3.connect(tmp_path / "b.db")
    rows = [json.loads(d) for (d,) in con.execute("SELECT detail FROM events WHERE kind = 'rejected'")]
    con.close()
    assert (
        sum(r["count"] for r in rows) == 2_000 and len(rows) <= 10 and {r["reason"] for r in rows} == {"undecryptable"}
    )


def test_profile_files_are_0600_and_folders_0700_even_under_umask_0(tmp_path):
    """The profile (name, identity, every channel key, imported databases) is private from its first byte."""
    home = tmp_path / "fresh" / "profile"
    data = Path(__file__).resolve().parents[1] / "data" / "v0.1"

    def umask0(*args):
        p = subprocess.run(
            [*SDSCHAT, *args, "--home", str(home)],
            preexec_fn=lambda: os.umask(0),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout

    umask0("init", "--name", "alice")
    umask0("new", "team")
    umask0("join", "--key-file", str(data / "team.key"), "--channel", "old", "--db", str(data / "alice.db"))
    files = {p.relative_to(home): stat.S_IMODE(p.stat().st_mode) for p in home.rglob("*")}
    assert {Path("profile.toml"), Path("identity.key"), Path("channels.json")} <= set(files)
    assert sum(1 for p in files if p.suffix == ".key" and p.parent.name == "keys") == 2
    assert sum(1 for p in files if p.suffix == ".db") == 1
    for path, mode in files.items():
        assert mode == (0o700 if (home / path).is_dir() else 0o600), (path, oct(mode))
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_not_protected_an_invite_token_is_the_channel_key(tmp_path, mosq):
    """Whoever holds a token is a member: it carries the key itself (only a key change cuts its holder off: see
    test_not_protected_a_token_holder_who_never_joins_is_cut_off_only_by_a_rekey)."""
    home = tmp_path / "alice"
    for args in (["init", "--name", "alice", "--broker", mosq.url], ["new", "team"]):
        subprocess.run([*SDSCHAT, *args, "--home", str(home)], check=True, capture_output=True, timeout=60)
    token = subprocess.run(
        [*SDSCHAT, "invite", "team", "--home", str(home)], check=True, capture_output=True, text=True, timeout=60
    )
    assert "key" in token.stderr  # the command says so
    from sdschat.profile import Profile, decode_invite, resolve_paths

    profile = Profile.load(resolve_paths(home))
    stolen = decode_invite(token.stdout)
    assert ChannelKey(stolen.secret, stolen.channel).topic == profile.key(profile.channel("team")).topic


def test_presence_shows_the_broker_no_state_or_away_message_and_is_never_stored(mosq, tmp_path):
    """Presence beats are sealed, signed and padded like every frame: the broker sees ephemeral frames of the
    smallest bucket, the same size whether a member is online, away with a message or leaving, and none of the
    words of an away message; no member's database keeps a beat (presence lives in memory only)."""
    key = ChannelKey.generate("presence-seen")

    async def main():
        async with Tap(mosq.url) as tap:
            a = await node("alice", key, tmp_path, mosq.url)
            b = await node("bob", key, tmp_path, mosq.url)
            try:
                await wait_for(lambda: a.presence(b.participant_id).state == "online", 10, "alice hears bob")
                b.set_away("dentist appointment downtown")
                await wait_for(lambda: a.presence(b.participant_id).state == "away", 10, "alice sees bob away")
                b.set_away(None)
                await wait_for(lambda: a.presence(b.participant_id).state == "online", 10, "bob back")
            finally:
                await b.stop()  # an offline beat
                await a.stop()
            return tap.on(key.topic)

    envelopes = asyncio.run(main())
    beats = []
    for p in envelopes:
        _, reason, msg = sds_of(key, p)
        if reason == "ephemeral" and b"presence" in (msg.content or b""):
            beats.append(p)
    assert len(beats) >= 4  # start, away (and its repeat), back, offline
    assert {len(p) for p in beats} == {MIN_ENVELOPE_SIZE}  # one size whatever the state says
    raw = b"".join(envelopes)
    for word in (b"dentist", b"appointment", b"downtown", b"away", b"presence"):
        assert word not in raw
    for nick in ("alice", "bob"):
        with sqlite3.connect(tmp_path / f"{nick}.db") as db:
            for table, column in (("messages", "content"), ("events", "detail")):
                hits = db.execute(f"SELECT count(*) FROM {table} WHERE CAST({column} AS TEXT) LIKE '%dentist%'")
                assert hits.fetchone()[0] == 0
