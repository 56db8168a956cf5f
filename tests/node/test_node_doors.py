"""The node's collaborators alone, without a broker: the roster, the receive pipeline and the store-node client, each
built on a small fake of its door (:mod:`sdschat.node.ports`) with a real engine, a real message book and a real
SQLite database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sdschat.crypto import ChannelKey, Identity
from sdschat.crypto.epochs import exchange_public
from sdschat.node import events as ev
from sdschat.node.authored import signer
from sdschat.node.book import MessageBook
from sdschat.node.config import NodeConfig, node_channel_config
from sdschat.node.errors import MemberNotFound, NotAllowed, UserError
from sdschat.node.frame import pack
from sdschat.node.outbox import Outbound
from sdschat.node.payload import AppPayload, PayloadError
from sdschat.node.receive import Outcome, Receiver, Turn
from sdschat.node.roster import MEMBERSHIP_KEY, Roster
from sdschat.node.storeclient import SYNCED_KEY, StoreClient
from sdschat.node.wirelog import WireLog
from sdschat.sds import MessageChannel
from sdschat.store import EventRow, MessageRow, Store
from sdschat.storenode import protocol as store_proto


class FakeHost:
    """What the node gives its collaborators, recorded: a clock that only moves when told, the events told, the
    batches persisted, the frames queued, the membership messages sent and the refusals."""

    def __init__(
        self,
        tmp_path: Path,
        key: ChannelKey,
        identity: Identity,
        *,
        admins: tuple[str, ...] = (),
        use_store: bool = False,
    ) -> None:
        self.config = NodeConfig(
            "alice", key, tmp_path / "alice.db", use_store=use_store, admins=admins, membership=True
        )
        self.key, self.nick, self.identity = key, "alice", identity
        self.sign = signer(identity, key.channel_binding)
        self.t = 1_000_000
        self.channel: MessageChannel | None = None
        self.stopping = False
        self.events: list[ev.NodeEvent] = []
        self.batches: list[dict] = []
        self.out: list[Outbound] = []
        self.sent: list[tuple[str, dict]] = []
        self.rejected: list[tuple[str, str]] = []
        self.frames: list[tuple[bytes, str]] = []
        self.subscribed: list[str] = []
        self.counters = dict.fromkeys(
            ("undecryptable", "rejected", "impersonation", "received_frames", "frames_on_content_signature"), 0
        )
        self.wire = WireLog()
        self.transport = None
        self.book: MessageBook | None = None
        self.roster: Roster | None = None
        self.receiver: Receiver | None = None
        self.worked_ms = 0

    @property
    def participant_id(self) -> str:
        return self.identity.participant_id

    def now(self) -> int:
        return self.t

    def emit(self, event: ev.NodeEvent) -> None:
        self.events.append(event)

    def persist(self, now: int, **batch) -> None:
        self.batches.append(batch)

    def enqueue(self, item: Outbound) -> None:
        self.out.append(item)

    def wake(self) -> None:
        pass

    def count(self, name: str) -> None:
        self.counters[name] += 1

    def spawn(self, coro, name: str):
        coro.close()  # (nothing here runs the node's tasks)

    def has_task(self, name: str) -> bool:
        return False

    async def send_control(self, kind: str, data: dict, text: str = "") -> str:
        self.sent.append((kind, data))
        return f"{len(self.sent):064x}"

    async def wait_ready(self) -> None:
        pass

    def names(self) -> dict[str, str | None]:
        assert self.book is not None
        return {p: row.nick for p, row in self.book.participants.items()}

    def subscribe(self, topic: str) -> None:
        self.subscribed.append(topic)

    def unsubscribe(self, topic: str) -> None:
        pass

    def catch_up(self) -> None:
        pass

    def take_events(self, events, now: int) -> None:
        assert self.receiver is not None
        self.receiver.handle(events, Turn(now))

    def take_frame(self, payload: bytes, source: str) -> None:
        self.frames.append((payload, source))

    def reject(self, reason: str, detail: str, now: int) -> None:
        self.rejected.append((reason, detail))

    async def scrub(self) -> None:
        pass

    def peer_worked(self, now: int) -> None:
        self.worked_ms = now

    def topics(self) -> list[str]:
        assert self.roster is not None
        return self.roster.membership.topics()

    # ---- what the tests read

    def rows(self, kind: str) -> list[EventRow]:
        return [r for b in self.batches for r in b.get("events", ()) if r.kind == kind]

    def messages(self) -> list[MessageRow]:
        return [m for b in self.batches for m in b.get("messages", ())]


async def assemble(tmp_path: Path, *, admins_me: bool = False) -> tuple[FakeHost, Store]:
    """Alice's roster, receiver and store client on a fake door, her engine and a real database."""
    key, me = ChannelKey.generate("doors"), Identity.generate()
    host = FakeHost(tmp_path, key, me, admins=(me.participant_id,) if admins_me else ())
    store = await Store.open(host.config.db_path)
    host.book = MessageBook(lambda: me.participant_id, host.emit, 100, lambda: host.nick)
    host.roster = Roster(host, host.book)
    client = StoreClient(host)
    host.receiver = Receiver(host, host.book, host.roster, client)
    await host.roster.load(me, store)
    host.channel = MessageChannel(key.channel_id, me.participant_id, node_channel_config(), host.t, journal=True)
    return host, store


def envelope(
    key: ChannelKey,
    author: Identity,
    channel: MessageChannel,
    app: AppPayload,
    now: int,
    publisher: Identity | None = None,
) -> bytes:
    """A sealed frame carrying ``author``'s message, as the broker would hand it on (published by ``publisher``,
    by default the author)."""
    out = channel.send(app.encode(), now, sign=signer(author, key.channel_binding))
    return key.seal(pack(publisher or author, key.channel_binding, out.data, "message"))


def join_of(identity: Identity, now: int) -> AppPayload:
    return AppPayload.new("join", "bob", "", now, data={"x": exchange_public(identity).hex()})


# ---------------------------------------------------------------- roster


def test_roster_applies_a_join_and_names_the_member(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        roster = host.roster
        bob = Identity.generate()
        kv = roster.apply("a" * 64, bob.participant_id, join_of(bob, host.t), host.t)
        assert kv is not None and MEMBERSHIP_KEY in kv
        assert bob.participant_id in roster.membership.members
        assert ev.MembershipChanged("join", bob.participant_id, ()) in host.events
        host.book.seen(bob.participant_id, "bob", host.t, [])
        assert roster.member_of("bob") == bob.participant_id
        assert roster.member_of(bob.participant_id[:6]) == bob.participant_id
        with pytest.raises(MemberNotFound, match="no member called 'carol' here .members: bob.") as err:
            roster.member_of("carol")
        assert isinstance(err.value, UserError) and not isinstance(err.value, ValueError)  # (a ValueError is a bug)
        await store.close()

    asyncio.run(go())


def test_roster_refuses_commands_to_a_member_who_is_not_an_admin(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        with pytest.raises(NotAllowed, match="only an admin of #doors can do that"):
            host.roster.check_admin()
        with pytest.raises(NotAllowed):
            await host.roster.kick("bob")
        assert host.sent == []
        await store.close()

    asyncio.run(go())


def test_roster_kick_writes_an_epoch_message_that_removes_the_member(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path, admins_me=True)
        roster, bob, carol = host.roster, Identity.generate(), Identity.generate()
        for i, (who, nick) in enumerate(((bob, "bob"), (carol, "carol"))):
            roster.apply(f"{i:064x}", who.participant_id, join_of(who, host.t), host.t)
            host.book.seen(who.participant_id, nick, host.t, [])
        pid, epoch, count = await roster.kick("bob")
        assert pid == bob.participant_id and epoch == 1
        [(kind, data)] = host.sent
        assert kind == "epoch" and data["removed"] == [bob.participant_id] and data["epoch"] == 1
        assert bob.participant_id not in data["keys"] and carol.participant_id in data["keys"]
        with pytest.raises(MemberNotFound, match="no member called 'dave'"):
            await roster.kick("dave")
        await store.close()

    asyncio.run(go())


def test_roster_defers_a_waiting_membership_message_it_cannot_apply_yet(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        roster, bob = host.roster, Identity.generate()
        bad = AppPayload.new("admin", "bob", "", host.t, data={"add": ["not a participant id"]})
        assert roster.apply("b" * 64, bob.participant_id, bad, host.t, waiting=True) is None
        assert host.rejected == [] and roster.take_deferred("b" * 64) and not roster.take_deferred("b" * 64)
        assert roster.apply("b" * 64, bob.participant_id, bad, host.t) is None  # delivered now: refused
        assert [r for r, _ in host.rejected] == ["bad_control"]
        await store.close()

    asyncio.run(go())


def test_roster_hands_its_join_to_a_newcomer_who_says_hello(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        roster = host.roster
        app = join_of(host.identity, host.t)
        roster.sent("join", "c" * 64, app, host.t, b"join frame")
        roster.greet(Identity.generate().participant_id, host.t + 10_000)
        assert host.out == [Outbound(b"join frame", "repair", "c" * 64)]
        await store.close()

    asyncio.run(go())


# ---------------------------------------------------------------- receive pipeline


def test_receiver_shows_persists_and_logs_a_member_s_message(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        bob = Identity.generate()
        bobs = MessageChannel(host.key.channel_id, bob.participant_id, node_channel_config(), host.t)
        env = envelope(host.key, bob, bobs, AppPayload.new("msg", "bob", "hello alice", host.t), host.t)
        host.receiver.on_frame(env, topic=host.key.topic)
        [shown] = [e.message for e in host.events if isinstance(e, ev.MessageShown)]
        assert (shown.text, shown.nick, shown.state, shown.own) == ("hello alice", "bob", ev.RECEIVED, False)
        assert host.book.messages[shown.message_id] == shown
        assert [m.message_id for m in host.messages()] == [shown.message_id]
        assert {r.kind for b in host.batches for r in b.get("events", ())} >= {"received", "delivered"}
        assert host.wire.frames[-1].outcome == "delivered" and host.counters["received_frames"] == 1
        assert host.book.participants[bob.participant_id].nick == "bob"
        # the same frame again: a duplicate, recorded as such, shown once
        host.receiver.on_frame(env, topic=host.key.topic)
        assert host.wire.frames[-1].outcome == "duplicate" and len(host.rows("duplicate")) == 1
        assert sum(isinstance(e, ev.MessageShown) for e in host.events) == 1
        await store.close()

    asyncio.run(go())


def test_receiver_refuses_a_message_published_under_another_member_s_id(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        bob, mallory = Identity.generate(), Identity.generate()
        bobs = MessageChannel(host.key.channel_id, bob.participant_id, node_channel_config(), host.t)
        env = envelope(host.key, bob, bobs, AppPayload.new("msg", "bob", "hi", host.t), host.t, publisher=mallory)
        host.receiver.on_frame(env, topic=host.key.topic)
        assert [e.reason for e in host.events if isinstance(e, ev.FrameRejected)] == ["impersonation"]
        assert host.counters["impersonation"] == 1 and host.book.messages == {}
        assert host.wire.frames[-1].outcome == "rejected: impersonation"
        await store.close()

    asyncio.run(go())


def test_receiver_counts_frames_that_do_not_open_and_tells_them_once(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        for _ in range(3):
            host.receiver.on_frame(ChannelKey.generate("other").seal(b"x" * 40), topic=host.key.topic)
        assert host.counters["undecryptable"] == 3 and not host.events  # told once a second, not per frame
        host.receiver.flush_unopened()
        [told] = host.events
        assert isinstance(told, ev.FrameRejected) and told.reason == "undecryptable" and told.detail.startswith("3 ")
        await store.close()

    asyncio.run(go())


def test_receiver_queues_the_engine_s_outgoing_frames(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        out = host.channel.send(AppPayload.new("msg", "alice", "one", host.t).encode(), host.t, sign=host.sign)
        host.t += 60_000
        host.receiver.handle(host.channel.tick(host.t), Turn(host.t))
        assert any(o.reason == "resend" and o.message_id == out.message_id for o in host.out)
        await store.close()

    asyncio.run(go())


def test_an_outcome_reads_as_the_wire_view_shows_it() -> None:
    assert Outcome("delivered", released=2, acked=1).text() == "delivered (+2 released), acked 1 of ours"
    assert Outcome("buffered", waits_for=3).text() == "buffered: waits for 3"
    assert Outcome("rejected", reason="lamport_future").text() == "rejected: lamport_future"
    assert Outcome("sync", acked=2).text() == "sync, acked 2 of ours"
    assert Outcome("duplicate").text() == "duplicate"


# ---------------------------------------------------------------- store-node client


class FakeLink:
    def __init__(self) -> None:
        self.published: list[tuple[str, bytes]] = []

    async def publish(self, topic: str, body: bytes) -> bool:
        self.published.append((topic, body))
        return True


def test_store_client_records_where_a_new_member_is_in_sync(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        host.config.use_store = True
        client = StoreClient(host)
        await client.start(store)
        assert await store.kv_get(SYNCED_KEY) == str(host.t - host.config.store_sync_margin_ms)
        await store.close()

    asyncio.run(go())


def test_store_client_feeds_a_reply_s_envelopes_through_the_receive_path(tmp_path: Path) -> None:
    async def go() -> None:
        host, store = await assemble(tmp_path)
        host.config.use_store = True
        client = StoreClient(host)
        assert client.request(hashes=[b"h" * 32]) is None  # not connected: nothing asked
        host.transport = link = FakeLink()
        fut = client.request(hashes=[b"h" * 32])
        await asyncio.sleep(0)
        [(topic, body)] = link.published
        request = store_proto.parse_request(body)
        assert topic == host.config.store_request_topic and request.topic == host.key.topic
        assert request.reply_to == client.reply_topic
        client.on_reply(store_proto.encode_reply(store_proto.Reply(request.id, [b"one", b"two"])))
        reply = await client.wait(fut)
        assert reply is not None and reply.envelopes == [b"one", b"two"]
        assert host.frames == [(b"one", "store"), (b"two", "store")] and client.counters["envelopes"] == 2
        await store.close()

    asyncio.run(go())


def test_a_text_that_cannot_be_sent_is_a_user_error() -> None:
    with pytest.raises(PayloadError, match="longer than") as err:
        AppPayload.new("msg", "alice", "x" * 20_000, 0)
    assert isinstance(err.value, UserError)
