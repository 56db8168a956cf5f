"""``sdschat dm NAME`` and the window's inbox on a real mosquitto, with real profiles and nodes: a two-member
channel between two profiles that never exchanged a token (they share a channel), what the broker sees of the
request (a padded sealed blob on a topic of its own), and what is dropped and counted (a stranger's request, a
replay, a damaged one)."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import time

import pytest
from brokers import Mosquitto, mosquitto_binary

from sdschat.cli.window import ProfileClient
from sdschat.crypto import ChannelKey, Identity, InboxRequest, inbox_topic, padded_size, seal_request
from sdschat.crypto.epochs import exchange_public
from sdschat.crypto.keyfile import read_key_file
from sdschat.node.inbox import contacts
from sdschat.profile import Profile, resolve_paths
from sdschat.transport import MqttTransport

SECRETS = {"team": bytes(range(32)), "ops": bytes(range(32, 64))}


@pytest.fixture(scope="module")
def mosq(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("direct-mosquitto"))
    broker.start()
    yield broker
    broker.close()


def make_profiles(tmp_path, url: str, **channels) -> dict[str, Profile]:
    made = {}
    for who, names in channels.items():
        profile = Profile.create(resolve_paths(tmp_path / who), who, url)
        for name in names:
            profile.add_channel(name, SECRETS[name])
        made[who] = Profile.load(profile.paths)
    return made


async def until(predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def chat(node) -> list[str]:
    return [m.text for m in node.messages() if m.kind == "msg"]


def sdschat(home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sdschat", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )


class Tap:
    """A raw MQTT client subscribed to '#': the broker's view, as (topic, payload)."""

    def __init__(self, url: str) -> None:
        self.t = MqttTransport(url, suppress_echoes=False, qos=1)
        self.frames: list[tuple[str, bytes]] = []

    async def start(self) -> None:
        await self.t.start()
        self.t.set_message_handler(lambda topic, payload: self.frames.append((topic, bytes(payload))))
        await self.t.subscribe("#")

    def on(self, topic: str) -> list[bytes]:
        return [p for t, p in self.frames if t == topic]


def forms(secret: bytes) -> list[bytes]:
    return [secret, secret.hex().encode(), base64.b64encode(secret), base64.urlsafe_b64encode(secret).rstrip(b"=")]


def test_dm_by_name_between_profiles_that_never_exchanged_a_token(mosq, tmp_path) -> None:
    people = make_profiles(tmp_path, mosq.url, alice=("team",), bob=("team",), carol=("ops",))
    alice, bob, carol = people["alice"], people["bob"], people["carol"]

    async def scenario():
        tap = Tap(mosq.url)
        await tap.start()
        first = await ProfileClient.start(alice)
        bobs = await ProfileClient.start(bob)
        clients = [bobs]
        try:
            await until(lambda: bob.participant_id in contacts(first.nodes), "alice to know bob")
            await until(lambda: alice.participant_id in contacts(bobs.nodes), "bob to know alice")
            await first.stop()  # (`sdschat dm` runs on alice's profile on its own)
            asked: list = []
            bobs.on_request(asked.append)

            done = await asyncio.to_thread(sdschat, alice.paths.config, "dm", "bob")
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == ["@bob: asked bob to talk; open `sdschat` to chat there"]
            await until(lambda: len(asked) == 1, "the request at bob's window")
            opened = asked[0]
            assert opened.sender == alice.participant_id and opened.request.kind == "dm"
            node, note = await bobs.accept(opened)
            assert note == "" and node.key.channel_name == "@alice+bob"
            listed = await asyncio.to_thread(sdschat, alice.paths.config, "channels")
            assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["#team", "@bob"]  # by the other

            alices = await ProfileClient.start(Profile.load(alice.paths))
            clients.append(alices)
            mine = next(n for n in alices.nodes if n.key.channel_name == "@alice+bob")
            await node.send_text("hi alice, no token needed")
            await until(lambda: "hi alice, no token needed" in chat(mine), "bob's line at alice")
            await mine.send_text("hi bob")
            await until(lambda: "hi bob" in chat(node), "alice's line at bob")

            # ---- the broker's view of the request
            identity_bob = bob.identity()
            inbox = inbox_topic(exchange_public(identity_bob))
            blobs = tap.on(inbox)
            assert len(blobs) == 1
            blob = blobs[0]
            assert len(blob) == padded_size(len(blob)) >= 1024
            dm_entry = Profile.load(alice.paths).channel("@alice+bob")
            dm_secret = read_key_file(alice.paths.data / dm_entry.key_file)
            dm_key = ChannelKey(dm_secret, "@alice+bob")
            team = ChannelKey(SECRETS["team"], "team")
            secrets = [
                *(f.encode() for f in ("alice", "bob", "@alice+bob", "team", opened.request.request_id)),
                dm_secret,
                SECRETS["team"],
                dm_key.channel_binding,
                bytes.fromhex(dm_key.channel_id),
                bytes.fromhex(alice.participant_id),
                bytes.fromhex(bob.participant_id),
                alice.identity().public_bytes(),
                identity_bob.public_bytes(),
                exchange_public(identity_bob),
                exchange_public(alice.identity()),
                bytes.fromhex(opened.request.request_id),
            ]
            for secret in secrets:
                for form in forms(secret):
                    assert form not in blob
            # the inbox topic is none of the channels' topics, and nothing else on the wire names it: it is an
            # HKDF of bob's X25519 public key, which travels only inside sealed envelopes
            channel_topics = {dm_key.topic, team.topic}
            assert channel_topics <= {t for t, _ in tap.frames}  # (both channels were busy on the wire)
            assert inbox not in channel_topics | {ChannelKey(SECRETS["ops"], "ops").topic}
            others = [p for t, p in tap.frames if t != inbox]
            assert not any(inbox.encode() in p or inbox[8:].encode() in p for p in others)

            # ---- what is dropped and counted: a stranger's request, a replay, a damaged one
            carol_id = carol.identity()  # (in no channel with bob)
            stranger = InboxRequest(
                kind="dm",
                channel="@bob+carol",
                secret=bytes(32),
                recipient=bob.participant_id,
                nick="carol",
                sent_ms=int(time.time() * 1000),
            )
            assert await tap.t.publish(inbox, seal_request(carol_id, stranger, exchange_public(identity_bob)))
            assert await tap.t.publish(inbox, blob)  # replayed as it was
            damaged = bytearray(blob)
            damaged[100] ^= 0x40
            assert await tap.t.publish(inbox, bytes(damaged))
            await until(lambda: sum(bobs.direct.counts.values()) >= 3, "three drops")
            assert bobs.direct.counts == {"stranger": 1, "replay": 1, "auth": 1}
            assert len(asked) == 1

            # a replay after bob's window restarted is still a replay (the ids seen are kept in the profile)
            await bobs.stop()
            clients.remove(bobs)
            again = await ProfileClient.start(Profile.load(bob.paths))
            clients.append(again)
            shown: list = []
            again.on_request(shown.append)
            assert await tap.t.publish(inbox, blob)
            await until(lambda: again.direct.counts.get("replay") == 1, "the replay after a restart")
            assert shown == []
        finally:
            for client in clients:
                await client.stop()
            await tap.t.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_dm_with_an_unknown_name_is_one_line_and_exit_2(mosq, tmp_path) -> None:
    people = make_profiles(tmp_path, mosq.url, alice=("team",))
    done = sdschat(people["alice"].paths.config, "dm", "nobody")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["sdschat: nobody called 'nobody' in your channels (you can reach: nobody yet)"]
    blank = sdschat(people["alice"].paths.config, "dm", "  ")
    assert blank.returncode == 2 and blank.stderr.splitlines() == [
        "sdschat: say whom: a member of your channels (nobody yet)"
    ]
    assert list(Profile.load(people["alice"].paths).channels) == ["team"]  # nothing was added


def test_a_request_names_two_people_of_the_same_nick_apart(tmp_path) -> None:
    """Two bobs among our contacts: ``bob`` is ambiguous (the line names both as the window shows them), and
    ``bob#3f2a`` picks one."""
    from sdschat.node.errors import MemberNotFound
    from sdschat.node.inbox import Contact, resolve

    ids = [Identity.generate().participant_id for _ in range(2)]
    known = {}
    for pid in ids:
        known[pid] = Contact(pid, "bob", bytes(32), ["team"], f"bob#{pid[:4]}")
    with pytest.raises(MemberNotFound, match="2 people are called 'bob'"):
        resolve(known, "bob")
    assert resolve(known, f"bob#{ids[1][:4]}").participant_id == ids[1]
    assert resolve(known, f"@bob#{ids[0][:4]}").participant_id == ids[0]


def test_old_requests_and_requests_from_the_future_are_dropped_as_stale() -> None:
    from sdschat.node.inbox import MAX_REQUEST_AGE_MS, InboxReceiver

    alice, bob = Identity.generate(), Identity.generate()
    now_ms = 1_800_000_000_000
    receiver = InboxReceiver(bob, clock=lambda: now_ms / 1000)

    def sealed(at: int) -> bytes:
        request = InboxRequest("dm", "@alice+bob", bytes(32), bob.participant_id, "alice", at)
        return seal_request(alice, request, exchange_public(bob))

    for at in (now_ms - MAX_REQUEST_AGE_MS - 1, now_ms + 3_600_000):
        assert receiver.take(sealed(at), lambda pid: True) is None
    assert receiver.counts == {"stale": 2}
    assert receiver.take(sealed(now_ms - 1000), lambda pid: True) is not None


def test_not_protected_a_member_of_a_shared_channel_can_fill_an_inbox_with_requests() -> None:
    """The limitation, shown: each request from a contact with a fresh id is shown; nothing limits how many."""
    from sdschat.node.inbox import InboxReceiver

    mallory, bob = Identity.generate(), Identity.generate()
    receiver = InboxReceiver(bob)
    shown = 0
    for i in range(50):
        request = InboxRequest("dm", f"@bob+m{i}", bytes(32), bob.participant_id, "mallory", int(time.time() * 1000))
        blob = seal_request(mallory, request, exchange_public(bob))
        shown += receiver.take(blob, lambda pid: pid == mallory.participant_id) is not None
    assert shown == 50 and receiver.dropped == 0
